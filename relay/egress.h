// --egress PORT: an HTTP proxy inside the monitor. The sandbox's clients speak HTTP proxy to
// 127.0.0.1:PORT and [::1]:PORT (CONNECT host:port for HTTPS, absolute-URI requests for plain
// HTTP); the monitor checks each target against --egress-allow, resolves it on the host, connects
// to the address it checked, and hands both sockets to the relay engine. Runs in the monitor.
//
// The parts that decide (the request parser, the allowlist, the address classes) are pure
// functions, unit-tested and fuzzed; Egress is the event loop around them.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::relay {

class Relay;
class Resolver;

// One --egress-allow PATTERN: "host", "*.suffix" (any name below suffix, not suffix itself), an
// IPv4 literal or a bracketed IPv6 literal, each with an optional ":port". Without a port the
// rule allows 443 and 80.
struct AllowRule {
    std::string host;  // lower case; for "*.suffix": ".suffix"
    bool wildcard = false;
    std::optional<sockaddr_storage> address;  // an IP literal rule
    std::optional<uint16_t> port;
};

// Throws UsageError naming "--egress-allow PATTERN" for a pattern that is none of the above.
AllowRule parse_allow_rule(const std::string& pattern);

class Allowlist {
public:
    Allowlist() = default;
    explicit Allowlist(std::vector<AllowRule> rules) : m_rules(std::move(rules)) {}
    // A name (never an IP literal) and port that a rule allows.
    bool allows_name(const std::string& host, uint16_t port) const;
    // An address that an IP literal rule lists, with the port.
    bool lists_address(const sockaddr_storage& address, uint16_t port) const;

private:
    std::vector<AllowRule> m_rules;
};

// What a client asked for. forward: for plain HTTP, the head to send to the origin (origin-form
// request line, the proxy's own headers removed, "Connection: close"); empty for CONNECT.
struct ProxyRequest {
    bool connect = false;
    std::string host;  // lower case; an IPv6 literal without brackets
    uint16_t port = 0;
    std::string forward;
};

enum class ParseResult { Incomplete, Ok, Bad };

// The most a request head may take, with its blank line.
constexpr size_t kMaxRequestHead = size_t{16} * 1024;

// Parses the head at the start of `data` (the bytes received so far). Ok: `out` is filled and
// `head_size` is where the head ends (what follows is the body, or the client's first TLS
// bytes). Bad: `why` says what is wrong, for the 400 and the log. Never reads past data.
ParseResult parse_proxy_request(std::string_view data, ProxyRequest& out, size_t& head_size, std::string& why);

// IPv4 or IPv6 literal (no brackets) -> address with `port`; nullopt for anything else.
std::optional<sockaddr_storage> parse_ip_literal(const std::string& text, uint16_t port);

// Why an address is not on the public internet ("loopback", "private", "link-local", ...), or
// empty for a public unicast address. IPv4-mapped IPv6 addresses are judged as IPv4.
std::string internal_address_class(const sockaddr_storage& address);

std::string address_text(const sockaddr_storage& address);

struct EgressOptions {
    std::vector<AllowRule> allow;
    UniqueFd log;  // --egress-log: one JSON line per connection, and a summary at the end
    std::chrono::milliseconds head_timeout{10'000};  // a client must send its request head in this
    size_t max_pending = 512;  // clients in their handshake at once; past it, accepting waits
};

// The handshake phase of each client: read and parse the head, check, resolve, connect, answer;
// then the relay engine moves the bytes. Owns an epoll fd that the monitor polls; resolution runs
// on a thread of its own (Resolver), so nothing here blocks.
class Egress {
public:
    Egress(EgressOptions options, Relay& relay);
    ~Egress();
    Egress(const Egress&) = delete;
    Egress& operator=(const Egress&) = delete;

    // A listening TCP socket from the sandbox (127.0.0.1:PORT or [::1]:PORT).
    void add_listener(UniqueFd listener);
    int epoll_fd() const { return m_epoll.get(); }
    void run_once();
    // Ends every handshake and writes the summary line to the log.
    void close_all();

    struct Tally {
        size_t allowed = 0, refused = 0;
        uint64_t up = 0, down = 0;
    };

private:
    struct Client;
    using Clock = std::chrono::steady_clock;

    void on_listener(int fd);
    void on_client(uint64_t id, uint32_t events);
    void on_resolved();
    void on_timer();
    void read_head(Client& c);
    void decide(Client& c);
    void start_connect(Client& c);
    void on_connected(Client& c);
    void refuse(Client& c, int status, const std::string& reason);
    void finish(uint64_t id);
    void log_line(const Client& c, bool allowed, const std::string& reason, uint64_t up, uint64_t down);
    void sync_listeners();

    EgressOptions m_options;
    Allowlist m_allow;
    Relay& m_relay;
    UniqueFd m_epoll, m_timer;
    std::vector<UniqueFd> m_listeners;
    bool m_listening = true;
    std::map<uint64_t, std::unique_ptr<Client>> m_clients;
    uint64_t m_next_id = 1;
    std::unique_ptr<Resolver> m_resolver;
    std::map<std::string, Tally> m_tally;  // "host:port" -> what happened, for the summary
    bool m_closed = false;
    size_t m_accepted_this_second = 0;
    Clock::time_point m_second_started = Clock::now();
};

}  // namespace cocoon::relay
