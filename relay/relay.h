// The relay engine: TCP listeners from the sandbox's network namespace, each accepted connection
// relayed byte for byte to a new connection to a host Unix socket. Runs in the confined relay worker (relay/worker.h).
// Runs in: monitor, worker: the worker's event loop; the monitor calls only connections_within
//  (arithmetic).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::relay {

class Connection;
class BufferPool;
class PipePool;
struct Pumps;
struct Listener;

struct RelayOptions {
    // Download (Unix -> TCP) borrows a buffer of this size while it has bytes in flight: the
    // most one recv or send moves. 256 KiB relays downloads 1.7x faster than 64 KiB, for a third
    // less CPU (see relay/connection.cc).
    size_t buffer_size = size_t{256} * 1024;
    // Upload (TCP -> Unix) splices through a pipe of this size instead of copying: 1.4x the
    // throughput of copying (relay/connection.cc). False: upload copies too.
    bool splice_upload = true;
    size_t pipe_size = size_t{1} << 20;
    // Security: SO_SNDBUF and SO_RCVBUF of every relayed TCP socket (accepted, or adopted: both
    // of an --egress pair), which the kernel doubles: a connection whose reader never reads holds
    // at most 512 KiB queued in each, where loopback's autotuning gave 4 MiB send buffers (tcp_wmem)
    // and receive buffers up to 32 MiB (tcp_rmem). 0 leaves them to autotuning. Measured with
    // tools/bench/relay on a shared 2-CPU host under load 4-5 (medians of 8 runs fixed, 9
    // autotuned): upload 2025 vs 1760 MiB/s, download 1836 vs 1280, 7171 vs 7071 connections/s;
    // round trip on one CPU 69 vs 76 us (6 pairs). 128 KiB lost a fifth of the upload; 512 KiB
    // gained nothing.
    size_t socket_buffer_size = size_t{256} * 1024;
    // Bytes in flight, over every connection: buffers and pipes lent at once are capped so that
    // buffer_size x buffers + pipe_size x pipes stays under this (at least one of each). A
    // direction that finds none left waits, its bytes in its source's socket buffer, until one
    // comes back. So the relay's memory does not grow with the number of connections.
    size_t max_in_flight = size_t{64} << 20;
    // Security: the sandbox decides how many connections it opens; past this many the listeners
    // stop accepting (new clients wait in the listen backlog) until one closes, and --egress
    // refuses handshakes (reserve()). It bounds the fds, and with socket_buffer_size the kernel
    // memory. The monitor sets it for the relay worker from RLIMIT_NOFILE N, after raising the
    // soft limit to the hard one under --relay (ns/launch.cc): connections_within(N, 16) =
    // (N - 99) / 2 with the default options. 462 at N = 1024, 9950 at 20000, 262094 at 524288.
    size_t max_connections = 1024;
    // A connect to the host socket that finds its accept backlog full (EAGAIN) waits in a queue,
    // in order, while the TCP client waits: a burst is queued, not dropped. The oldest is tried
    // again after connect_retry_first, then twice as long each time it is refused again, up to
    // connect_retry_max; each client gives up (RST) after connect_retry_total.
    std::chrono::milliseconds connect_retry_first{1};
    std::chrono::milliseconds connect_retry_max{20};
    std::chrono::milliseconds connect_retry_total{10'000};
    // After accept4 or socket fail with EMFILE/ENFILE/ENOMEM, the listener is not watched for
    // this long, so a process out of fds does not spin on a readable listener.
    std::chrono::milliseconds accept_pause{100};
    // At most one message per listener per interval; the others are counted and the count is
    // reported with the next message.
    std::chrono::milliseconds log_interval{1000};
    // Receives whole lines, "cocoon: relay: ..." without a newline. Empty: written to stderr.
    // Called from run_once and close_all (so from the destructor too): it must outlive the Relay.
    std::function<void(const std::string&)> log;
};

// Where a listener's clients go: the host Unix socket of a --relay. HostSocket connects to it
// itself (where the relay runs with the right to: the engine's tests and benchmark); the relay
// worker, confined, asks the monitor, which has the right (relay/worker.h), and gets the answer later.
class Target {
public:
    virtual ~Target() = default;
    // Makes `socket` a non-blocking Unix stream socket connected to the target (socket: an
    // unconnected one of the relay's to use, or none). 0, or the errno: EAGAIN when the target's
    // backlog is full (the relay tries again later), EINPROGRESS when a target in another process
    // has sent the request (its answer comes, in the order of the requests, to
    // Relay::connected), any other closes this client only.
    virtual int connect(UniqueFd& socket) const = 0;
    // Whether connect() takes a socket the relay made (made before accept4, so a relay out of fds
    // leaves its clients in the backlog).
    virtual bool takes_socket() const { return true; }
    // For messages: the socket's path as the command line gave it.
    virtual const std::string& path() const = 0;
};

// One epoll loop for every listener and connection; every fd it makes is O_NONBLOCK|O_CLOEXEC.
// Memory: per connection about 120 bytes (Connection and its slot) and two socket fds; bytes in
// flight at most options.max_in_flight over all connections (64 MiB by default: 128 buffers and
// 32 pipes); plus at most kMaxSpareBytes of empty buffers and kMaxSparePipes empty pipes kept for reuse. A
// destination that takes nothing more stops the relay reading its source, so nothing grows
// beyond that. Kernel memory per connection, bounded whatever the two readers do: its TCP
// socket's send and receive buffers, 2 x socket_buffer_size each (512 KiB: the kernel doubles
// the figure set); its Unix socket's send buffer, set to 2 x buffer_size (1 MiB with the same
// doubling, capped by net.core.wmem_max), which bounds what waits for the proxy. What waits in
// the Unix socket for the relay is counted against the proxy's own send buffer (Linux's AF_UNIX
// stream sockets have no receive limit of their own), so the proxy bounds that. So at most
// max_connections x (1 MiB of TCP + 1 MiB of Unix socket memory), besides the bytes in flight.
// Connections that stall holding every buffer (a sandbox that never reads 128 downloads) make the
// others wait: a sandbox can only slow itself.
// fds: two per connection, two per pipe lent or spare, three of its own.
// Not thread-safe: one thread calls everything but connection_count(). splice(2) raises SIGPIPE
// when the proxy is gone: the process must ignore SIGPIPE (the relay worker does) unless
// splice_upload is false. It leaves signal dispositions alone.
class Relay {
public:
    explicit Relay(RelayOptions options = {});
    ~Relay();
    Relay(const Relay&) = delete;
    Relay& operator=(const Relay&) = delete;

    // Takes a listening TCP socket (bound and listening, AF_INET or AF_INET6); each accepted
    // connection is relayed to a new connection to `target`, the Unix stream socket pinned at
    // start (several listeners may share one). Throws UsageError when the fd is not a listening
    // TCP socket.
    void add_listener(UniqueFd listener, std::shared_ptr<const Target> target);

    // Relays a pair connected by someone else (--egress, once its handshake is done): `client`
    // is the sandbox's TCP socket (the Tcp side), `upstream` the host's. on_close gets the bytes
    // delivered each way when the connection ends. False (both closed) at max_connections.
    // upload_limit: at most that many bytes go from the client to upstream; the client's later
    // bytes are never read (a plain HTTP request's body ends there: see Connection::limit_upload).
    // The caller's reservation (reserve()), if it holds one, becomes this connection.
    using CloseHook = std::function<void(uint64_t up, uint64_t down)>;
    bool adopt(UniqueFd client, UniqueFd upstream, CloseHook on_close, std::optional<uint32_t> upload_limit = {});

    // Security: a connection being set up elsewhere (an --egress handshake: its client's and its
    // upstream's fds) counts against max_connections like a relayed one, so the sandbox cannot
    // hold more fds than the budget through handshakes. False at the limit. release() gives one
    // back (the handshake ended without adopt); at the limit the listeners stop accepting.
    bool reserve();
    void release();
    bool has_room() const { return in_use() < m_options.max_connections; }

    // Readable (POLLIN) when run_once() has work. The caller polls it with its other fds.
    int epoll_fd() const { return m_epoll.get(); }
    // Or lets run_once() watch them: `ready` is called from run_once while `fd` is readable
    // (level-triggered; hang-up and errors too), until unwatch(fd). One wait serves the caller's
    // fds and the relay's. `ready` may call anything here, unwatch its own fd included.
    void watch(int fd, std::function<void()> ready);
    void unwatch(int fd);

    // Handles the ready events, waiting at most timeout_ms for the first (0: never blocks,
    // -1: waits until something happens). Errors of one connection close that connection only.
    void run_once(int timeout_ms);

    // The answer to the oldest request a Target's connect() sent (EINPROGRESS): the connected
    // socket, or the errno, taken as connect()'s would be. An answer to no request is closed.
    void connected(UniqueFd socket, int err);

    // Closes every listener and every connection, frees the spare buffers. The destructor calls it.
    void close_all();

    // Open relayed connections. Safe to read from any thread.
    size_t connection_count() const { return m_connection_count.load(std::memory_order_relaxed); }
    // Clients waiting for the host socket's backlog to take their connection (EAGAIN).
    size_t waiting_count() const { return m_waiting.size() + m_retrying; }
    // Clients whose connection another process is making (EINPROGRESS), retried ones included.
    size_t pending_count() const { return m_pending.size(); }
    // Empty buffers kept for reuse, at most kMaxSpareBytes of them.
    size_t spare_buffer_count() const;
    // Empty pipes kept for reuse (two fds each), at most kMaxSparePipes.
    size_t spare_pipe_count() const;

    // Buffers and pipes lent to connections now (bytes in flight), and connections waiting for one.
    size_t lent_buffer_count() const;
    size_t lent_pipe_count() const;
    size_t starved_count() const { return m_starved[0].size() + m_starved[1].size(); }

    // The max_connections that fits in `fds` file descriptors: two per connection, once the
    // relay's own (its pipes, lent and spare; epoll; timer; a spare socket) and `reserve` for the
    // caller are set aside. At least 1.
    static size_t connections_within(size_t fds, size_t reserve, const RelayOptions& options);

    static constexpr size_t kMaxSpareBytes = size_t{4} * 1024 * 1024;
    static constexpr size_t kMaxSparePipes = 8;

private:
    struct Slot {
        std::unique_ptr<Connection> connection;
        uint32_t generation = 0;
        unsigned starved = 0;  // Connection::kNeeds* bits: its token is in those m_starved queues
        CloseHook on_close;  // adopted connections only
    };
    using Clock = std::chrono::steady_clock;

    void on_listener(uint32_t index);
    bool make_spare_unix(Listener& listener);
    // err: what connecting unix_socket to the listener's target gave (EAGAIN: it waits).
    void open_connection(uint32_t listener_index, UniqueFd tcp, UniqueFd unix_socket, int err);
    void retry_waiting(Clock::time_point now);
    void give_up(Listener& listener, UniqueFd& tcp, int err);
    size_t in_use() const { return connection_count() + m_waiting.size() + m_pending.size() + m_reserved; }
    bool install(std::unique_ptr<Connection> connection, CloseHook on_close);
    Slot* live_slot(uint64_t token);
    void on_connection(uint64_t token, uint32_t events);
    void retry_starved();
    Pumps pumps();
    void close_connection(uint32_t index, bool reset);
    void on_timer();
    void pause(Listener& listener, Clock::time_point now);
    void sync_listeners(Clock::time_point now);
    void report(Listener& listener, const std::string& message);
    void flush(Listener& listener, Clock::time_point now);
    void arm_timer(Clock::time_point deadline);
    void emit(const std::string& line);

    RelayOptions m_options;
    UniqueFd m_epoll;
    UniqueFd m_timer;
    bool m_timer_armed = false;
    Clock::time_point m_timer_deadline{};
    std::vector<std::unique_ptr<Listener>> m_listeners;
    struct Watch {
        int fd = -1;
        std::function<void()> ready;
    };
    std::deque<Watch> m_watches;  // a deque: one that runs stays where it is while others are added
    std::vector<Slot> m_slots;
    std::vector<uint32_t> m_free_slots;
    std::unique_ptr<BufferPool> m_buffers;
    std::unique_ptr<PipePool> m_pipes;
    // Tokens of connections waiting for a buffer ([0]) or a pipe ([1]), oldest first.
    std::deque<uint64_t> m_starved[2];
    UniqueFd m_spare_unix;  // the next connection's socket to the host, made before accept4
    // Accepted clients whose connect found the host's backlog full, oldest first.
    struct Waiting {
        uint32_t listener;
        UniqueFd tcp, unix_socket;
        Clock::time_point give_up;
    };
    std::deque<Waiting> m_waiting;
    // Accepted clients whose connection another process is making, in the order of the requests;
    // `retry`: a client of m_waiting tried again (while a round of them is out, no other round
    // starts and new clients queue behind them).
    struct Pending {
        uint32_t listener;
        UniqueFd tcp;
        bool retry;
        Clock::time_point give_up;
    };
    std::deque<Pending> m_pending;
    size_t m_retrying = 0;  // retried clients whose answers are out
    size_t m_bounced = 0;  // of this round, refused again and put back at the head
    bool m_retry_connected = false;  // one of this round connected
    Clock::time_point m_next_retry{};
    std::chrono::milliseconds m_retry_delay{};
    std::atomic<size_t> m_connection_count{0};
    size_t m_reserved = 0;  // reserve()d and not yet adopted or released
};

}  // namespace cocoon::relay
