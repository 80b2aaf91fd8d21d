// --egress's pure decisions: the allowlist, address classes, the host's own addresses (see
// egress_policy.h). Runs in the confined relay worker and in the monitor (ns/monitor/upstream.h); makes no system calls
// (inet_pton/ntop are pure).
// Runs in: caller, monitor, worker: the caller parses --egress-allow; the worker and the monitor
//  judge each target by the same rules.
#include "relay/egress_policy.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

#include "base/sys_error.h"

namespace cocoon::relay {

namespace {

std::optional<uint16_t> parse_port_text(std::string_view text)
{
    unsigned value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || text.size() > 5 || err != std::errc() || end != text.data() + text.size() || value == 0 ||
        value > 65535)
        return std::nullopt;
    return static_cast<uint16_t>(value);
}

bool port_allowed(const AllowRule& rule, uint16_t port)
{
    return rule.port ? *rule.port == port : (port == 443 || port == 80);
}

}  // namespace

std::string lower_case(std::string_view text)
{
    std::string out(text);
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool valid_name(std::string_view name)
{
    if (name.empty() || name.size() > kMaxHostName || name.front() == '.' || name.find("..") != std::string_view::npos)
        return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
    });
}

// "host:port", "[v6]:port" or, without a port, "host" / "[v6]" (port then nullopt). False for
// anything else. host comes back without brackets.
bool split_authority(std::string_view text, std::string& host, std::optional<uint16_t>& port, bool& bracketed)
{
    bracketed = false;
    std::string_view rest;
    if (!text.empty() && text.front() == '[') {
        size_t close = text.find(']');
        if (close == std::string_view::npos)
            return false;
        host = std::string(text.substr(1, close - 1));
        rest = text.substr(close + 1);
        bracketed = true;
    } else {
        size_t colon = text.rfind(':');
        host = std::string(text.substr(0, colon));
        rest = colon == std::string_view::npos ? std::string_view() : text.substr(colon);
    }
    port.reset();
    if (rest.empty())
        return !host.empty();
    if (rest.front() != ':')
        return false;
    port = parse_port_text(rest.substr(1));
    return port.has_value() && !host.empty();
}

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b)
{
    // An IPv4-mapped IPv6 address is the IPv4 address: the kernel connects to it as such.
    auto v4 = [](const sockaddr_storage& s, in_addr& out) {
        if (s.ss_family == AF_INET) {
            out = reinterpret_cast<const sockaddr_in&>(s).sin_addr;
            return true;
        }
        const in6_addr& a6 = reinterpret_cast<const sockaddr_in6&>(s).sin6_addr;
        if (s.ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&a6))
            return false;
        std::memcpy(&out, a6.s6_addr + 12, sizeof out);
        return true;
    };
    in_addr a4{}, b4{};
    const bool a_is_v4 = v4(a, a4), b_is_v4 = v4(b, b4);
    if (a_is_v4 || b_is_v4)
        return a_is_v4 && b_is_v4 && a4.s_addr == b4.s_addr;
    if (a.ss_family != AF_INET6 || b.ss_family != AF_INET6)
        return false;
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
}

AllowRule parse_allow_rule(const std::string& pattern)
{
    const std::string option = "--egress-allow " + pattern;
    AllowRule rule;
    std::string host;
    bool bracketed = false;
    if (!split_authority(pattern, host, rule.port, bracketed))
        throw UsageError(option + ": expected HOST, *.SUFFIX, an IP address or [IPv6], with an optional :PORT");
    if (auto address = parse_ip_literal(host, 0)) {
        if (bracketed != (address->ss_family == AF_INET6))
            throw UsageError(option + ": an IPv6 address is written in brackets, [::1]");
        rule.address = address;
        rule.host = address_text(*address);
        return rule;
    }
    if (bracketed)
        throw UsageError(option + ": not an IPv6 address in brackets");
    host = lower_case(host);
    if (host.rfind("*.", 0) == 0) {
        rule.wildcard = true;
        host = host.substr(1);  // ".suffix"
        if (!valid_name(host.substr(1)) || host.find('*') != std::string::npos)
            throw UsageError(option + ": not a host name after *.");
    } else if (!valid_name(host)) {
        throw UsageError(option + ": not a host name");
    }
    rule.host = host;
    return rule;
}

namespace {

bool names(const AllowRule& rule, const std::string& host)
{
    if (rule.address)
        return false;
    return rule.wildcard ? host.size() > rule.host.size() &&
                               host.compare(host.size() - rule.host.size(), rule.host.size(), rule.host) == 0
                         : host == rule.host;
}

}  // namespace

bool Allowlist::allows_name(const std::string& host, uint16_t port) const
{
    return std::any_of(m_rules.begin(), m_rules.end(),
                       [&](const AllowRule& rule) { return port_allowed(rule, port) && names(rule, host); });
}

bool Allowlist::allows_name_on_some_port(const std::string& host) const
{
    return std::any_of(m_rules.begin(), m_rules.end(), [&](const AllowRule& rule) { return names(rule, host); });
}

std::vector<uint16_t> Allowlist::name_ports() const
{
    std::vector<uint16_t> ports;
    for (const AllowRule& rule : m_rules) {
        if (rule.address)
            continue;
        for (uint16_t port : rule.port ? std::vector<uint16_t>{*rule.port} : std::vector<uint16_t>{443, 80})
            if (std::find(ports.begin(), ports.end(), port) == ports.end())
                ports.push_back(port);
    }
    return ports;
}

bool Allowlist::lists_address(const sockaddr_storage& address, uint16_t port) const
{
    for (const AllowRule& rule : m_rules)
        if (rule.address && port_allowed(rule, port) && same_address(*rule.address, address))
            return true;
    return false;
}

std::optional<sockaddr_storage> parse_ip_literal(const std::string& text, uint16_t port)
{
    // Security: inet_pton reads up to the first NUL, so "::1" followed by a NUL and 300 more
    // bytes would pass as ::1, a host of any length and bytes (found by the fuzzer).
    if (text.size() >= INET6_ADDRSTRLEN || text.find('\0') != std::string::npos)
        return std::nullopt;
    sockaddr_storage out{};
    auto* in4 = reinterpret_cast<sockaddr_in*>(&out);
    if (::inet_pton(AF_INET, text.c_str(), &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        return out;
    }
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    if (::inet_pton(AF_INET6, text.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        return out;
    }
    return std::nullopt;
}

std::string internal_address_class(const sockaddr_storage& address)
{
    uint32_t v4 = 0;
    if (address.ss_family == AF_INET) {
        v4 = ntohl(reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr);
    } else {
        const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
        const uint8_t* b = a.s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a) || IN6_IS_ADDR_V4COMPAT(&a)) {
            v4 = uint32_t{b[12]} << 24 | uint32_t{b[13]} << 16 | uint32_t{b[14]} << 8 | b[15];
        } else {
            if (IN6_IS_ADDR_LOOPBACK(&a))
                return "loopback";
            if (IN6_IS_ADDR_UNSPECIFIED(&a))
                return "unspecified";
            if (IN6_IS_ADDR_LINKLOCAL(&a))
                return "link-local";
            if (IN6_IS_ADDR_SITELOCAL(&a) || (b[0] & 0xfe) == 0xfc)
                return "private";
            if (IN6_IS_ADDR_MULTICAST(&a))
                return "multicast";
            if (b[0] == 0x20 && b[1] == 0x02)
                return "6to4";  // embeds an IPv4 address of any class
            if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b)
                return "NAT64";
            return "";
        }
    }
    auto in = [&](uint32_t net, int bits) { return (v4 >> (32 - bits)) == (net >> (32 - bits)); };
    if (in(0x7f000000, 8))
        return "loopback";
    if (in(0x00000000, 8))
        return "unspecified";
    if (in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16))
        return "private";
    if (in(0xa9fe0000, 16))
        return "link-local";
    if (in(0x64400000, 10))
        return "shared (CGNAT)";
    if (in(0xe0000000, 4) || v4 == 0xffffffff)
        return "multicast or broadcast";
    if (in(0xf0000000, 4))
        return "reserved";
    return "";
}

std::string address_text(const sockaddr_storage& address)
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (address.ss_family == AF_INET)
        ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(address).sin_addr, text, sizeof text);
    else if (address.ss_family == AF_INET6)
        ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, text, sizeof text);
    return text;
}

std::string EgressPolicy::check_literal(const std::string& host, const sockaddr_storage& address, uint16_t port) const
{
    // Security: an address is reached only if it is listed as one; a name rule never covers it.
    if (m_allow.lists_address(address, port))
        return "";
    return "the address " + host + " port " + std::to_string(port) + " is not on the allowlist";
}

std::string EgressPolicy::check_name(const std::string& host, uint16_t port) const
{
    if (m_allow.allows_name(host, port))
        return "";
    return host + " port " + std::to_string(port) + " is not on the allowlist";
}

std::vector<sockaddr_storage> EgressPolicy::admit(const std::string& host,
                                                  const std::vector<sockaddr_storage>& resolved, uint16_t port,
                                                  std::string& refused) const
{
    // Security: a public name that resolves to the host's own services (loopback, the LAN,
    // link-local metadata, or any address of the host's own interfaces, such as its eth0
    // address, where services listen on 0.0.0.0) is refused unless that very address is
    // listed: DNS rebinding and SSRF reach nothing the operator did not name.
    std::vector<sockaddr_storage> out;
    for (const sockaddr_storage& a : resolved) {
        std::string kind = internal_address_class(a);
        kind = kind.empty() ? kind : "a " + kind + " address";
        if (kind.empty() &&
            std::any_of(m_own.begin(), m_own.end(), [&](const auto& own) { return same_address(own, a); }))
            kind = "an address of this host";
        if (kind.empty() || m_allow.lists_address(a, port))
            out.push_back(a);
        else if (refused.empty())
            refused = host + " resolves to " + address_text(a) + ", " + kind + " that is not on the allowlist";
    }
    return out;
}

}  // namespace cocoon::relay
