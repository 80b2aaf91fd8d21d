// The relay's event loop: dispatching epoll events to connections (and to the listeners and the
// caller's watched fds), the connections' slots, adopted pairs, the buffers. The listeners' side
// is relay/listener.cc. Runs in the confined relay worker (relay/worker.h).
//
// Connection sockets are edge-triggered (EPOLLET, registered once with IN|OUT|RDHUP): each
// Connection keeps its own readable/writable flags and stops reading a source whose buffer is full
// without an epoll_ctl call, and a stream's steady state costs no epoll_ctl at all; level
// triggering would need an EPOLL_CTL_MOD at every backpressure turn to avoid spinning. A pump
// that spends its budget re-arms its fds with EPOLL_CTL_MOD, which makes epoll report them again,
// so epoll_fd() stays readable while work is left. Listeners and the timer are level-triggered:
// accepting stops after a batch and the rest is reported again.
// Runs in: monitor, worker: the worker's event loop; the monitor calls only connections_within
//  (arithmetic).
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
#include "relay/listener.h"

namespace cocoon::relay {

namespace {

constexpr int kMaxEvents = 256;
// The listener index of an adopted connection (--egress): none of the relay's listeners.
constexpr uint32_t kNoListener = UINT32_MAX;

// epoll_event.data.u64 of a connection: kind (2 bits, relay/listener.h) | side (1 bit) |
// generation (29 bits) | slot index (32 bits). The generation makes an event for a connection
// closed earlier in the same batch (or whose fd a forked child still holds) miss instead of
// reaching a reused slot.
constexpr int kSideShift = 61;
constexpr uint32_t kGenerationMask = (1u << 29) - 1;
constexpr uint32_t kConnectionEvents = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;

uint64_t connection_token(uint32_t index, uint32_t generation, Side side)
{
    return kConnectionKind << kKindShift | uint64_t{static_cast<uint8_t>(side)} << kSideShift |
           uint64_t{generation & kGenerationMask} << 32 | index;
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
    m_retrying = 0;
    m_bounced = 0;
    m_retry_connected = false;
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
