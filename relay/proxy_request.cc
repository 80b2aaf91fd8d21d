// --egress's request parser (relay/proxy_request.h).
// Security: every byte is the sandbox's. The parser reads only the head it was given (capped at
// kMaxRequestHead by the caller and here), and a name is checked before anything keeps it.
// Runs in: worker.
#include "relay/proxy_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

#include "relay/egress_policy.h"

namespace cocoon::relay {
namespace {

std::string trim(std::string_view text)
{
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
        text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
        text.remove_suffix(1);
    return std::string(text);
}

struct RequestLine {
    std::string_view method, target, version;
};

// "METHOD TARGET HTTP/1.x", an upper-case method, exactly two spaces.
bool parse_request_line(std::string_view line, RequestLine& out)
{
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return false;
    out = {line.substr(0, sp1), line.substr(sp1 + 1, sp2 - sp1 - 1), line.substr(sp2 + 1)};
    return !out.method.empty() && !out.target.empty() && (out.version == "HTTP/1.1" || out.version == "HTTP/1.0") &&
           std::all_of(out.method.begin(), out.method.end(),
                       [](char c) { return std::isupper(static_cast<unsigned char>(c)); });
}

// The header lines a request keeps for the origin, and the ones the parser looks at.
struct Headers {
    std::string kept;  // each with its CRLF
    std::vector<std::string> hosts, lengths;
    bool chunked = false;
};

// Header lines, each ending in CRLF: name ":" value, no control bytes; obsolete line folding is
// refused. The proxy's own headers are dropped; the origin gets "Connection: close" instead of
// the client's, so one upstream connection carries this request's exchange only.
bool parse_headers(std::string_view headers, Headers& out)
{
    for (size_t pos = 0; pos < headers.size();) {
        const size_t eol = headers.find("\r\n", pos);
        const std::string_view h = headers.substr(pos, eol - pos);
        pos = eol + 2;
        const size_t colon = h.find(':');
        if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t' ||
            std::any_of(h.begin(), h.end(),
                        [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; }))
            return false;
        const std::string name = lower_case(h.substr(0, colon));
        if (name.find_first_of(" \t") != std::string::npos)
            return false;
        if (name == "proxy-connection" || name == "proxy-authorization" || name == "connection" || name == "keep-alive")
            continue;
        if (name == "host")
            out.hosts.push_back(trim(h.substr(colon + 1)));
        else if (name == "content-length")
            out.lengths.push_back(trim(h.substr(colon + 1)));
        else if (name == "transfer-encoding")
            out.chunked = true;
        out.kept.append(h).append("\r\n");
    }
    return true;
}

// Security: one request per connection: the origin gets this request's head and body and nothing
// the client sends after them (no pipelined request to another site), so the body's end must be
// known from Content-Length alone. "" or why not.
std::string body_length(const Headers& headers, uint64_t& body)
{
    if (headers.chunked)
        return "Transfer-Encoding in a request is not proxied: send Content-Length";
    if (headers.lengths.size() > 1)
        return "more than one Content-Length header";
    if (headers.lengths.empty())
        return "";
    const std::string& text = headers.lengths[0];
    auto [end_at, err] = std::from_chars(text.data(), text.data() + text.size(), body);
    if (text.empty() || err != std::errc() || end_at != text.data() + text.size())
        return "malformed Content-Length";
    if (body > kMaxBody)
        return "a body over " + std::to_string(kMaxBody) + " bytes: send it through CONNECT";
    return "";
}

// A plain HTTP request (absolute http:// URI): its authority into host and port, its head for the
// origin into forward. "" or why not.
std::string plain_http(const RequestLine& line, Headers& headers, std::string& host, std::optional<uint16_t>& port,
                       bool& bracketed, std::string& forward, uint64_t& body)
{
    constexpr std::string_view kScheme = "http://";
    const std::string_view target = line.target;
    if (target.size() <= kScheme.size() || lower_case(target.substr(0, kScheme.size())) != kScheme)
        return "only CONNECT and absolute http:// URIs are proxied";
    const std::string_view rest = target.substr(kScheme.size());
    const size_t slash = rest.find_first_of("/?#");
    const std::string_view authority = rest.substr(0, slash);
    std::string path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
    if (path.front() != '/')
        path.insert(0, "/");
    if (authority.find('@') != std::string_view::npos || !split_authority(authority, host, port, bracketed))
        return "malformed URI authority";
    if (!port)
        port = 80;
    // Security: the origin serves what the Host header names, so it must name the URI's
    // authority; else an allowed address (a CDN, a shared host) could be asked for any site.
    if (headers.hosts.size() > 1)
        return "more than one Host header";
    if (headers.hosts.size() == 1) {
        std::string named;
        std::optional<uint16_t> named_port;
        bool named_bracketed = false;
        if (!split_authority(headers.hosts[0], named, named_port, named_bracketed) ||
            lower_case(named) != lower_case(host) || named_port.value_or(80) != *port || named_bracketed != bracketed)
            return "the Host header does not name the request's authority";
    } else {
        headers.kept += "Host: " + std::string(authority) + "\r\n";
    }
    if (std::string why = body_length(headers, body); !why.empty())
        return why;
    forward = std::string(line.method) + " " + path + " " + std::string(line.version) + "\r\n" + headers.kept +
              "Connection: close\r\n\r\n";
    return "";
}

// Where the head ends (with its blank line): Ok and head_size; Incomplete; or Bad and why.
ParseResult find_head(std::string_view data, size_t& head_size, std::string& why)
{
    const size_t end = data.find("\r\n\r\n");
    if (end == std::string_view::npos ? data.size() >= kMaxRequestHead : end + 4 > kMaxRequestHead) {
        why = "request head longer than " + std::to_string(kMaxRequestHead) + " bytes";
        return ParseResult::Bad;
    }
    if (end == std::string_view::npos) {
        // A request line that is already wrong need not wait for the rest.
        if (data.find("\r\n") == std::string_view::npos && data.find('\n') != std::string_view::npos) {
            why = "lines must end with CRLF";
            return ParseResult::Bad;
        }
        return ParseResult::Incomplete;
    }
    head_size = end + 4;
    return ParseResult::Ok;
}

}  // namespace

ParseResult parse_proxy_request(std::string_view data, ProxyRequest& out, size_t& head_size, std::string& why)
{
    size_t size = 0;
    if (ParseResult found = find_head(data, size, why); found != ParseResult::Ok)
        return found;
    const std::string_view head = data.substr(0, size - 2);  // each line with its CRLF
    const size_t line_end = head.find("\r\n");
    RequestLine line;
    if (!parse_request_line(head.substr(0, line_end), line)) {
        why = "malformed request line";
        return ParseResult::Bad;
    }
    Headers headers;
    if (!parse_headers(head.substr(line_end + 2), headers)) {
        why = "malformed header line";
        return ParseResult::Bad;
    }
    std::string host, forward;
    std::optional<uint16_t> port;
    bool bracketed = false;
    uint64_t body = 0;
    if (line.method == "CONNECT") {
        if (!split_authority(line.target, host, port, bracketed) || !port)
            why = "CONNECT needs host:port";
    } else {
        why = plain_http(line, headers, host, port, bracketed, forward, body);
    }
    if (!why.empty())
        return ParseResult::Bad;
    // Security: the name is checked before anything keeps it (the tally, the log's host field)
    // or resolves it: a name longer than kMaxHostName, or with other bytes, is a 400.
    const std::string name = lower_case(host);
    const bool literal = parse_ip_literal(name, 0).has_value();
    if (bracketed ? !literal || name.find(':') == std::string::npos : !literal && !valid_name(name)) {
        why = name.size() > kMaxHostName ? "host name longer than " + std::to_string(kMaxHostName) + " bytes"
                                         : "not a host name or address: " + std::string(host.substr(0, 64));
        return ParseResult::Bad;
    }
    head_size = size;
    out = {line.method == "CONNECT", name, *port, std::move(forward), body};
    return ParseResult::Ok;
}

}  // namespace cocoon::relay
