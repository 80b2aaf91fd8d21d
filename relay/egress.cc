// --egress: the request parser and the handshake loop (the decisions are in egress_policy.cc, the
// log in egress_log.cc). Runs in the confined relay worker (relay/worker.h).
// Security: everything a client sends is hostile. The head is read into a buffer capped at
// kMaxRequestHead, with a deadline; the parser looks only at the bytes it was given; a name is
// resolved through the host's name servers and the monitor connects to the very address the worker
// checked, after checking it again (no second lookup that a rebinding DNS server could answer
// differently; ns/monitor/upstream.h).
// Runs in: worker.
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
#include "relay/egress_client.h"
#include "relay/relay.h"
#include "relay/resolver.h"

namespace cocoon::relay {

namespace {

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
constexpr uint64_t kLogToken = 3;
constexpr uint64_t kUpstream = kUpstreamBit;
constexpr uint64_t kListenerBase = 16;  // + listener index
constexpr uint64_t kFirstClient = 1 << 20;
// Accepts per second at most (the rest wait in the listen backlog), against a sandbox that
// opens connections in a loop.
constexpr size_t kAcceptsPerSecond = 2000;
// How long the listeners rest after accept4 failed for want of fds (the timer's period).
constexpr std::chrono::milliseconds kAcceptPause{250};
// At the end, how long the summary may wait for a slow --egress-log reader.
constexpr int kLogDrainMs = 1000;

}  // namespace

Egress::Egress(EgressOptions options, Relay& relay, AskUpstream ask)
    : m_options(std::move(options)), m_policy(m_options.allow), m_log(std::move(m_options.log)), m_relay(relay),
      m_ask(std::move(ask)), m_epoll(static_cast<int>(check(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1 (egress)"))),
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
    if (m_log.poll_fd() >= 0) {
        // Watched for EPOLLOUT only while lines wait; a file epoll cannot watch waits for the timer.
        epoll_event ev{};
        ev.data.u64 = kLogToken;
        m_log_in_epoll = ::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, m_log.poll_fd(), &ev) == 0;
    }
    // Deadlines and the accept rate are looked at every 250 ms.
    itimerspec every{{0, 250'000'000}, {0, 250'000'000}};
    check(::timerfd_settime(m_timer.get(), 0, &every, nullptr), "timerfd_settime (egress)");
}

Egress::~Egress()
{
    // The relay's close hooks of adopted connections call back into this object: they run now,
    // while it is whole (the worker's normal end has closed them already).
    m_relay.close_all();
    close_all();
}

void Egress::add_listener(UniqueFd listener, bool transparent)
{
    int flags = static_cast<int>(check(::fcntl(listener.get(), F_GETFL), "fcntl (egress listener)"));
    check(::fcntl(listener.get(), F_SETFL, flags | O_NONBLOCK), "fcntl (egress listener)");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerBase + m_listeners.size();
    check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, listener.get(), &ev), "epoll_ctl (egress listener)");
    m_listeners.push_back(std::move(listener));
    m_transparent.push_back(transparent);
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
        else if (token == kLogToken)
            sync_log();
        else if (token == kResolverSocketToken)
            on_resolver_socket();
        else if (token >= kFirstClient)
            on_client(token, events[i].events);
        else if (token >= kListenerBase && token - kListenerBase < m_listeners.size())
            on_listener(token - kListenerBase);
    }
}

void Egress::on_listener(size_t index)
{
    const int listener = m_listeners[index].get();
    const bool transparent = m_transparent[index];
    for (int batch = 0; batch < 64; ++batch) {
        if (m_clients.size() >= m_options.max_pending || m_accepted_this_second >= kAcceptsPerSecond ||
            !m_relay.has_room()) {
            sync_listeners();
            return;
        }
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            // Security: out of fds (or memory) the listener stays readable; it leaves the epoll
            // set for a tick instead of being tried again at once (a spinning worker).
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                m_paused_until = Clock::now() + kAcceptPause;
                sync_listeners();
            }
            return;  // EAGAIN, or a client that went away: the next edge brings the next
        }
        ++m_accepted_this_second;
        auto client = std::make_unique<Client>();
        if (m_relay.reserve())
            client->reservation = &m_relay;
        client->id = kFirstClient + m_next_id++;
        client->fd.reset(fd);
        client->started = Clock::now();
        client->deadline = client->started + m_options.head_timeout;
        // A transparent client sends no head: only its hang-up (EPOLLHUP, EPOLLERR) is watched.
        epoll_event ev{};
        ev.events = transparent ? 0U : uint32_t{EPOLLIN | EPOLLRDHUP};
        ev.data.u64 = client->id;
        if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, fd, &ev) < 0)
            continue;  // the client is closed with its UniqueFd
        Client& c = *m_clients.emplace(client->id, std::move(client)).first->second;
        if (transparent)
            start_transparent(c);
    }
}

void Egress::sync_listeners()
{
    const bool want = m_clients.size() < m_options.max_pending && m_accepted_this_second < kAcceptsPerSecond &&
                      m_relay.has_room() && Clock::now() >= m_paused_until;
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

void Egress::on_client(uint64_t token, uint32_t events)
{
    auto it = m_clients.find(token & ~kUpstream);
    if (it == m_clients.end())
        return;
    Client& c = *it->second;
    if (token & kUpstream)
        on_connected(c);
    else if (c.state == Client::State::Head)
        read_head(c);
    else if (events & (EPOLLHUP | EPOLLERR))
        finish(c.id);  // the client went while its target was looked for: nothing to wait for
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
        refuse(c, 400, EgressResult::Refused, why);
        return;
    case ParseResult::Ok:
        decide(c);
        return;
    }
}

void Egress::decide(Client& c)
{
    // Security: past its head, a client's bytes wait in the kernel until the relay takes over
    // (level-triggered, they would wake this loop again and again); its hang-up still counts.
    epoll_event quiet{};
    quiet.data.u64 = c.id;
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, c.fd.get(), &quiet);
    const ProxyRequest& r = c.request;
    if (auto literal = parse_ip_literal(r.host, r.port)) {
        if (std::string why = m_policy.check_literal(r.host, *literal, r.port); !why.empty()) {
            refuse(c, 403, EgressResult::Refused, why);
            return;
        }
        c.candidates = {*literal};
        start_connect(c);
        return;
    }
    if (std::string why = m_policy.check_name(r.host, r.port); !why.empty()) {
        refuse(c, 403, EgressResult::Refused, why);
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
            refuse(c, 502, EgressResult::Unresolved, "can't resolve " + c.request.host + ": " + res.error);
            continue;
        }
        // Security: EgressPolicy::admit refuses internal addresses; the host's own addresses, which
        // the worker cannot see from its empty network namespace, the monitor refuses.
        std::string refused;
        c.candidates = m_policy.admit(c.request.host, res.addresses, c.request.port, refused);
        if (c.candidates.empty()) {
            refuse(c, 403, EgressResult::Refused, refused);
            continue;
        }
        start_connect(c);
    }
}

void Egress::on_connected(Client& c)
{
    if (c.state == Client::State::Connecting && !upstream_ready(c))
        return;
    while (!c.buffer.empty()) {
        ssize_t n = ::send(c.upstream.get(), c.buffer.data(), c.buffer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            c.buffer.erase(0, static_cast<size_t>(n));
            c.sent += static_cast<uint64_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;  // EPOLLOUT again
        refuse(c, 502, EgressResult::Unreachable, std::string("the origin closed: ") + std::strerror(errno));
        return;
    }
    hand_over(c);
}

// The upstream connect's outcome: false while it is still in progress, or when it failed (then
// the next candidate is tried, or the client refused). On success, the client is answered and
// c.buffer holds what goes upstream first.
bool Egress::upstream_ready(Client& c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.upstream.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err == EINPROGRESS || err == EALREADY)
        return false;
    if (err != 0) {
        ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, c.upstream.get(), nullptr);
        c.upstream.reset();
        c.failed = true;
        if (!c.candidates.empty())
            start_connect(c);
        else
            refuse(c, 502, EgressResult::Unreachable,
                   "can't connect to " + address_text(c.target) + " port " + std::to_string(c.request.port) + ": " +
                       std::strerror(err));
        return false;
    }
    // What goes upstream first: the rewritten head of a plain HTTP request, then whatever the
    // client sent after its head (a body, or TLS bytes sent before our answer).
    std::string rest = c.buffer.substr(c.head_size);
    if (!c.request.connect) {
        // Security: the body as Content-Length counts it, and nothing after it (a pipelined
        // request); the relay passes on the rest of the body and no more (limit_upload).
        const size_t early = static_cast<size_t>(std::min<uint64_t>(rest.size(), c.request.body));
        c.upload_left = c.request.body - early;
        rest = c.request.forward + rest.substr(0, early);
    }
    c.buffer = std::move(rest);
    if (c.request.connect && c.via.empty()) {
        static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (::send(c.fd.get(), kEstablished.data(), kEstablished.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
            static_cast<ssize_t>(kEstablished.size())) {
            finish(c.id);  // the client is gone (a fresh socket takes 39 bytes)
            return false;
        }
    }
    c.state = Client::State::Sending;
    return true;
}

// Handed over: the relay engine moves the bytes from here, within its memory bounds.
void Egress::hand_over(Client& c)
{
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, c.upstream.get(), nullptr);
    auto node = m_clients.extract(c.id);
    std::unique_ptr<Client> owned = std::move(node.mapped());
    EgressTally::Counts& tally = m_tally.at(owned->key(), false);
    ++tally.allowed;
    auto shared = std::make_shared<Client>();
    shared->request = owned->request;
    shared->target = owned->target;
    shared->started = owned->started;
    shared->via = owned->via;
    // What went upstream before the relay took over (a plain HTTP request's head, early bytes).
    const uint64_t sent_before = owned->sent;
    auto hook = [this, shared, sent_before, tally_ptr = &tally](uint64_t relayed_up, uint64_t down) {
        const uint64_t up = sent_before + relayed_up;
        tally_ptr->up += up;
        tally_ptr->down += down;
        if (!m_closed)
            log_line(*shared, EgressResult::Allowed, "", up, down);
    };
    // adopt takes over the reservation (a client accepted without one, at the limit, is refused).
    owned->reservation = nullptr;
    std::optional<uint32_t> limit;
    if (!owned->request.connect)
        limit = static_cast<uint32_t>(owned->upload_left);  // the parser keeps a body under 4 GiB
    if (!m_relay.adopt(std::move(owned->fd), std::move(owned->upstream), hook, limit)) {
        --tally.allowed;
        ++tally.refused;
        log_line(*shared, EgressResult::Refused, "too many connections", 0, 0);
    }
    sync_listeners();
}

void Egress::refuse(Client& c, int status, EgressResult result, const std::string& reason)
{
    if (!c.via.empty()) {
        // A transparent client speaks no HTTP: a reset tells it no.
        linger reset{1, 0};
        ::setsockopt(c.fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
        ++m_tally.at(c.key(), true).of(result);
        log_line(c, result, reason, 0, 0);
        finish(c.id);
        return;
    }
    const std::string body = reason + "\n";
    const std::string answer = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                               "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                               "\r\nConnection: close\r\nX-Cocoon-Egress: refused\r\n\r\n" + body;
    ssize_t sent = ::send(c.fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)sent;  // best effort: a client that does not read its answer is not waited for
    ++m_tally.at(c.request.host.empty() ? "(malformed)" : c.key(), true).of(result);
    log_line(c, result, reason, 0, 0);
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
    m_log.flush();
    sync_log();
    ask_waiting();
    if (m_resolver_socket) {
        count_dropped_questions(false);
        if (!m_resolver_watched && m_questions.ready(now))
            watch_resolver(true);
    }
    std::vector<uint64_t> late;
    for (auto& [id, c] : m_clients)
        if (now >= c->deadline)
            late.push_back(id);
    for (uint64_t id : late) {
        Client& c = *m_clients[id];
        const std::string within = " within " + std::to_string(m_options.head_timeout.count()) + " ms";
        if (c.state == Client::State::Head)
            refuse(c, 408, EgressResult::Refused, "no complete request head" + within);
        else if (c.state == Client::State::Resolving)
            refuse(c, 504, EgressResult::Unresolved, "can't resolve " + c.request.host + within);
        else
            refuse(c, 504, EgressResult::Unreachable, "no connection to " + c.key() + within);
    }
    sync_listeners();
}

void Egress::log_line(const Client& c, EgressResult result, const std::string& reason, uint64_t up, uint64_t down)
{
    if (!m_log)
        return;
    // Security: a refusal's line past the shared bound costs a count, no text and no write.
    if (result != EgressResult::Allowed && !m_refusal_lines.take(Clock::now())) {
        ++m_lines_held;
        return;
    }
    // "time" is when the line is made, so lines (written in the order they are made) rise in
    // time; the accept time is "time" less "duration-ms". (A connection's line waits for its
    // end: stamped with the accept time, a long connection's line would follow the lines of
    // shorter ones it overlapped, out of time order, and holding lines back to sort them would
    // hold every later line behind the longest connection.)
    const std::string now = utc_now();
    const std::string address = c.target.ss_family != AF_UNSPEC ? address_text(c.target) : std::string();
    EgressLine line;
    line.time = now;
    line.host = c.request.host;
    line.port = c.request.port;
    line.via = c.via;
    line.address = address;
    line.result = result;
    line.reason = reason;
    line.up = up;
    line.down = down;
    line.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - c.started).count();
    m_log.add(line_text(line));
    sync_log();
}

// The log's fd is watched for EPOLLOUT only while lines wait for it.
void Egress::sync_log()
{
    m_log.flush();
    const bool want = m_log.pending();
    if (!m_log_in_epoll || want == m_log_watched)
        return;
    epoll_event ev{};
    ev.events = want ? uint32_t{EPOLLOUT} : 0U;
    ev.data.u64 = kLogToken;
    if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, m_log.poll_fd(), &ev) == 0)
        m_log_watched = want;
}

void Egress::close_all()
{
    if (m_closed)
        return;
    m_closed = true;
    m_clients.clear();
    m_listeners.clear();
    if (m_resolver_socket)
        count_dropped_questions(true);
    m_resolver_socket.reset();
    if (!m_log)
        return;
    // Security: the summary is capped (EgressTally::kMaxSummary) and waits at most kLogDrainMs
    // for a reader that does not read: the sandbox is gone by now, and cocoon's exit waits.
    m_log.add_summary(m_tally.summary({m_log.dropped(), m_lines_held + m_log.not_written(), m_questions_dropped}));
    m_log.drain(kLogDrainMs);
}

}  // namespace cocoon::relay
