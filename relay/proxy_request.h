// --egress's request parser: the head of an HTTP proxy request, as a client in the sandbox sent
// it, into what it asks for. Pure: it reads only the bytes it is given (unit-tested in
// tests/unit/egress_test.cc, fuzzed in tests/fuzz/egress_request_fuzz.cc).
// Runs in: worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cocoon::relay {

// What a client asked for. forward: for plain HTTP, the head to send to the origin (origin-form
// request line, the proxy's own headers removed, a Host header naming the URI's authority,
// "Connection: close"); empty for CONNECT. body: for plain HTTP, the Content-Length; what the
// client sends after those bytes never reaches the origin (one request per connection).
struct ProxyRequest {
    bool connect = false;
    std::string host;  // lower case; an IPv6 literal without brackets
    uint16_t port = 0;
    std::string forward;
    uint64_t body = 0;
};

enum class ParseResult { Incomplete, Ok, Bad };

// The most a request head may take, with its blank line.
constexpr size_t kMaxRequestHead = size_t{16} * 1024;
// The largest plain HTTP body (Content-Length) passed on: the relay counts it in 32 bits.
constexpr uint64_t kMaxBody = UINT32_MAX;

// Parses the head at the start of `data` (the bytes received so far). Ok: `out` is filled and
// `head_size` is where the head ends (what follows is the body, or the client's first TLS
// bytes). Bad: `why` says what is wrong, for the 400 and the log, and `out` is untouched (no
// name the client sent is counted or resolved). Never reads past data.
// Security: a plain HTTP request is refused (Bad) when its Host header names another authority
// than its URI (an allowed address asked for another site), when it has more than one Host or
// Content-Length, or a Transfer-Encoding (its body's end could not be found without parsing
// chunks, and what follows the body is not forwarded).
ParseResult parse_proxy_request(std::string_view data, ProxyRequest& out, size_t& head_size, std::string& why);

}  // namespace cocoon::relay
