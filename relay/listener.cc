// The relay's listeners: accepting, connecting each client to its target (at once, or later for a
// target in another process), the queue of clients waiting for a full backlog, the listeners'
// pauses and rate-limited reports. The loop that runs them is relay/relay.cc.
// Runs in: worker.
#include "relay/listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/sys_error.h"
#include "relay/connection.h"

namespace cocoon::relay {
namespace {

// Connections accepted per listener event; the level-triggered listener reports the rest.
constexpr int kAcceptBatch = 64;
constexpr const char* kPrefix = "cocoon: relay: ";

// accept4 errors that belong to the one connection being accepted (see accept(2)).
bool connection_error(int err)
{
    switch (err) {
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case EINTR:
        return true;
    default:
        return false;
    }
}

// A refused connection is closed with an RST at once: the client fails now, not at a timeout.
void reset_tcp(UniqueFd& tcp)
{
    linger hard{1, 0};
    ::setsockopt(tcp.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    tcp.reset();
}

// A socket for the next connection to the host. Its send buffer is raised to twice a relay
// buffer (the kernel doubles that again, up to net.core.wmem_max): a Unix socket reports
// writable only when it is three quarters empty, so with the default 208 KiB the relay stops
// every 150 KiB or so to wait for the proxy. Measured (3 pairs of 2 GiB uploads): 2106-2221
// MiB/s and 235-285 ms of relay CPU per GiB, against 1449-1939 and 330-500 with the default.
UniqueFd make_unix_socket(size_t buffer_size)
{
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd) {
        int size = static_cast<int>(std::min<size_t>(2 * buffer_size, 1 << 30));
        ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    }
    return fd;
}

int socket_option(int fd, int option)
{
    int value = 0;
    socklen_t len = sizeof value;
    check(::getsockopt(fd, SOL_SOCKET, option, &value, &len), "getsockopt(relay listener)");
    return value;
}

std::string local_address(int fd)
{
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    char text[INET6_ADDRSTRLEN] = "?";
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) < 0)
        return "?";
    if (addr.ss_family == AF_INET6) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
        ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
        return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6->sin6_port));
    }
    auto* in4 = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &in4->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in4->sin_port));
}

}  // namespace

void Relay::add_listener(UniqueFd listener, std::shared_ptr<const Target> target)
{
    // Security: the listener was made inside the sandbox and crossed over SCM_RIGHTS; serve it
    // only if it is what the relay expects, a listening TCP socket.
    const int fd = listener.get();
    const int domain = socket_option(fd, SO_DOMAIN);
    if ((domain != AF_INET && domain != AF_INET6) || socket_option(fd, SO_TYPE) != SOCK_STREAM ||
        socket_option(fd, SO_PROTOCOL) != IPPROTO_TCP || socket_option(fd, SO_ACCEPTCONN) != 1)
        throw UsageError("relay: fd " + std::to_string(fd) + " is not a listening TCP socket");
    auto entry = std::make_unique<Listener>();
    // accept4 must never block the worker's loop, and the fd must not reach anything cocoon executes.
    int flags = static_cast<int>(check(::fcntl(fd, F_GETFL), "fcntl(relay listener, F_GETFL)"));
    check(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(relay listener, F_SETFL)");
    check(::fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(relay listener, F_SETFD)");

    entry->name = local_address(fd) + " -> " + target->path();
    entry->target = std::move(target);
    entry->fd = std::move(listener);

    const auto index = static_cast<uint32_t>(m_listeners.size());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = listener_token(index);
    check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, fd, &ev), "epoll_ctl(ADD, relay listener)");
    const bool takes_socket = entry->target->takes_socket();
    m_listeners.push_back(std::move(entry));
    if (takes_socket && !m_spare_unix) {
        m_spare_unix = make_unix_socket(m_options.buffer_size);
        if (!m_spare_unix)
            throw SysError(errno, "socket(AF_UNIX)");
    }
    sync_listeners(Clock::now());
}

void Relay::on_listener(uint32_t index)
{
    if (index >= m_listeners.size())
        return;
    Listener& listener = *m_listeners[index];
    std::vector<UniqueFd> clients, sockets;
    for (int i = 0; i < kAcceptBatch; ++i) {
        if (in_use() + clients.size() >= m_options.max_connections)
            break;  // sync_listeners stops watching once they are in
        // The Unix socket is made before accept4, so a relay out of fds leaves the client waiting
        // in the backlog rather than accepting it only to drop it. The spare is kept for the next
        // client when accept4 finds none.
        if (listener.target->takes_socket() && !m_spare_unix && !make_spare_unix(listener))
            break;
        int fd = ::accept4(listener.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            if (err == EAGAIN || err == EWOULDBLOCK)
                break;
            if (connection_error(err))
                continue;
            // Out of fds or memory (or something unexpected): the connection stays in the backlog
            // and the listener is not watched for a while, so the loop does not spin on it.
            report(listener,
                   error_text("accept4", err) + "; pausing " + std::to_string(m_options.accept_pause.count()) + " ms");
            pause(listener, Clock::now());
            break;
        }
        bound_buffers(fd, m_options.socket_buffer_size);
        clients.emplace_back(fd);
        sockets.push_back(std::exchange(m_spare_unix, UniqueFd()));
    }
    for (size_t i = 0; i < clients.size(); ++i) {
        // Clients that wait keep their order: new ones queue behind them.
        const int err = m_waiting.empty() && m_retrying == 0 ? listener.target->connect(sockets[i]) : EAGAIN;
        if (err == EINPROGRESS)
            m_pending.push_back({index, std::move(clients[i]), false, {}});
        else
            open_connection(index, std::move(clients[i]), std::move(sockets[i]), err);
    }
}

bool Relay::make_spare_unix(Listener& listener)
{
    m_spare_unix = make_unix_socket(m_options.buffer_size);
    if (m_spare_unix)
        return true;
    const int err = errno;
    report(listener,
           error_text("socket(AF_UNIX)", err) + "; pausing " + std::to_string(m_options.accept_pause.count()) + " ms");
    pause(listener, Clock::now());
    return false;
}

void Relay::open_connection(uint32_t listener_index, UniqueFd tcp, UniqueFd unix_socket, int err)
{
    Listener& listener = *m_listeners[listener_index];
    // Security: the target is the host socket cocoon's command line named, pinned at start by the
    // monitor, which connects it in its mount namespace when the worker asks: the sandbox neither
    // names it nor sees it, and nothing it puts at that path later is reached (host_socket.h).
    // An AF_UNIX connect completes or fails at once, non-blocking or not: a full backlog is
    // EAGAIN, never EINPROGRESS (that is a target in another process: see connected()). EAGAIN is
    // tried again later (retry_waiting) while the client waits; any other failure closes this
    // client only, and the next one tries again.
    if (err) {
        if (err == EAGAIN) {
            const Clock::time_point now = Clock::now();
            if (m_waiting.empty()) {
                m_retry_delay = m_options.connect_retry_first;
                m_next_retry = now + m_retry_delay;
            }
            m_waiting.push_back(
                {listener_index, std::move(tcp), std::move(unix_socket), now + m_options.connect_retry_total});
            arm_timer(m_next_retry);
            if (in_use() >= m_options.max_connections)
                sync_listeners(now);
            return;
        }
        give_up(listener, tcp, err);
        return;
    }
    // The relay forwards what arrived at once; Nagle would only delay the writer's own batching.
    int one = 1;
    ::setsockopt(tcp.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!install(std::make_unique<Connection>(std::move(tcp), std::move(unix_socket), listener_index), {}))
        report(listener, error_text("epoll_ctl(ADD)", errno));
}

void Relay::pause(Listener& listener, Clock::time_point now)
{
    listener.paused_until = now + m_options.accept_pause;
    sync_listeners(now);
    arm_timer(listener.paused_until);
}

// Watches each listener unless it is paused or the relay is at max_connections.
void Relay::sync_listeners(Clock::time_point now)
{
    const bool full = in_use() >= m_options.max_connections;
    for (uint32_t i = 0; i < m_listeners.size(); ++i) {
        Listener& listener = *m_listeners[i];
        const bool want = !full && now >= listener.paused_until;
        if (want == listener.watched)
            continue;
        epoll_event ev{};
        ev.events = want ? uint32_t{EPOLLIN} : 0u;
        ev.data.u64 = listener_token(i);
        check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, listener.fd.get(), &ev), "epoll_ctl(MOD, relay listener)");
        listener.watched = want;
    }
}

void Relay::on_timer()
{
    uint64_t expirations = 0;
    if (::read(m_timer.get(), &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        throw SysError(errno, "read(relay timerfd)");
    m_timer_armed = false;
    const Clock::time_point now = Clock::now();
    retry_waiting(now);
    sync_listeners(now);
    for (auto& each : m_listeners) {
        Listener& listener = *each;
        if (listener.paused_until > now)
            arm_timer(listener.paused_until);
        if (listener.suppressed == 0)
            continue;
        const Clock::time_point due = listener.last_report + m_options.log_interval;
        if (now < due) {
            arm_timer(due);
            continue;
        }
        flush(listener, now);
    }
}

// Tries the waiting clients in order while the host socket takes them. The first refused again
// with EAGAIN ends the round (the backlog is full: the rest would be refused too) and the next
// round waits twice as long; one that connects resets the wait. A client past its
// connect_retry_total, or refused otherwise, is closed with an RST and reported. A target in
// another process answers later: the round asks for the waiting clients in order until the target
// takes no more requests, and its answers (connected()) decide the next round.
void Relay::retry_waiting(Clock::time_point now)
{
    if (m_waiting.empty())
        return;
    if (now >= m_next_retry && m_retrying == 0) {
        while (!m_waiting.empty()) {
            Waiting& w = m_waiting.front();
            Listener& listener = *m_listeners[w.listener];
            const int err = listener.target->connect(w.unix_socket);
            if (err == EINPROGRESS) {
                m_pending.push_back({w.listener, std::move(w.tcp), true, w.give_up});
                m_waiting.pop_front();
                ++m_retrying;
                continue;
            }
            if (err == 0) {
                Waiting connected = std::move(w);
                m_waiting.pop_front();
                open_connection(connected.listener, std::move(connected.tcp), std::move(connected.unix_socket), 0);
                m_retry_delay = m_options.connect_retry_first;
                continue;
            }
            if (err == EAGAIN && now < w.give_up) {
                m_retry_delay = std::min(m_retry_delay * 2, m_options.connect_retry_max);
                break;
            }
            give_up(listener, w.tcp, err);
            m_waiting.pop_front();
        }
        m_next_retry = now + m_retry_delay;
    }
    // Clients behind the first give up on their own time too.
    for (auto it = m_waiting.begin(); it != m_waiting.end();) {
        if (now < it->give_up) {
            ++it;
            continue;
        }
        give_up(*m_listeners[it->listener], it->tcp, EAGAIN);
        it = m_waiting.erase(it);
    }
    if (!m_waiting.empty())
        arm_timer(m_next_retry);
}

void Relay::connected(UniqueFd socket, int err)
{
    if (m_pending.empty())
        return;
    Pending pending = std::move(m_pending.front());
    m_pending.pop_front();
    if (!pending.retry) {
        open_connection(pending.listener, std::move(pending.tcp), std::move(socket), err);
        sync_listeners(Clock::now());
        return;
    }
    // A waiting client, tried again: refused again (the backlog is still full), it goes back
    // to the head of the queue, in its order; once the round's answers are in, the next round
    // comes at once if one connected, else after twice the wait.
    --m_retrying;
    Listener& listener = *m_listeners[pending.listener];
    const Clock::time_point now = Clock::now();
    if (err == EAGAIN && now < pending.give_up) {
        const size_t at = std::min(m_bounced++, m_waiting.size());
        m_waiting.insert(m_waiting.begin() + static_cast<std::ptrdiff_t>(at),
                         {pending.listener, std::move(pending.tcp), {}, pending.give_up});
    } else if (err == 0) {
        open_connection(pending.listener, std::move(pending.tcp), std::move(socket), 0);
        m_retry_connected = true;
    } else {
        give_up(listener, pending.tcp, err);
    }
    if (m_retrying == 0) {
        m_retry_delay = m_retry_connected ? m_options.connect_retry_first
                                          : std::min(m_retry_delay * 2, m_options.connect_retry_max);
        m_next_retry = m_retry_connected ? now : now + m_retry_delay;
        m_bounced = 0;
        m_retry_connected = false;
        retry_waiting(now);
    }
    sync_listeners(now);
}

// Closes a client whose connection failed (EAGAIN: past connect_retry_total) with an RST, and
// reports it.
void Relay::give_up(Listener& listener, UniqueFd& tcp, int err)
{
    reset_tcp(tcp);
    report(listener, error_text("connect", err) +
                         (err == EAGAIN ? " (the proxy's backlog stayed full for " +
                                              std::to_string(m_options.connect_retry_total.count()) + " ms)"
                                        : ""));
}

void Relay::report(Listener& listener, const std::string& message)
{
    const Clock::time_point now = Clock::now();
    if (listener.reported && now - listener.last_report < m_options.log_interval) {
        ++listener.suppressed;
        listener.last_suppressed = message;
        arm_timer(listener.last_report + m_options.log_interval);
        return;
    }
    std::string line = kPrefix + listener.name + ": " + message;
    if (listener.suppressed > 0)
        line += " (" + std::to_string(listener.suppressed) + " earlier failures suppressed)";
    emit(line);
    listener.reported = true;
    listener.last_report = now;
    listener.suppressed = 0;
}

// Reports how many messages were held back, with the last of them.
void Relay::flush(Listener& listener, Clock::time_point now)
{
    const size_t n = listener.suppressed;
    emit(kPrefix + listener.name + ": " + std::to_string(n) + (n == 1 ? " more failure" : " more failures") +
         ", the last: " + listener.last_suppressed);
    listener.last_report = now;
    listener.suppressed = 0;
}

}  // namespace cocoon::relay
