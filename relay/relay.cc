// The relay's event loop: listeners, accepting, connecting to the host socket, dispatching epoll
// events to connections, rate-limited error reports. Runs in the monitor (outside the sandbox).
//
// Connection sockets are edge-triggered (EPOLLET, registered once with IN|OUT|RDHUP): each
// Connection keeps its own readable/writable flags and stops reading a source whose buffer is full
// without an epoll_ctl call, and a stream's steady state costs no epoll_ctl at all; level
// triggering would need an EPOLL_CTL_MOD at every backpressure turn to avoid spinning. A pump
// that spends its budget re-arms its fds with EPOLL_CTL_MOD, which makes epoll report them again,
// so epoll_fd() stays readable while work is left. Listeners and the timer are level-triggered:
// accepting stops after a batch and the rest is reported again.
#include "relay/relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/sys_error.h"
#include "relay/connection.h"
#include "relay/buffer_pool.h"
#include "relay/host_socket.h"

namespace cocoon::relay {

struct Listener {
    UniqueFd fd;
    std::shared_ptr<const Target> target;
    std::string name;  // "127.0.0.1:8080 -> /run/proxy.sock", for messages
    bool watched = true;
    std::chrono::steady_clock::time_point paused_until{};
    // Rate limit of this listener's messages.
    bool reported = false;
    std::chrono::steady_clock::time_point last_report{};
    size_t suppressed = 0;
    std::string last_suppressed;
};

namespace {

constexpr int kMaxEvents = 256;
// The listener index of an adopted connection (--egress): none of the relay's listeners.
constexpr uint32_t kNoListener = UINT32_MAX;
// Connections accepted per listener event; the level-triggered listener reports the rest.
constexpr int kAcceptBatch = 64;
constexpr const char* kPrefix = "cocoon: relay: ";

// epoll_event.data.u64: kind (2 bits) | side (1 bit) | generation (29 bits) | slot index (32 bits).
// The generation makes an event for a connection closed earlier in the same batch (or whose fd
// a forked child still holds) miss instead of reaching a reused slot.
constexpr int kKindShift = 62;
constexpr uint64_t kTimerKind = 0;
constexpr uint64_t kListenerKind = 1;
constexpr uint64_t kConnectionKind = 2;
constexpr uint64_t kWatchKind = 3;
constexpr int kSideShift = 61;
constexpr uint32_t kGenerationMask = (1u << 29) - 1;
constexpr uint32_t kConnectionEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

uint64_t listener_token(uint32_t index)
{
    return kListenerKind << kKindShift | index;
}

uint64_t connection_token(uint32_t index, uint32_t generation, Side side)
{
    return kConnectionKind << kKindShift | uint64_t{static_cast<uint8_t>(side)} << kSideShift |
           uint64_t{generation & kGenerationMask} << 32 | index;
}

std::string error_text(const char* call, int err)
{
    return std::string(call) + ": " + std::strerror(err);
}

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

// Security: a relayed TCP socket's kernel buffers are fixed at `bytes` each way (the kernel doubles
// the figure), which also turns off TCP's autotuning of them: a reader that never reads leaves at
// most that much queued in each. Autotuned, 300 such connections held 1.1 GiB (downloads: 3.9 MiB
// in each send buffer) or 1.5 GiB (uploads: up to 5.7 MiB in a receive buffer) of the host's TCP
// memory, past its pressure mark; bounded, 60-160 MiB (tests/e2e/relay_buffers_test.cc).
// Throughput does not suffer: see RelayOptions::socket_buffer_size. Failures are ignored (the
// kernel's defaults stay).
void bound_buffers(int fd, size_t bytes)
{
    if (bytes == 0)
        return;
    const int size = static_cast<int>(std::min<size_t>(bytes, 1 << 30));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
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

size_t max_lent_pipes(const RelayOptions& options)
{
    // Half the bytes in flight may sit in pipes when upload splices, the rest in buffers.
    return options.splice_upload ? std::max<size_t>(1, options.max_in_flight / 2 / options.pipe_size) : 0;
}

size_t max_lent_buffers(const RelayOptions& options)
{
    const size_t in_pipes = options.splice_upload ? options.max_in_flight / 2 : 0;
    return std::max<size_t>(1, (options.max_in_flight - in_pipes) / options.buffer_size);
}

}  // namespace

size_t Relay::connections_within(size_t fds, size_t reserve, const RelayOptions& options)
{
    const size_t own = 2 * (max_lent_pipes(options) + kMaxSparePipes) + 3 + reserve;
    return fds > own + 2 ? (fds - own) / 2 : 1;
}

Relay::Relay(RelayOptions options)
    : m_options(std::move(options)), m_epoll(static_cast<int>(check(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1"))),
      m_timer(static_cast<int>(check(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), "timerfd_create")))
{
    if (m_options.buffer_size == 0 || m_options.pipe_size == 0 || m_options.max_connections == 0)
        throw UsageError("relay: buffer_size, pipe_size and max_connections must be positive");
    m_buffers = std::make_unique<BufferPool>(m_options.buffer_size, max_lent_buffers(m_options),
                                             std::max<size_t>(1, kMaxSpareBytes / m_options.buffer_size));
    m_pipes =
        std::make_unique<PipePool>(m_options.pipe_size, std::max<size_t>(1, max_lent_pipes(m_options)), kMaxSparePipes);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kTimerKind << kKindShift;
    check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, m_timer.get(), &ev), "epoll_ctl(ADD, relay timer)");
}

Relay::~Relay()
{
    close_all();
}

size_t Relay::spare_buffer_count() const
{
    return m_buffers->spare();
}
size_t Relay::spare_pipe_count() const
{
    return m_pipes->spare();
}
size_t Relay::lent_buffer_count() const
{
    return m_buffers->lent();
}
size_t Relay::lent_pipe_count() const
{
    return m_pipes->lent();
}

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
    // accept4 must never block the monitor, and the fd must not reach anything cocoon executes.
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

void Relay::run_once(int timeout_ms)
{
    epoll_event events[kMaxEvents];
    int n = ::epoll_wait(m_epoll.get(), events, kMaxEvents, timeout_ms);
    if (n < 0) {
        if (errno == EINTR)
            return;
        throw SysError(errno, "epoll_wait(relay)");
    }
    for (int i = 0; i < n; ++i) {
        const uint64_t token = events[i].data.u64;
        switch (token >> kKindShift) {
        case kTimerKind:
            on_timer();
            break;
        case kListenerKind:
            on_listener(static_cast<uint32_t>(token));
            break;
        case kConnectionKind:
            on_connection(token, events[i].events);
            break;
        case kWatchKind:
            if (static_cast<uint32_t>(token) < m_watches.size() && m_watches[static_cast<uint32_t>(token)].fd >= 0)
                m_watches[static_cast<uint32_t>(token)].ready();
            break;
        default:
            break;
        }
    }
    retry_starved();
}

void Relay::watch(int fd, std::function<void()> ready)
{
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWatchKind << kKindShift | m_watches.size();
    check(::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, fd, &ev), "epoll_ctl(ADD, watched fd)");
    m_watches.push_back({fd, std::move(ready)});
}

void Relay::unwatch(int fd)
{
    // The callback stays (it may be the one running): only the fd is let go.
    for (Watch& w : m_watches)
        if (w.fd == fd) {
            ::epoll_ctl(m_epoll.get(), EPOLL_CTL_DEL, fd, nullptr);
            w.fd = -1;
        }
}

Pumps Relay::pumps()
{
    return {*m_buffers, *m_pipes, m_options.splice_upload};
}

// Gives the connections that found no buffer (or pipe) another turn, oldest first, while one
// can be lent. One that starves again goes to the back; the others keep waiting without a call.
void Relay::retry_starved()
{
    for (unsigned kind = 0; kind < 2; ++kind) {
        std::deque<uint64_t>& queue = m_starved[kind];
        const bool pipes = kind == 1;
        const unsigned bit = pipes ? Connection::kNeedsPipe : Connection::kNeedsBuffer;
        for (size_t n = queue.size(); n > 0 && !queue.empty(); --n) {
            if (!(pipes ? m_pipes->can_lend() : m_buffers->can_lend()))
                break;
            const uint64_t token = queue.front();
            queue.pop_front();
            Slot* slot = live_slot(token);
            if (!slot)
                continue;
            slot->starved &= ~bit;
            on_connection(token, 0);
        }
    }
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
        const int err = m_waiting.empty() && !m_probing ? listener.target->connect(sockets[i]) : EAGAIN;
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
    // Security: the target is the host socket cocoon's command line named, pinned at start and
    // connected in the monitor's mount namespace: the sandbox neither names it nor sees it, and
    // nothing it puts at that path later is reached (relay/host_socket.h).
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

bool Relay::reserve()
{
    if (in_use() >= m_options.max_connections)
        return false;
    ++m_reserved;
    if (in_use() >= m_options.max_connections)
        sync_listeners(Clock::now());
    return true;
}

void Relay::release()
{
    if (m_reserved == 0)
        return;
    --m_reserved;
    if (in_use() + 1 >= m_options.max_connections)
        sync_listeners(Clock::now());
}

bool Relay::adopt(UniqueFd client, UniqueFd upstream, CloseHook on_close, std::optional<uint32_t> upload_limit)
{
    // The caller's reservation becomes this connection.
    if (m_reserved > 0)
        --m_reserved;
    if (in_use() >= m_options.max_connections)
        return false;
    int one = 1;
    for (int fd : {client.get(), upstream.get()}) {
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        bound_buffers(fd, m_options.socket_buffer_size);
        int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
            return false;
    }
    auto connection = std::make_unique<Connection>(std::move(client), std::move(upstream), kNoListener);
    if (upload_limit)
        connection->limit_upload(*upload_limit);
    return install(std::move(connection), std::move(on_close));
}

// A slot and epoll registrations for a connection; false (the connection closed) if epoll refused.
bool Relay::install(std::unique_ptr<Connection> connection, CloseHook on_close)
{
    uint32_t index;
    if (!m_free_slots.empty()) {
        index = m_free_slots.back();
        m_free_slots.pop_back();
    } else {
        index = static_cast<uint32_t>(m_slots.size());
        m_slots.emplace_back();
    }
    Slot& slot = m_slots[index];
    slot.connection = std::move(connection);
    slot.on_close = std::move(on_close);
    m_connection_count.fetch_add(1, std::memory_order_relaxed);
    for (Side side : {Side::Tcp, Side::Unix}) {
        epoll_event ev{};
        ev.events = kConnectionEvents;
        ev.data.u64 = connection_token(index, slot.generation, side);
        if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, slot.connection->fd(side), &ev) < 0) {
            const int err = errno;
            close_connection(index, true);
            errno = err;
            return false;
        }
    }
    if (connection_count() >= m_options.max_connections)
        sync_listeners(Clock::now());
    return true;
}

// The slot a connection token names, or nullptr when that connection is closed (stale token).
Relay::Slot* Relay::live_slot(uint64_t token)
{
    const auto index = static_cast<uint32_t>(token);
    const auto generation = static_cast<uint32_t>(token >> 32) & kGenerationMask;
    if (index >= m_slots.size())
        return nullptr;
    Slot& slot = m_slots[index];
    if (!slot.connection || (slot.generation & kGenerationMask) != generation)
        return nullptr;
    return &slot;
}

void Relay::on_connection(uint64_t token, uint32_t events)
{
    Slot* live = live_slot(token);
    if (!live)
        return;  // stale: that connection is closed
    Slot& slot = *live;
    const auto index = static_cast<uint32_t>(token);
    const auto side = static_cast<Side>((token >> kSideShift) & 1);
    Connection& connection = *slot.connection;
    switch (connection.on_event(side, events, pumps())) {
    case Outcome::Open:
        return;
    case Outcome::Starved:
        // Retried by run_once when a buffer or pipe comes back; no epoll edge would do it.
        for (unsigned kind = 0; kind < 2; ++kind) {
            const unsigned bit = kind == 1 ? Connection::kNeedsPipe : Connection::kNeedsBuffer;
            if ((connection.starving() & bit) && !(slot.starved & bit)) {
                slot.starved |= bit;
                m_starved[kind].push_back(token);
            }
        }
        return;
    case Outcome::Busy:
        // EPOLL_CTL_MOD polls the fd again and queues it if it is still ready: the work left is
        // picked up by the next run_once, after the other ready fds had their turn.
        for (Side each : {Side::Tcp, Side::Unix}) {
            epoll_event ev{};
            ev.events = kConnectionEvents;
            ev.data.u64 = connection_token(index, slot.generation, each);
            if (::epoll_ctl(m_epoll.get(), EPOLL_CTL_MOD, connection.fd(each), &ev) < 0) {
                close_connection(index, true);
                return;
            }
        }
        return;
    case Outcome::Done:
        close_connection(index, false);
        return;
    case Outcome::Reset:
        close_connection(index, true);
        return;
    }
}

void Relay::close_connection(uint32_t index, bool reset)
{
    Slot& slot = m_slots[index];
    if (reset)
        slot.connection->abort();
    slot.connection->release(pumps());
    if (slot.on_close)
        std::exchange(slot.on_close, {})(slot.connection->delivered(Side::Tcp), slot.connection->delivered(Side::Unix));
    slot.starved = 0;
    // Closing the fds takes them out of the epoll set (no EPOLL_CTL_DEL needed); a late event
    // misses on the generation.
    slot.connection.reset();
    ++slot.generation;
    m_free_slots.push_back(index);
    m_connection_count.fetch_sub(1, std::memory_order_relaxed);
    if (in_use() + 1 >= m_options.max_connections)
        sync_listeners(Clock::now());
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
// another process answers later: its answer (connected()) goes on with the round.
void Relay::retry_waiting(Clock::time_point now)
{
    if (m_waiting.empty())
        return;
    if (now >= m_next_retry && !m_probing) {
        while (!m_waiting.empty()) {
            Waiting& w = m_waiting.front();
            Listener& listener = *m_listeners[w.listener];
            const int err = listener.target->connect(w.unix_socket);
            if (err == EINPROGRESS) {
                m_pending.push_back({w.listener, std::move(w.tcp), true, w.give_up});
                m_waiting.pop_front();
                m_probing = true;
                break;
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
    // The head of the queue, tried again: refused again, it stays the head and the next try
    // waits longer; connected, the next waiting client is tried at once.
    m_probing = false;
    Listener& listener = *m_listeners[pending.listener];
    const Clock::time_point now = Clock::now();
    if (err == EAGAIN && now < pending.give_up) {
        m_waiting.push_front({pending.listener, std::move(pending.tcp), {}, pending.give_up});
        m_retry_delay = std::min(m_retry_delay * 2, m_options.connect_retry_max);
        m_next_retry = now + m_retry_delay;
        arm_timer(m_next_retry);
        return;
    }
    if (err == 0) {
        open_connection(pending.listener, std::move(pending.tcp), std::move(socket), 0);
        m_retry_delay = m_options.connect_retry_first;
        m_next_retry = now;
    } else {
        give_up(listener, pending.tcp, err);
    }
    retry_waiting(now);
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

// Arms the timer for `deadline` unless it already fires earlier; on_timer re-arms the rest.
void Relay::arm_timer(Clock::time_point deadline)
{
    if (m_timer_armed && m_timer_deadline <= deadline)
        return;
    // steady_clock is CLOCK_MONOTONIC, the timerfd's clock.
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
        spec.it_value.tv_nsec = 1;  // zero would disarm
    check(::timerfd_settime(m_timer.get(), TFD_TIMER_ABSTIME, &spec, nullptr), "timerfd_settime(relay)");
    m_timer_armed = true;
    m_timer_deadline = deadline;
}

void Relay::emit(const std::string& line)
{
    if (m_options.log) {
        m_options.log(line);
        return;
    }
    const std::string text = line + "\n";
    // One write: lines from other threads or processes do not interleave within it.
    if (::write(STDERR_FILENO, text.data(), text.size()) < 0)
        return;
}

void Relay::close_all()
{
    for (auto& listener : m_listeners)
        if (listener->suppressed > 0)
            flush(*listener, Clock::now());
    m_waiting.clear();
    m_pending.clear();
    m_probing = false;
    m_listeners.clear();
    for (uint32_t i = 0; i < m_slots.size(); ++i) {
        if (m_slots[i].connection) {
            m_slots[i].connection->release(pumps());
            if (m_slots[i].on_close)
                std::exchange(m_slots[i].on_close, {})(m_slots[i].connection->delivered(Side::Tcp),
                                                       m_slots[i].connection->delivered(Side::Unix));
            m_slots[i].connection.reset();
            m_slots[i].starved = 0;
            ++m_slots[i].generation;
            m_free_slots.push_back(i);
        }
    }
    m_connection_count.store(0, std::memory_order_relaxed);
    m_starved[0].clear();
    m_starved[1].clear();
    m_buffers->clear();
    m_pipes->clear();
    m_spare_unix.reset();
    itimerspec off{};
    ::timerfd_settime(m_timer.get(), 0, &off, nullptr);
    m_timer_armed = false;
}

}  // namespace cocoon::relay
