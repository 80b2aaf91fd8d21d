// Relay benchmark driver: cocoon's relay::Relay against socat and a direct Unix connection, on
// one stand-in proxy. Standalone; runs as its caller, on 127.0.0.1 and Unix sockets only.
//
// usage: cocoon_bench_relay [--mib N] [--pings N] [--seconds S] [--clients N] [--idle N]
//                           [--buffer-size BYTES] [--socat PATH] [--no-socat]
//                           [--tests streams,rtt,rate,idle] [--rounds N] [--settle MS]
//                           [--copy-upload] [--pipe-size BYTES] [--in-process]
//
// Processes: this one (the clients), the stand-in proxy (an epoll server on a Unix socket), the
// relay as cocoon runs it (a child of its own standing for the monitor, and the confined worker
// it forks, relay/worker.h: RSS, CPU and fds are the two's; --in-process: relay::Relay alone in
// the child), socat (exec'd, a process per connection). Every loop is bounded by a count or a deadline.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/unique_fd.h"
#include "relay/host_socket.h"
#include "relay/relay.h"
#include "relay/fd_message.h"
#include "relay/worker.h"
#include "tests/support/socket.h"

using cocoon::UniqueFd;
using namespace cocoon::test;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr size_t kMiB = size_t{1024} * 1024;
constexpr size_t kMessage = 64;
// No process of the benchmark outlives this, whatever happens.
constexpr auto kLifetime = 20min;

struct Options {
    size_t mib = 1024;
    int pings = 5000;
    int warmup_pings = 500;
    int rounds = 4;
    double seconds = 3;
    int clients = 4;
    int idle = 10000;
    size_t buffer_size = size_t{256} * 1024;
    size_t pipe_size = size_t{1} << 20;
    bool copy_upload = false;
    bool in_process = false;  // the engine alone, without the worker split cocoon runs
    int settle_ms = 300;
    std::string socat = "socat";
    bool with_socat = true;
    std::string tests = "streams,rtt,rate,idle";
    bool runs(const std::string& test) const { return ("," + tests + ",").find("," + test + ",") != std::string::npos; }
};

[[noreturn]] void die(const std::string& message)
{
    std::fprintf(stderr, "relay_bench: %s\n", message.c_str());
    std::exit(1);
}

[[noreturn]] void die_errno(const std::string& call)
{
    die(call + ": " + std::strerror(errno));
}

long parse_number(std::string_view flag, const char* text, long min)
{
    long value = 0;
    std::string_view s = text;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || value < min)
        die(std::string(flag) + ": expected an integer >= " + std::to_string(min) + ", got '" + s.data() + "'");
    return value;
}

Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc)
                die(std::string(arg) + " needs a value");
            return argv[++i];
        };
        if (arg == "--mib")
            o.mib = static_cast<size_t>(parse_number(arg, value(), 1));
        else if (arg == "--pings")
            o.pings = static_cast<int>(parse_number(arg, value(), 10));
        else if (arg == "--seconds")
            o.seconds = static_cast<double>(parse_number(arg, value(), 1));
        else if (arg == "--clients")
            o.clients = static_cast<int>(parse_number(arg, value(), 1));
        else if (arg == "--idle")
            o.idle = static_cast<int>(parse_number(arg, value(), 0));
        else if (arg == "--buffer-size")
            o.buffer_size = static_cast<size_t>(parse_number(arg, value(), 4096));
        else if (arg == "--socat")
            o.socat = value();
        else if (arg == "--no-socat")
            o.with_socat = false;
        else if (arg == "--tests")
            o.tests = value();
        else if (arg == "--rounds")
            o.rounds = static_cast<int>(parse_number(arg, value(), 1));
        else if (arg == "--settle")
            o.settle_ms = static_cast<int>(parse_number(arg, value(), 0));
        else if (arg == "--copy-upload")
            o.copy_upload = true;
        else if (arg == "--in-process")
            o.in_process = true;
        else if (arg == "--pipe-size")
            o.pipe_size = static_cast<size_t>(parse_number(arg, value(), 4096));
        else
            die("unknown argument: " + std::string(arg) +
                "\nusage: cocoon_bench_relay [--mib N] [--pings N] [--seconds S] [--clients N] [--idle N] "
                "[--buffer-size BYTES] [--socat PATH] [--no-socat] [--tests streams,rtt,rate,idle] "
                "[--rounds N] [--settle MS] [--copy-upload] [--pipe-size BYTES] [--in-process]");
    }
    return o;
}

// Forks a child that runs `body` and exits; it dies with this process.
pid_t spawn(const std::function<void()>& body)
{
    pid_t pid = ::fork();
    if (pid < 0)
        die_errno("fork");
    if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        try {
            body();
        } catch (const std::exception& e) {
            die(e.what());
        }
        std::fflush(nullptr);
        ::_exit(0);
    }
    return pid;
}

void stop(pid_t pid)
{
    if (pid <= 0)
        return;
    ::kill(pid, SIGTERM);
    int status;
    ::waitpid(pid, &status, 0);
}

// ---- The stand-in proxy --------------------------------------------------------------------
//
// The first byte of a connection picks what it does:
//   'S' sink: read to EOF, answer the byte count (8 bytes, host order), close;
//   'G' + 8-byte count: send that many bytes, close;
//   'E' echo every byte (the 'E' too) until EOF;
//   'Q' echo the first 64 bytes (the 'Q' among them), then close first.

struct ProxyConnection {
    UniqueFd fd;
    char mode = 0;
    uint64_t count = 0;  // 'S': bytes read; 'Q': bytes echoed
    std::string header;  // 'G': the count being read
    uint64_t to_send = 0;  // 'G'
    std::string pending;  // 'E'/'Q': echo bytes the socket did not take yet
};

class Proxy {
public:
    // `tcp`: a listening TCP socket served alike, the floor of any TCP relay.
    Proxy(const std::string& path, UniqueFd tcp)
        : m_listener(listen_on(unix_address(path), 4096, SOCK_NONBLOCK)), m_tcp(std::move(tcp))
    {
    }

    void serve()
    {
        m_epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
        watch(m_listener.get(), EPOLLIN, EPOLL_CTL_ADD);
        ::fcntl(m_tcp.get(), F_SETFL, O_NONBLOCK);
        watch(m_tcp.get(), EPOLLIN, EPOLL_CTL_ADD);
        std::vector<char> buf(kMiB);
        std::vector<char> zeros(kMiB, 'g');
        std::vector<epoll_event> events(512);
        const auto deadline = Clock::now() + kLifetime;
        while (Clock::now() < deadline) {
            int n = ::epoll_wait(m_epoll.get(), events.data(), static_cast<int>(events.size()), 1000);
            for (int i = 0; i < n; ++i) {
                const int fd = events[i].data.fd;
                if (fd == m_listener.get() || fd == m_tcp.get()) {
                    accept_all(fd);
                    continue;
                }
                auto it = m_connections.find(fd);
                if (it == m_connections.end())
                    continue;
                if (!step(it->second, events[i].events, buf, zeros))
                    m_connections.erase(it);
            }
        }
    }

private:
    void watch(int fd, uint32_t events, int op)
    {
        epoll_event ev{};
        ev.events = events;
        ev.data.fd = fd;
        ::epoll_ctl(m_epoll.get(), op, fd, &ev);
    }

    void accept_all(int listener)
    {
        for (int i = 0; i < 1024; ++i) {
            int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0)
                return;
            if (listener == m_tcp.get()) {
                int one = 1;
                ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            }
            watch(fd, EPOLLIN, EPOLL_CTL_ADD);
            m_connections[fd].fd.reset(fd);
        }
    }

    // Sends what it can of c.pending; true when all is gone. Reads stop meanwhile.
    bool flush(ProxyConnection& c)
    {
        while (!c.pending.empty()) {
            ssize_t n = ::send(c.fd.get(), c.pending.data(), c.pending.size(), MSG_NOSIGNAL);
            if (n < 0 && errno == EAGAIN) {
                watch(c.fd.get(), EPOLLOUT, EPOLL_CTL_MOD);
                return false;
            }
            if (n <= 0)
                throw std::runtime_error("send");
            c.pending.erase(0, static_cast<size_t>(n));
        }
        watch(c.fd.get(), EPOLLIN, EPOLL_CTL_MOD);
        return true;
    }

    // Handles one event; false closes the connection.
    bool step(ProxyConnection& c, uint32_t events, std::vector<char>& buf, const std::vector<char>& bytes)
    {
        try {
            if (events & EPOLLOUT) {
                if (c.mode == 'G') {
                    for (int i = 0; i < 64 && c.to_send > 0; ++i) {
                        size_t len = static_cast<size_t>(std::min<uint64_t>(c.to_send, bytes.size()));
                        ssize_t n = ::send(c.fd.get(), bytes.data(), len, MSG_NOSIGNAL);
                        if (n < 0 && errno == EAGAIN)
                            return true;
                        if (n <= 0)
                            return false;
                        c.to_send -= static_cast<uint64_t>(n);
                    }
                    return c.to_send > 0;
                }
                if (!flush(c))
                    return true;
                return !(c.mode == 'Q' && c.count >= kMessage);
            }
            ssize_t n = ::recv(c.fd.get(), buf.data(), buf.size(), 0);
            if (n < 0)
                return errno == EAGAIN || errno == EINTR;
            if (n == 0) {
                if (c.mode == 'S') {
                    send_all(c.fd.get(), &c.count, sizeof c.count);
                }
                return false;
            }
            const char* data = buf.data();
            size_t len = static_cast<size_t>(n);
            if (c.mode == 0)
                c.mode = data[0];
            switch (c.mode) {
            case 'S':
                c.count += len;
                return true;
            case 'E':
                c.pending.append(data, len);
                flush(c);
                return true;
            case 'Q': {
                size_t take = static_cast<size_t>(std::min<uint64_t>(len, kMessage - c.count));
                c.pending.append(data, take);
                c.count += take;
                bool done = flush(c);
                return !(done && c.count >= kMessage);
            }
            case 'G':
                c.header.append(data, len);
                if (c.header.size() >= 1 + sizeof(uint64_t)) {
                    std::memcpy(&c.to_send, c.header.data() + 1, sizeof c.to_send);
                    watch(c.fd.get(), EPOLLOUT, EPOLL_CTL_MOD);
                }
                return true;
            default:
                return false;
            }
        } catch (const std::exception&) {
            return false;
        }
    }

    UniqueFd m_listener;
    UniqueFd m_tcp;
    UniqueFd m_epoll;
    std::unordered_map<int, ProxyConnection> m_connections;
};

// ---- The relay under test, in its own process ---------------------------------------------

void run_relay(UniqueFd listener, const std::string& path, const Options& o)
{
    cocoon::relay::RelayOptions options;
    options.buffer_size = o.buffer_size;
    options.splice_upload = !o.copy_upload;
    options.pipe_size = o.pipe_size;
    ::signal(SIGPIPE, SIG_IGN);  // as the monitor does: splice raises it when a peer is gone
    options.max_connections = static_cast<size_t>(o.idle) + 1000;
    auto target = std::make_shared<const cocoon::relay::HostSocket>(path, true, "relay");
    const auto deadline = Clock::now() + kLifetime;
    if (o.in_process) {
        cocoon::relay::Relay relay(options);
        relay.add_listener(std::move(listener), target);
        while (Clock::now() < deadline)
            relay.run_once(1000);
        return;
    }
    // As cocoon runs it: this process is the monitor, which connects each accepted client for
    // the confined worker (relay/worker.h) that relays.
    cocoon::relay::WorkerOptions worker_options;
    worker_options.relay = options;
    worker_options.relay_names = {path};
    cocoon::relay::Worker worker(std::move(worker_options), {target});
    worker.add_listener(std::move(listener), cocoon::relay::ListenerKind::Relay, 0);
    while (Clock::now() < deadline) {
        pollfd p{worker.fd(), POLLIN, 0};
        if (::poll(&p, 1, 1000) > 0 && !worker.serve())
            break;
    }
    worker.stop("");
}

// The relay's process and its worker child (relay/worker.h), if any.
std::vector<pid_t> relay_processes(pid_t pid)
{
    std::vector<pid_t> out{pid};
    std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    for (pid_t child; children >> child;)
        out.push_back(child);
    return out;
}

long rss_kib_of(pid_t pid)
{
    std::ifstream status("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Rss:", 0) == 0)
            return std::stol(line.substr(4));
    return -1;
}

// utime + stime of a process, in milliseconds.
double cpu_ms_of(pid_t pid)
{
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    size_t end = text.rfind(')');  // the command may hold spaces
    if (end == std::string::npos)
        return 0;
    std::vector<std::string> fields;
    size_t pos = end + 2;
    for (int i = 0; i < 14 && pos < text.size(); ++i) {  // fields 3..16
        size_t next = text.find(' ', pos);
        fields.push_back(text.substr(pos, next - pos));
        pos = next + 1;
    }
    if (fields.size() < 14)
        return 0;
    const double ticks = static_cast<double>(std::stoull(fields[11]) + std::stoull(fields[12]));
    return ticks * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Of the relay's process and its worker together.
long rss_kib(pid_t pid)
{
    long sum = 0;
    for (pid_t p : relay_processes(pid))
        sum += std::max(0L, rss_kib_of(p));
    return sum;
}
double cpu_ms(pid_t pid)
{
    double sum = 0;
    for (pid_t p : relay_processes(pid))
        sum += cpu_ms_of(p);
    return sum;
}

// Of the relay's process and its worker (not dumpable: root's to count).
size_t fd_count(pid_t pid)
{
    size_t n = 0;
    for (pid_t p : relay_processes(pid)) {
        std::error_code ec;
        for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(p) + "/fd", ec);
             !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
            ++n;
    }
    return n;
}

// ---- Clients -------------------------------------------------------------------------------

struct Target {
    std::string label;
    Address addr;  // 127.0.0.1:port or the Unix socket

    UniqueFd connect() const
    {
        UniqueFd fd = try_connect(addr, 10s);
        if (fd && addr.family() == AF_INET) {
            int one = 1;
            ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        return fd;
    }
};

double seconds_since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds for one stream of `bytes` from the client to the proxy, until the proxy confirmed
// them all; nullopt if anything failed.
std::optional<double> upload(const Target& t, size_t bytes)
{
    std::vector<char> buf(kMiB, 'u');
    buf[0] = 'S';
    const auto start = Clock::now();
    UniqueFd fd = t.connect();
    if (!fd)
        return std::nullopt;
    for (size_t sent = 0; sent < bytes; sent += buf.size()) {
        if (!send_all(fd.get(), buf.data(), std::min(buf.size(), bytes - sent)))
            return std::nullopt;
        buf[0] = 'u';
    }
    ::shutdown(fd.get(), SHUT_WR);
    uint64_t confirmed = 0;
    if (recv_exact(fd.get(), &confirmed, sizeof confirmed) != sizeof confirmed || confirmed != bytes)
        return std::nullopt;
    return seconds_since(start);
}

// Seconds for one stream of `bytes` from the proxy to the client, to its EOF.
std::optional<double> download(const Target& t, size_t bytes)
{
    const auto start = Clock::now();
    UniqueFd fd = t.connect();
    if (!fd)
        return std::nullopt;
    char header[1 + sizeof(uint64_t)] = {'G'};
    uint64_t want = bytes;
    std::memcpy(header + 1, &want, sizeof want);
    if (!send_all(fd.get(), header, sizeof header))
        return std::nullopt;
    std::vector<char> buf(kMiB);
    uint64_t got = 0;
    for (size_t i = 0; i <= bytes; ++i) {  // each pass reads at least a byte, or ends
        ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
        if (n <= 0)
            break;
        got += static_cast<uint64_t>(n);
    }
    if (got != bytes)
        return std::nullopt;
    return seconds_since(start);
}

// `count` 64-byte round trips on one connection, after `warmup` more; appends microseconds.
bool round_trips(const Target& t, int warmup, int count, std::vector<double>& samples)
{
    UniqueFd fd = t.connect();
    if (!fd)
        return false;
    char out[kMessage], in[kMessage];
    std::memset(out, 'p', sizeof out);
    out[0] = 'E';
    for (int i = 0; i < warmup + count; ++i) {
        const auto start = Clock::now();
        if (!send_all(fd.get(), out, sizeof out) || recv_exact(fd.get(), in, sizeof in) != sizeof in)
            return false;
        if (i >= warmup)
            samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        out[0] = 'p';
    }
    return true;
}

struct Rate {
    size_t done = 0;
    size_t failed = 0;
    double seconds = 0;
};

// Connections of `clients` threads for `seconds`: connect, one 64-byte echo, close.
Rate connection_rate(const Target& t, int clients, double seconds)
{
    std::atomic<size_t> done{0}, failed{0};
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    {
        std::vector<std::jthread> threads;
        threads.reserve(static_cast<size_t>(clients));
        for (int c = 0; c < clients; ++c)
            threads.emplace_back([&] {
                char out[kMessage], in[kMessage];
                std::memset(out, 'q', sizeof out);
                out[0] = 'Q';
                for (int i = 0; i < 10'000'000 && Clock::now() < deadline; ++i) {
                    UniqueFd fd = t.connect();
                    if (fd && send_all(fd.get(), out, sizeof out) && recv_exact(fd.get(), in, sizeof in) == sizeof in)
                        ++done;
                    else
                        ++failed;
                }
            });
    }
    return {done.load(), failed.load(), seconds_since(start)};
}

// The least a privilege split costs per connection: a 4-byte request from one process and an
// answer carrying an fd from another, over a SOCK_SEQPACKET pair, with the worker's own messages
// (relay/fd_message.h), each side waiting in poll(2) as relay/worker.cc's two do. CPU of both per exchange, and the
// mean wall time of one.
struct Exchange {
    double cpu_us = 0, wall_us = 0;
};
Exchange fd_exchanges(int count)
{
    std::fflush(stdout);  // the child would print what is buffered again
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
        die_errno("socketpair");
    UniqueFd asker(pair[0]), answerer(pair[1]);
    const pid_t child = spawn([&] {
        asker.reset();
        UniqueFd payload(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        for (;;) {
            pollfd p{answerer.get(), POLLIN, 0};
            uint32_t request = 0;
            UniqueFd none;
            if (::poll(&p, 1, -1) != 1 || cocoon::relay::receive_msg(answerer.get(), request, none) != 0 ||
                !cocoon::relay::send_msg(answerer.get(), request, payload.get()))
                return;
        }
    });
    answerer.reset();
    auto own_cpu_ms = [] {
        timespec ts{};
        ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    };
    const double cpu_before = own_cpu_ms() + cpu_ms_of(child);
    const auto start = Clock::now();
    int done = 0;
    for (; done < count; ++done) {
        uint32_t request = static_cast<uint32_t>(done);
        UniqueFd received;
        pollfd p{asker.get(), POLLIN, 0};
        if (!cocoon::relay::send_msg(asker.get(), request) || ::poll(&p, 1, -1) != 1 ||
            cocoon::relay::receive_msg(asker.get(), request, received) != 0 || !received)
            break;
    }
    const double seconds = seconds_since(start);
    const double cpu = own_cpu_ms() + cpu_ms_of(child) - cpu_before;
    asker.reset();
    stop(child);
    if (done == 0)
        return {};
    return {cpu * 1000 / done, seconds * 1e6 / done};
}

struct IdleResult {
    int open = 0;
    double seconds = 0;
    long rss_before_kib = 0;
    long rss_after_kib = 0;
    size_t relay_fds = 0;
};

// Opens `count` connections through the relay, each checked with a 1-byte echo, and keeps them.
IdleResult idle_connections(const Target& t, int count, pid_t relay)
{
    IdleResult r;
    r.rss_before_kib = rss_kib(relay);
    std::vector<UniqueFd> open;
    open.reserve(static_cast<size_t>(count));
    const auto start = Clock::now();
    for (int i = 0; i < count; ++i) {
        UniqueFd fd = t.connect();
        char byte = 'E';
        if (!fd || !send_all(fd.get(), &byte, 1) || recv_exact(fd.get(), &byte, 1) != 1)
            break;
        open.push_back(std::move(fd));
    }
    r.seconds = seconds_since(start);
    r.open = static_cast<int>(open.size());
    std::this_thread::sleep_for(200ms);
    r.rss_after_kib = rss_kib(relay);
    r.relay_fds = fd_count(relay);
    return r;
}

// CPUs this process may run on (taskset narrows them).
int usable_cpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) < 0)
        return static_cast<int>(std::thread::hardware_concurrency());
    return CPU_COUNT(&set);
}

// Puts the servers and their children (and the calling thread) on the first CPU this process may use, or (`one`
// false) back on all of them. socat's per-connection children inherit it from socat.
void pin(const std::vector<pid_t>& pids, bool one)
{
    static const cpu_set_t all = [] {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof set, &set) < 0)
            die_errno("sched_getaffinity");
        return set;
    }();
    cpu_set_t set = all;
    if (one) {
        CPU_ZERO(&set);
        for (int i = 0; i < CPU_SETSIZE; ++i)
            if (CPU_ISSET(i, &all)) {
                CPU_SET(i, &set);
                break;
            }
    }
    // With their children: the relay's worker (relay/worker.h).
    for (pid_t parent : pids)
        for (pid_t pid : parent > 0 ? relay_processes(parent) : std::vector<pid_t>{})
            if (::sched_setaffinity(pid, sizeof set, &set) < 0 && errno != ESRCH)
                die_errno("sched_setaffinity(" + std::to_string(pid) + ")");
    if (::sched_setaffinity(0, sizeof set, &set) < 0)
        die_errno("sched_setaffinity");
}

// ---- Report --------------------------------------------------------------------------------

std::string cell(double v, int precision = 0)
{
    if (v <= 0 || std::isnan(v))
        return "-";
    char s[32];
    std::snprintf(s, sizeof s, "%.*f", precision, v);
    return s;
}

std::string ratio(double a, double b)
{
    if (a <= 0 || b <= 0)
        return "-";
    char s[32];
    std::snprintf(s, sizeof s, "%.2fx", a / b);
    return s;
}

// What one path gave over every round.
struct Measured {
    double up_seconds = 0, down_seconds = 0;  // summed over rounds
    size_t up_bytes = 0, down_bytes = 0;
    bool streams_failed = false;
    std::vector<double> rtt_us;
    std::vector<double> rtt_one_cpu_us;  // every process on one CPU
    bool rtt_failed = false;
    Rate rate;
    double up_cpu_ms = 0, down_cpu_ms = 0;  // the relay process's CPU time during the streams
    double rate_cpu_ms = 0;  // and during the connections,
    double rate_worker_cpu_ms = 0;  // of which the worker's

    double up() const
    {
        return streams_failed || up_seconds == 0 ? 0 : static_cast<double>(up_bytes) / kMiB / up_seconds;
    }
    double down() const
    {
        return streams_failed || down_seconds == 0 ? 0 : static_cast<double>(down_bytes) / kMiB / down_seconds;
    }
    double rtt_percentile(double p, bool one_cpu = false) const
    {
        const std::vector<double>& samples = one_cpu ? rtt_one_cpu_us : rtt_us;
        if (rtt_failed || samples.empty())
            return 0;
        std::vector<double> sorted = samples;
        std::sort(sorted.begin(), sorted.end());
        return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())))];
    }
    double connections_per_second() const
    {
        return rate.seconds > 0 ? static_cast<double>(rate.done) / rate.seconds : 0;
    }
};

// One line of the table: the five paths, the three ratios, the target. `lower`: a smaller figure
// is better (round trips), for the split's bound against the engine.
struct Paths {
    double relay, engine, socat, direct, tcp;
};
void row(const char* name, const Paths& p, int precision, bool lower, const std::string& target, bool met)
{
    // The split (relay/worker.h) may cost at most 10% of the engine's figure.
    const bool split_met = p.engine <= 0 || (lower ? p.relay <= 1.1 * p.engine : p.relay >= 0.9 * p.engine);
    std::printf("%-22s %9s %9s %9s %9s %9s %12s %12s %13s   %-28s %s%s\n", name, cell(p.relay, precision).c_str(),
                cell(p.engine, precision).c_str(), cell(p.socat, precision).c_str(), cell(p.direct, precision).c_str(),
                cell(p.tcp, precision).c_str(), ratio(p.relay, p.engine).c_str(), ratio(p.relay, p.socat).c_str(),
                ratio(p.relay, p.direct).c_str(), target.c_str(),
                target.empty() || p.relay <= 0 ? ""
                : met                          ? "met"
                                               : "MISSED",
                split_met ? "" : " (split > 10%)");
}

// A listening socket on 127.0.0.1 and a free port; its address lands in `addr`.
UniqueFd tcp_listen(Address& addr)
{
    try {
        UniqueFd fd = listen_on(loopback());
        addr = address_of(fd.get());
        return fd;
    } catch (const std::exception& e) {
        die(std::string("listen(127.0.0.1): ") + e.what());
    }
}

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse(argc, argv);
    if (!o.runs("idle"))
        o.idle = 0;
    const int requested_idle = o.idle;
    // The relay holds two fds per connection, plus a few of its own.
    const rlim_t want_fds = static_cast<rlim_t>(o.idle) * 2 + 64;
    const rlim_t have_fds = raise_nofile(want_fds);
    if (have_fds < want_fds) {
        const int fit = static_cast<int>((have_fds - 64) / 2);
        std::fprintf(stderr,
                     "relay_bench: RLIMIT_NOFILE allows %llu fds (a higher hard limit needs CAP_SYS_RESOURCE): %d "
                     "idle connections instead of %d\n",
                     static_cast<unsigned long long>(have_fds), fit, o.idle);
        o.idle = std::max(fit, 0);
    }

    char tmpl[] = "/tmp/cocoon-bench-relay.XXXXXX";
    if (!::mkdtemp(tmpl))
        die_errno("mkdtemp");
    const std::string dir = tmpl;
    const std::string path = dir + "/proxy.sock";

    // Listeners are made here so their ports are known; the children take them.
    Address proxy_addr, relay_addr, socat_addr;
    UniqueFd proxy_tcp = tcp_listen(proxy_addr);
    pid_t proxy = spawn([&] {
        Proxy server(path, std::move(proxy_tcp));
        server.serve();
    });
    proxy_tcp.reset();
    for (int i = 0; i < 500 && !std::filesystem::exists(path); ++i)
        std::this_thread::sleep_for(2ms);

    UniqueFd listener = tcp_listen(relay_addr);
    pid_t relay = spawn([&] { run_relay(std::move(listener), path, o); });
    listener.reset();
    // The engine alone, beside the split, so the split's cost is a ratio of one run.
    Address engine_addr;
    pid_t engine = -1;
    if (!o.in_process) {
        UniqueFd engine_listener = tcp_listen(engine_addr);
        Options engine_options = o;
        engine_options.in_process = true;
        engine = spawn([&] { run_relay(std::move(engine_listener), path, engine_options); });
    }

    pid_t socat = -1;
    if (o.with_socat) {
        // A free port: bound to 0, read, let go; socat binds it again with reuseaddr.
        tcp_listen(socat_addr);
        const std::string listen_arg =
            "TCP-LISTEN:" + std::to_string(port_of(socat_addr)) + ",bind=127.0.0.1,fork,reuseaddr";
        const std::string connect_arg = "UNIX-CONNECT:" + path;
        socat = spawn([&] {
            ::execlp(o.socat.c_str(), o.socat.c_str(), listen_arg.c_str(), connect_arg.c_str(), nullptr);
            std::fprintf(stderr, "relay_bench: exec %s: %s\n", o.socat.c_str(), std::strerror(errno));
            ::_exit(127);
        });
    }

    // A closed stdout (| head) must not kill this process before it cleans up. Set after the
    // children started: they keep the default.
    ::signal(SIGPIPE, SIG_IGN);

    const Target direct{"direct", unix_address(path)};
    const Target tcp{"tcp", proxy_addr};
    const Target through_relay{"relay", relay_addr};
    const Target through_socat{"socat", socat_addr};
    const Target through_engine{"engine", engine_addr};
    std::vector<const Target*> targets{&direct, &tcp, &through_relay};
    if (o.with_socat)
        targets.push_back(&through_socat);
    if (engine > 0)
        targets.push_back(&through_engine);
    // The relay process behind a target, whose CPU is counted; -1 for the others.
    auto relay_pid = [&](const Target* t) { return t == &through_relay ? relay : t == &through_engine ? engine : -1; };
    // Each must answer an echo before anything is measured.
    for (const Target* t : targets) {
        bool up = false;
        for (int i = 0; i < 500 && !up; ++i) {
            UniqueFd fd = t->connect();
            char c = 'E';
            up = fd && send_all(fd.get(), &c, 1) && recv_exact(fd.get(), &c, 1) == 1;
            if (!up)
                std::this_thread::sleep_for(10ms);
        }
        if (!up)
            die(t->label + " does not answer");
    }

    const size_t bytes = o.mib * kMiB;
    std::printf("cocoon relay benchmark: %zu MiB streams, %d round trips of %zu bytes, %d clients x %.0f s of "
                "connections, %d idle connections; relay buffers of %zu bytes; %d CPUs\n",
                o.mib, o.pings, kMessage, o.clients, o.seconds, o.idle, o.buffer_size, usable_cpus());
    std::printf("relay: cocoon's Relay, 127.0.0.1 -> Unix socket; socat: socat fork (a process per "
                "connection); direct: the Unix socket itself; tcp: 127.0.0.1 to the proxy itself, the "
                "floor of any TCP relay\n\n");
    std::fflush(stdout);

    // Each test is a phase of its own. Within it, rounds interleave the paths, so drift on the host
    // (other guests, other jobs) hits them alike, and every measurement starts after a pause on a
    // quiet machine: right after a 1 GiB stream, the scheduler's load figures for the process that
    // moved it (decaying over ~100 ms) changed where the next round trip's wake-ups ran and
    // doubled the relay's round trip (120-170 us against 70-85 us after a pause).
    std::vector<Measured> results(targets.size());
    const size_t round_bytes = std::max<size_t>(kMiB, bytes / static_cast<size_t>(o.rounds)) / kMiB * kMiB;
    const std::vector<pid_t> servers{proxy, relay, socat, engine};
    auto each_round = [&](const char* test, const std::function<void(size_t, Measured&, int)>& measure) {
        if (!o.runs(test))
            return;
        for (int round = 0; round < o.rounds; ++round)
            for (size_t i = 0; i < targets.size(); ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(o.settle_ms));
                measure(i, results[i], round);
            }
    };
    each_round("streams", [&](size_t i, Measured& m, int) {
        const pid_t pid = relay_pid(targets[i]);
        double cpu = pid > 0 ? cpu_ms(pid) : 0;
        auto up = upload(*targets[i], round_bytes);
        if (pid > 0)
            m.up_cpu_ms += cpu_ms(pid) - cpu;
        cpu = pid > 0 ? cpu_ms(pid) : 0;
        auto down = download(*targets[i], round_bytes);
        if (pid > 0)
            m.down_cpu_ms += cpu_ms(pid) - cpu;
        m.streams_failed = m.streams_failed || !up || !down;
        m.up_seconds += up.value_or(0);
        m.down_seconds += down.value_or(0);
        m.up_bytes += round_bytes;
        m.down_bytes += round_bytes;
    });
    each_round("rtt", [&](size_t i, Measured& m, int round) {
        if (!round_trips(*targets[i], round == 0 ? o.warmup_pings : 50, o.pings / o.rounds, m.rtt_us))
            m.rtt_failed = true;
    });
    // The same on one CPU for every process: no wake-up crosses CPUs, so what is left is each
    // path's own cost, whatever the scheduler would have placed where.
    if (o.runs("rtt")) {
        pin(servers, true);
        each_round("rtt", [&](size_t i, Measured& m, int round) {
            if (!round_trips(*targets[i], round == 0 ? o.warmup_pings : 50, o.pings / o.rounds, m.rtt_one_cpu_us))
                m.rtt_failed = true;
        });
        pin(servers, false);
    }
    each_round("rate", [&](size_t i, Measured& m, int) {
        const pid_t pid = relay_pid(targets[i]);
        const double cpu = pid > 0 ? cpu_ms(pid) : 0, own = pid > 0 ? cpu_ms_of(pid) : 0;
        Rate rate = connection_rate(*targets[i], o.clients, o.seconds / o.rounds);
        if (pid > 0) {
            m.rate_cpu_ms += cpu_ms(pid) - cpu;
            m.rate_worker_cpu_ms += (cpu_ms(pid) - cpu) - (cpu_ms_of(pid) - own);
        }
        m.rate.done += rate.done;
        m.rate.failed += rate.failed;
        m.rate.seconds += rate.seconds;
    });
    for (size_t i = 0; i < targets.size(); ++i) {
        const Measured& m = results[i];
        std::fprintf(stderr,
                     "relay_bench: %-6s up %.0f MiB/s, down %.0f MiB/s, rtt %.1f/%.1f us, %.0f conn/s (%zu failed)\n",
                     targets[i]->label.c_str(), m.up(), m.down(), m.rtt_percentile(0.5), m.rtt_percentile(0.99),
                     m.connections_per_second(), m.rate.failed);
    }
    const Measured& d = results[0];
    const Measured& t = results[1];
    const Measured& r = results[2];
    const Measured s = o.with_socat ? results[3] : Measured{};
    const Measured e = engine > 0 ? results.back() : Measured{};
    const IdleResult idle = idle_connections(through_relay, o.idle, relay);
    const IdleResult engine_idle =
        engine > 0 && o.idle > 0 ? idle_connections(through_engine, o.idle, engine) : IdleResult{};

    std::printf("%-22s %9s %9s %9s %9s %9s %12s %12s %13s   %s\n", "", "relay", "engine", "socat", "direct", "tcp",
                "relay/engine", "relay/socat", "relay/direct", "target");
    row("upload MiB/s", {r.up(), e.up(), s.up(), d.up(), t.up()}, 0, false, ">= 6x socat, >= 0.5x direct",
        s.up() > 0 && r.up() >= 6 * s.up() && r.up() >= 0.5 * d.up());
    row("download MiB/s", {r.down(), e.down(), s.down(), d.down(), t.down()}, 0, false, ">= 6x socat, >= 0.5x direct",
        s.down() > 0 && r.down() >= 6 * s.down() && r.down() >= 0.5 * d.down());
    auto rtt = [](const Measured& m, double p, bool one_cpu = false) { return m.rtt_percentile(p, one_cpu); };
    row("round trip median us", {rtt(r, 0.5), rtt(e, 0.5), rtt(s, 0.5), rtt(d, 0.5), rtt(t, 0.5)}, 1, true,
        "<= 1.5x direct", rtt(r, 0.5) <= 1.5 * rtt(d, 0.5));
    row("round trip p99 us", {rtt(r, 0.99), rtt(e, 0.99), rtt(s, 0.99), rtt(d, 0.99), rtt(t, 0.99)}, 1, true, "", true);
    row("1 CPU: round trip us",
        {rtt(r, 0.5, true), rtt(e, 0.5, true), rtt(s, 0.5, true), rtt(d, 0.5, true), rtt(t, 0.5, true)}, 1, true, "",
        true);
    row("connections/s",
        {r.connections_per_second(), e.connections_per_second(), s.connections_per_second(), d.connections_per_second(),
         t.connections_per_second()},
        0, false, ">= 15x socat",
        s.connections_per_second() > 0 && r.connections_per_second() >= 15 * s.connections_per_second());
    if (o.runs("streams"))
        std::printf("\nrelay process CPU per GiB relayed: upload %.0f ms, download %.0f ms\n",
                    r.up_cpu_ms * kMiB * 1024 / static_cast<double>(r.up_bytes),
                    r.down_cpu_ms * kMiB * 1024 / static_cast<double>(r.down_bytes));
    if (o.runs("rate") && r.rate.done > 0) {
        std::printf("relay process CPU per connection: %.1f us (the worker's %.1f us)",
                    r.rate_cpu_ms * 1000 / static_cast<double>(r.rate.done),
                    r.rate_worker_cpu_ms * 1000 / static_cast<double>(r.rate.done));
        if (e.rate.done > 0)
            std::printf("; engine alone %.1f us", e.rate_cpu_ms * 1000 / static_cast<double>(e.rate.done));
        const Exchange x = fd_exchanges(20000);
        std::printf("\nanchor: a request and an fd in answer between two processes (SOCK_SEQPACKET, both "
                    "polling): %.1f us of CPU, %.1f us round trip\n",
                    x.cpu_us, x.wall_us);
        // The split's floor: any design that keeps connect() in the privileged process (issue 22)
        // pays the anchor per connection, beside the engine's own cost.
        if (e.rate.done > 0) {
            const double engine_us = e.rate_cpu_ms * 1000 / static_cast<double>(e.rate.done);
            const double relay_us = r.rate_cpu_ms * 1000 / static_cast<double>(r.rate.done);
            std::printf("split's cost per connection: %.1f us of CPU over the engine's %.1f us (+%.0f%%); its floor, "
                        "the anchor, alone is +%.0f%%\n",
                        relay_us - engine_us, engine_us, 100 * (relay_us - engine_us) / engine_us,
                        100 * x.cpu_us / engine_us);
        }
    }
    if (o.runs("idle")) {
        const double growth_mib = static_cast<double>(idle.rss_after_kib - idle.rss_before_kib) / 1024;
        const bool all = idle.open == requested_idle;
        std::printf("\nidle connections through the relay: %d of %d (opened in %.2f s); relay RSS %.1f -> %.1f "
                    "MiB, growth %.1f MiB (%.0f bytes per connection); relay fds %zu\ntarget: %d connections, "
                    "RSS growth <= 32 MiB: %s\n",
                    idle.open, requested_idle, idle.seconds, static_cast<double>(idle.rss_before_kib) / 1024,
                    static_cast<double>(idle.rss_after_kib) / 1024, growth_mib,
                    idle.open ? growth_mib * kMiB / idle.open : 0.0, idle.relay_fds, requested_idle,
                    growth_mib > 32 ? "MISSED"
                    : all           ? "met"
                                    : "growth met, count MISSED (RLIMIT_NOFILE)");
        if (engine_idle.open > 0)
            std::printf("the engine alone: %d open, RSS growth %.1f MiB\n", engine_idle.open,
                        static_cast<double>(engine_idle.rss_after_kib - engine_idle.rss_before_kib) / 1024);
    }
    if (r.rate.failed || d.rate.failed || s.rate.failed || t.rate.failed)
        std::printf("failed connections: relay %zu, socat %zu, direct %zu, tcp %zu\n", r.rate.failed, s.rate.failed,
                    d.rate.failed, t.rate.failed);

    stop(socat);
    if (engine > 0)
        stop(engine);
    stop(relay);
    stop(proxy);
    std::filesystem::remove_all(dir);
    return 0;
}
