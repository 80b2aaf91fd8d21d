// --egress's decisions, as pure functions: the allowlist parsed once from --egress-allow, the
// address classes, and which of the addresses a name resolved to may be reached. No system
// calls; unit-tested and fuzzed. Runs in the confined relay worker, and in the monitor, which
// makes the same decision again before it connects (ns/monitor/upstream.h).
// Runs in: caller, monitor, worker: the caller parses --egress-allow; the worker and the monitor
//  judge each target by the same rules.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cocoon::relay {

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
    // A name some rule allows on some port: the transparent resolver's question (relay/dns.h).
    bool allows_name_on_some_port(const std::string& host) const;
    // The ports the name rules allow (443 and 80 for a rule without one), each once, in the
    // rules' order: where transparent egress listens.
    std::vector<uint16_t> name_ports() const;
    // An address that an IP literal rule lists, with the port.
    bool lists_address(const sockaddr_storage& address, uint16_t port) const;

private:
    std::vector<AllowRule> m_rules;
};

// A DNS name as a client may ask for it: letters, digits, '-', '.', '_' (seen in real names),
// 1 to kMaxHostName bytes, no empty label.
constexpr size_t kMaxHostName = 253;
bool valid_name(std::string_view name);

std::string lower_case(std::string_view text);

// "host:port", "[v6]:port" or, without a port, "host" / "[v6]" (port then nullopt). False for
// anything else. host comes back without brackets.
bool split_authority(std::string_view text, std::string& host, std::optional<uint16_t>& port, bool& bracketed);

// IPv4 or IPv6 literal (no brackets) -> address with `port`; nullopt for anything else.
std::optional<sockaddr_storage> parse_ip_literal(const std::string& text, uint16_t port);

// Why an address is not on the public internet ("loopback", "private", "link-local", ...), or
// empty for a public unicast address. IPv4-mapped IPv6 addresses are judged as IPv4.
std::string internal_address_class(const sockaddr_storage& address);

std::string address_text(const sockaddr_storage& address);

// The same host address (ports ignored); an IPv4-mapped IPv6 address equals its IPv4 address.
bool same_address(const sockaddr_storage& a, const sockaddr_storage& b);

// The allowlist and what the host is, decided once; each request asks it.
class EgressPolicy {
public:
    // own: the addresses of the host's interfaces (getifaddrs, every interface), which a name
    // may not resolve to unless the address itself is listed.
    explicit EgressPolicy(std::vector<AllowRule> rules, std::vector<sockaddr_storage> own = {})
        : m_allow(std::move(rules)), m_own(std::move(own))
    {
    }
    void set_own_addresses(std::vector<sockaddr_storage> own) { m_own = std::move(own); }

    // Empty when allowed, else the reason for the 403.
    std::string check_literal(const std::string& host, const sockaddr_storage& address, uint16_t port) const;
    std::string check_name(const std::string& host, uint16_t port) const;
    // The transparent resolver answers this name (with an address of its own), else NXDOMAIN.
    bool answers_name(const std::string& host) const { return m_allow.allows_name_on_some_port(host); }

    // The addresses `host` resolved to that may be reached, in the resolver's order. When none
    // may, `refused` says why (the first refused address).
    std::vector<sockaddr_storage> admit(const std::string& host, const std::vector<sockaddr_storage>& resolved,
                                        uint16_t port, std::string& refused) const;

private:
    Allowlist m_allow;
    std::vector<sockaddr_storage> m_own;
};

}  // namespace cocoon::relay
