// --egress: the request parser, the allowlist, the address classes, and the handshake loop.
// Security: everything a client sends is hostile. The head is read into a buffer capped at
// kMaxRequestHead, with a deadline; the parser looks only at the bytes it was given; a name is
// resolved on the host and the monitor connects to the very address it checked (no second
// lookup that a rebinding DNS server could answer differently).
#include "relay/egress.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>

#include "base/sys_error.h"
#include "relay/relay.h"
#include "relay/resolver.h"

namespace cocoon::relay {

namespace {

std::string lower(std::string_view text)
{
    std::string out(text);
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::optional<uint16_t> parse_port_text(std::string_view text)
{
    unsigned value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || text.size() > 5 || err != std::errc() || end != text.data() + text.size() || value == 0 ||
        value > 65535)
        return std::nullopt;
    return static_cast<uint16_t>(value);
}

// A DNS name as a client may ask for it: letters, digits, '-', '.', '_' (seen in real names),
// 1 to 253 bytes, no empty label.
bool valid_name(std::string_view name)
{
    if (name.empty() || name.size() > 253 || name.front() == '.' || name.find("..") != std::string_view::npos)
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
    if (a.ss_family != b.ss_family)
        return false;
    if (a.ss_family == AF_INET)
        return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
               reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
}

bool port_allowed(const AllowRule& rule, uint16_t port)
{
    return rule.port ? *rule.port == port : (port == 443 || port == 80);
}

std::string json_string(std::string_view text)
{
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
            out += esc;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string utc_now()
{
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm parts{};
    ::gmtime_r(&ts.tv_sec, &parts);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &parts);
    char millis[8];
    std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(ts.tv_nsec / 1000000) % 1000);
    return std::string(date) + millis;
}

void write_line(int fd, const std::string& line)
{
    std::string text = line + "\n";
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;  // the log's reader is gone: the run goes on without it
        done += static_cast<size_t>(n);
    }
}

const char* reason_phrase(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 408:
        return "Request Timeout";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    default:
        return "Gateway Timeout";
    }
}

constexpr uint64_t kTimerToken = 1;
constexpr uint64_t kResolverToken = 2;
constexpr uint64_t kListenerBase = 16;  // + listener index
constexpr uint64_t kFirstClient = 1 << 20;
// Accepts per second at most (the rest wait in the listen backlog), against a sandbox that
// opens connections in a loop.
constexpr size_t kAcceptsPerSecond = 2000;

}  // namespace

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
    host = lower(host);
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

bool Allowlist::allows_name(const std::string& host, uint16_t port) const
{
    for (const AllowRule& rule : m_rules) {
        if (rule.address || !port_allowed(rule, port))
            continue;
        if (rule.wildcard ? host.size() > rule.host.size() &&
                                host.compare(host.size() - rule.host.size(), rule.host.size(), rule.host) == 0
                          : host == rule.host)
            return true;
    }
    return false;
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

ParseResult parse_proxy_request(std::string_view data, ProxyRequest& out, size_t& head_size, std::string& why)
{
    size_t end = data.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (data.size() >= kMaxRequestHead) {
            why = "request head longer than " + std::to_string(kMaxRequestHead) + " bytes";
            return ParseResult::Bad;
        }
        // A request line that is already wrong need not wait for the rest.
        size_t line_end = data.find("\r\n");
        if (line_end == std::string_view::npos && data.find('\n') != std::string_view::npos) {
            why = "lines must end with CRLF";
            return ParseResult::Bad;
        }
        return ParseResult::Incomplete;
    }
    if (end + 4 > kMaxRequestHead) {
        why = "request head longer than " + std::to_string(kMaxRequestHead) + " bytes";
        return ParseResult::Bad;
    }
    head_size = end + 4;
    std::string_view head = data.substr(0, end + 2);  // each line with its CRLF
    size_t line_end = head.find("\r\n");
    std::string_view line = head.substr(0, line_end);
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
        why = "malformed request line";
        return ParseResult::Bad;
    }
    std::string_view method = line.substr(0, sp1);
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = line.substr(sp2 + 1);
    if (method.empty() || target.empty() || (version != "HTTP/1.1" && version != "HTTP/1.0") ||
        !std::all_of(method.begin(), method.end(),
                     [](char c) { return std::isupper(static_cast<unsigned char>(c)); })) {
        why = "malformed request line";
        return ParseResult::Bad;
    }
    // Header lines: name ":" value, no control bytes; obsolete line folding is refused.
    std::string_view headers = head.substr(line_end + 2);
    std::string kept;
    for (size_t pos = 0; pos < headers.size();) {
        size_t eol = headers.find("\r\n", pos);
        std::string_view h = headers.substr(pos, eol - pos);
        pos = eol + 2;
        size_t colon = h.find(':');
        if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t' ||
            std::any_of(h.begin(), h.end(),
                        [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; })) {
            why = "malformed header line";
            return ParseResult::Bad;
        }
        std::string name = lower(h.substr(0, colon));
        if (name.find_first_of(" \t") != std::string::npos) {
            why = "malformed header line";
            return ParseResult::Bad;
        }
        // The proxy's own headers stop here; the origin gets "Connection: close" instead of the
        // client's, so one upstream connection carries this request's exchange only.
        if (name == "proxy-connection" || name == "proxy-authorization" || name == "connection" || name == "keep-alive")
            continue;
        kept.append(h).append("\r\n");
    }

    std::string host;
    std::optional<uint16_t> port;
    bool bracketed = false;
    if (method == "CONNECT") {
        if (!split_authority(target, host, port, bracketed) || !port) {
            why = "CONNECT needs host:port";
            return ParseResult::Bad;
        }
        out.connect = true;
        out.forward.clear();
    } else {
        constexpr std::string_view kScheme = "http://";
        if (target.size() <= kScheme.size() || lower(target.substr(0, kScheme.size())) != kScheme) {
            why = "only CONNECT and absolute http:// URIs are proxied";
            return ParseResult::Bad;
        }
        std::string_view rest = target.substr(kScheme.size());
        size_t slash = rest.find_first_of("/?#");
        std::string_view authority = rest.substr(0, slash);
        std::string path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
        if (path.front() != '/')
            path.insert(0, "/");
        if (authority.find('@') != std::string_view::npos || !split_authority(authority, host, port, bracketed)) {
            why = "malformed URI authority";
            return ParseResult::Bad;
        }
        if (!port)
            port = 80;
        out.connect = false;
        out.forward =
            std::string(method) + " " + path + " " + std::string(version) + "\r\n" + kept + "Connection: close\r\n\r\n";
    }
    out.host = lower(host);
    out.port = *port;
    const bool literal = parse_ip_literal(out.host, 0).has_value();
    if (bracketed ? !literal || out.host.find(':') == std::string::npos : !literal && !valid_name(out.host)) {
        why = "not a host name or address: " + std::string(host.substr(0, 64));
        return ParseResult::Bad;
    }
    return ParseResult::Ok;
}

struct Egress::Client {
    uint64_t id = 0;
    UniqueFd fd;
    UniqueFd upstream;
    enum class State { Head, Resolving, Connecting, Sending } state = State::Head;
    std::string buffer;  // the head as received, then what is still to send upstream
    size_t head_size = 0;
    ProxyRequest request;
    std::vector<sockaddr_storage> candidates;
    sockaddr_storage target{};
    Clock::time_point deadline;
    Clock::time_point started;
    std::string when;  // the time it was accepted, for the log
    uint64_t sent = 0;  // bytes sent upstream before the relay took over
    std::string key() const { return request.host + ":" + std::to_string(request.port); }
};

Egress::Egress(EgressOptions options, Relay& relay)
    : m_options(std::move(options)), m_allow(m_options.allow), m_relay(relay),
      m_epoll(static_cast<int>(check(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1 (egress)"))),
      m_timer(static_cast<int>(
          check(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), "timerfd_create (egress)"))),
      m_resolver(std::make_unique<Resolver>())
{
    for (auto [fd, token] : {std::pair{m_timer.get(), kTimerToken}, {m_resolver->fd(), kResolverToken}}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = token;
        check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, fd, &ev), "epoll_ctl (egress)");
    }
    // Deadlines and the accept rate are looked at every 250 ms.
    itimerspec every{{0, 250'000'000}, {0, 250'000'000}};
    check(::timerfd_settime(m_timer.get(), 0, &every, nullptr), "timerfd_settime (egress)");
}

Egress::~Egress()
{
    // The relay's close hooks of adopted connections call back into this object: they run now,
    // while it is whole (the monitor's normal end has closed them already).
    m_relay.close_all();
    close_all();
}

void Egress::add_listener(UniqueFd listener)
{
    int flags = static_cast<int>(check(::fcntl(listener.get(), F_GETFL), "fcntl (egress listener)"));
    check(::fcntl(listener.get(), F_SETFL, flags | O_NONBLOCK), "fcntl (egress listener)");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerBase + m_listeners.size();
    check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, listener.get(), &ev), "epoll_ctl (egress listener)");
    m_listeners.push_back(std::move(listener));
}

void Egress::run_once()
{
    epoll_event events[128];
    int n = ::epoll_wait(m_epoll.get(), events, 128, 0);
    for (int i = 0; i < n; ++i) {
        const uint64_t token = events[i].data.u64;
        if (token == kTimerToken)
            on_timer();
        else if (token == kResolverToken)
            on_resolved();
        else if (token >= kFirstClient)
            on_client(token, events[i].events);
        else if (token >= kListenerBase && token - kListenerBase < m_listeners.size())
            on_listener(m_listeners[token - kListenerBase].get());
    }
}

void Egress::on_listener(int listener)
{
    for (int batch = 0; batch < 64; ++batch) {
        if (m_clients.size() >= m_options.max_pending || m_accepted_this_second >= kAcceptsPerSecond) {
            sync_listeners();
            return;
        }
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;  // EAGAIN, or out of fds: the client waits in the backlog
        ++m_accepted_this_second;
        auto client = std::make_unique<Client>();
        client->id = kFirstClient + m_next_id++;
        client->fd.reset(fd);
        client->started = Clock::now();
        client->deadline = client->started + m_options.head_timeout;
        client->when = utc_now();
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = client->id;
        if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, fd, &ev) < 0)
            continue;  // the client is closed with its UniqueFd
        m_clients.emplace(client->id, std::move(client));
    }
}

void Egress::sync_listeners()
{
    const bool want = m_clients.size() < m_options.max_pending && m_accepted_this_second < kAcceptsPerSecond;
    if (want == m_listening)
        return;
    m_listening = want;
    for (size_t i = 0; i < m_listeners.size(); ++i) {
        epoll_event ev{};
        ev.events = want ? uint32_t{EPOLLIN} : 0U;
        ev.data.u64 = kListenerBase + i;
        ::epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, m_listeners[i].get(), &ev);
    }
}

void Egress::on_client(uint64_t id, uint32_t events)
{
    auto it = m_clients.find(id);
    if (it == m_clients.end())
        return;
    Client& c = *it->second;
    switch (c.state) {
    case Client::State::Head:
        read_head(c);
        return;
    case Client::State::Resolving:
        // The client hung up while its name was being resolved: nothing to wait for.
        if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            finish(id);
        return;
    case Client::State::Connecting:
    case Client::State::Sending:
        on_connected(c);
        return;
    }
}

void Egress::read_head(Client& c)
{
    char chunk[4096];
    for (;;) {
        const size_t room = kMaxRequestHead - std::min(kMaxRequestHead, c.buffer.size());
        if (room == 0)
            break;
        ssize_t n = ::recv(c.fd.get(), chunk, std::min(room, sizeof chunk), MSG_DONTWAIT);
        if (n > 0) {
            c.buffer.append(chunk, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        finish(c.id);  // EOF or an error before a whole head: nothing to answer
        return;
    }
    std::string why;
    switch (parse_proxy_request(c.buffer, c.request, c.head_size, why)) {
    case ParseResult::Incomplete:
        return;
    case ParseResult::Bad:
        refuse(c, 400, why);
        return;
    case ParseResult::Ok:
        decide(c);
        return;
    }
}

void Egress::decide(Client& c)
{
    const ProxyRequest& r = c.request;
    if (auto literal = parse_ip_literal(r.host, r.port)) {
        // Security: an address is reached only if it is listed as one; a name rule never
        // covers it.
        if (!m_allow.lists_address(*literal, r.port)) {
            refuse(c, 403, "the address " + r.host + " port " + std::to_string(r.port) + " is not on the allowlist");
            return;
        }
        c.candidates = {*literal};
        start_connect(c);
        return;
    }
    if (!m_allow.allows_name(r.host, r.port)) {
        refuse(c, 403, r.host + " port " + std::to_string(r.port) + " is not on the allowlist");
        return;
    }
    c.state = Client::State::Resolving;
    m_resolver->resolve(c.id, r.host, r.port);
}

void Egress::on_resolved()
{
    for (Resolution& res : m_resolver->take()) {
        auto it = m_clients.find(res.id);
        if (it == m_clients.end())
            continue;  // the client gave up
        Client& c = *it->second;
        if (!res.error.empty()) {
            refuse(c, 502, "can't resolve " + c.request.host + ": " + res.error);
            continue;
        }
        // Security: a public name that resolves to the host's own services (loopback, the LAN,
        // link-local metadata) is refused unless that very address is listed: DNS rebinding and
        // SSRF reach nothing the operator did not name.
        std::string refused;
        for (const sockaddr_storage& a : res.addresses) {
            std::string kind = internal_address_class(a);
            if (kind.empty() || m_allow.lists_address(a, c.request.port))
                c.candidates.push_back(a);
            else if (refused.empty())
                refused = c.request.host + " resolves to " + address_text(a) + ", a " + kind +
                          " address that is not on the allowlist";
        }
        if (c.candidates.empty()) {
            refuse(c, 403, refused);
            continue;
        }
        start_connect(c);
    }
}

// Connects to the next candidate address, non-blocking; on_connected sees the outcome.
void Egress::start_connect(Client& c)
{
    while (!c.candidates.empty()) {
        c.target = c.candidates.front();
        c.candidates.erase(c.candidates.begin());
        UniqueFd fd(::socket(c.target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!fd)
            continue;
        const socklen_t len = c.target.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&c.target), len) < 0 && errno != EINPROGRESS)
            continue;
        epoll_event ev{};
        ev.events = EPOLLOUT | EPOLLRDHUP;
        ev.data.u64 = c.id;
        if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, fd.get(), &ev) < 0)
            continue;
        c.upstream = std::move(fd);
        c.state = Client::State::Connecting;
        c.deadline = Clock::now() + m_options.head_timeout;
        return;
    }
    refuse(c, 502, "can't connect to " + c.key());
}

void Egress::on_connected(Client& c)
{
    if (c.state == Client::State::Connecting) {
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err == EINPROGRESS || err == EALREADY)
            return;
        if (err != 0) {
            ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, c.upstream.get(), nullptr);
            c.upstream.reset();
            if (!c.candidates.empty()) {
                start_connect(c);
                return;
            }
            refuse(c, 502,
                   "can't connect to " + address_text(c.target) + " port " + std::to_string(c.request.port) + ": " +
                       std::strerror(err));
            return;
        }
        // What goes upstream first: the rewritten head of a plain HTTP request, then whatever
        // the client sent after its head (a body, or TLS bytes sent before our answer).
        std::string rest = c.buffer.substr(c.head_size);
        c.buffer = c.request.connect ? rest : c.request.forward + rest;
        if (c.request.connect) {
            static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
            if (::send(c.fd.get(), kEstablished.data(), kEstablished.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
                static_cast<ssize_t>(kEstablished.size())) {
                finish(c.id);  // the client is gone (a fresh socket takes 39 bytes)
                return;
            }
        }
        c.state = Client::State::Sending;
    }
    while (!c.buffer.empty()) {
        ssize_t n = ::send(c.upstream.get(), c.buffer.data(), c.buffer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c.buffer.erase(0, static_cast<size_t>(n));
            c.sent += static_cast<uint64_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;  // EPOLLOUT again
        refuse(c, 502, std::string("the origin closed: ") + std::strerror(errno));
        return;
    }
    // Handed over: the relay engine moves the bytes from here, within its memory bounds.
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, c.upstream.get(), nullptr);
    auto node = m_clients.extract(c.id);
    std::unique_ptr<Client> owned = std::move(node.mapped());
    Tally& tally = m_tally[owned->key()];
    ++tally.allowed;
    auto shared = std::make_shared<Client>();
    shared->request = owned->request;
    shared->target = owned->target;
    shared->started = owned->started;
    shared->when = owned->when;
    // What went upstream before the relay took over (a plain HTTP request's head, early bytes).
    const uint64_t sent_before = owned->sent;
    auto hook = [this, shared, sent_before, tally_ptr = &tally](uint64_t relayed_up, uint64_t down) {
        const uint64_t up = sent_before + relayed_up;
        tally_ptr->up += up;
        tally_ptr->down += down;
        if (!m_closed)
            log_line(*shared, true, "", up, down);
    };
    if (!m_relay.adopt(std::move(owned->fd), std::move(owned->upstream), hook)) {
        --tally.allowed;
        ++tally.refused;
        log_line(*shared, false, "too many connections", 0, 0);
    }
    sync_listeners();
}

void Egress::refuse(Client& c, int status, const std::string& reason)
{
    const std::string body = reason + "\n";
    const std::string answer = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                               "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nConnection: close\r\nX-Cocoon-Egress: refused\r\n\r\n" + body;
    ssize_t sent = ::send(c.fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)sent;  // best effort: a client that does not read its answer is not waited for
    ++m_tally[c.request.host.empty() ? "(malformed)" : c.key()].refused;
    log_line(c, false, reason, 0, 0);
    finish(c.id);
}

void Egress::finish(uint64_t id)
{
    auto it = m_clients.find(id);
    if (it == m_clients.end())
        return;
    // Closing the fds takes them out of the epoll set.
    m_clients.erase(it);
    sync_listeners();
}

void Egress::on_timer()
{
    uint64_t ticks;
    if (::read(m_timer.get(), &ticks, sizeof ticks) < 0)
        return;
    const Clock::time_point now = Clock::now();
    if (now - m_second_started >= std::chrono::seconds(1)) {
        m_second_started = now;
        m_accepted_this_second = 0;
    }
    std::vector<uint64_t> late;
    for (auto& [id, c] : m_clients)
        if (now >= c->deadline)
            late.push_back(id);
    for (uint64_t id : late) {
        Client& c = *m_clients[id];
        if (c.state == Client::State::Head)
            refuse(c, 408, "no complete request head within " + std::to_string(m_options.head_timeout.count()) + " ms");
        else
            refuse(c, 504,
                   "no connection to " + c.key() + " within " + std::to_string(m_options.head_timeout.count()) + " ms");
    }
    sync_listeners();
}

void Egress::log_line(const Client& c, bool allowed, const std::string& reason, uint64_t up, uint64_t down)
{
    if (!m_options.log)
        return;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started).count();
    std::string line = "{ \"time\": " + json_string(c.when) + ", \"host\": " + json_string(c.request.host) +
                       ", \"port\": " + std::to_string(c.request.port);
    if (c.target.ss_family != AF_UNSPEC)
        line += ", \"address\": " + json_string(address_text(c.target));
    line += std::string(", \"allowed\": ") + (allowed ? "true" : "false");
    if (!allowed)
        line += ", \"reason\": " + json_string(reason);
    line += ", \"bytes-up\": " + std::to_string(up) + ", \"bytes-down\": " + std::to_string(down) +
            ", \"duration-ms\": " + std::to_string(ms) + " }";
    write_line(m_options.log.get(), line);
}

void Egress::close_all()
{
    if (m_closed)
        return;
    m_closed = true;
    m_clients.clear();
    m_listeners.clear();
    if (!m_options.log)
        return;
    std::string line = "{ \"summary\": [";
    bool first = true;
    for (const auto& [key, t] : m_tally) {
        size_t colon = key.rfind(':');
        line += std::string(first ? " " : ", ") + "{ \"host\": " + json_string(key.substr(0, colon)) +
                ", \"port\": " + (colon == std::string::npos ? "0" : key.substr(colon + 1)) +
                ", \"connections\": " + std::to_string(t.allowed) + ", \"refused\": " + std::to_string(t.refused) +
                ", \"bytes-up\": " + std::to_string(t.up) + ", \"bytes-down\": " + std::to_string(t.down) + " }";
        first = false;
    }
    line += first ? "] }" : " ] }";
    write_line(m_options.log.get(), line);
}

}  // namespace cocoon::relay
