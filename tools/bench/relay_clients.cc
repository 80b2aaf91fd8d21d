// The relay benchmark's clients and what it reads of the processes it measures: streams, round
// trips, connection rates, idle connections and the anchor (fd exchanges) from the driver's
// process, and RSS, CPU and fds of the relay's processes from /proc. Runs as the benchmark's
// caller; see relay_bench.h.
// Runs in: dev.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "relay/fd_message.h"
#include "tools/bench/relay_bench.h"

using namespace cocoon::test;
using namespace std::chrono_literals;

namespace cocoon::bench {
namespace {

long rss_kib_of(pid_t pid)
{
    std::ifstream status("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Rss:", 0) == 0)
            return std::stol(line.substr(4));
    return -1;
}

// Of the relay's process and its worker together.
long rss_kib(pid_t pid)
{
    long sum = 0;
    for (pid_t p : relay_processes(pid))
        sum += std::max(0L, rss_kib_of(p));
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

}  // namespace

// ---- Process statistics --------------------------------------------------------------------

std::vector<pid_t> relay_processes(pid_t pid)
{
    std::vector<pid_t> out{pid};
    std::ifstream children("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    for (pid_t child; children >> child;)
        out.push_back(child);
    return out;
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

double cpu_ms(pid_t pid)
{
    double sum = 0;
    for (pid_t p : relay_processes(pid))
        sum += cpu_ms_of(p);
    return sum;
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

// ---- Clients -------------------------------------------------------------------------------

UniqueFd Target::connect() const
{
    UniqueFd fd = try_connect(addr, 10s);
    if (fd && addr.family() == AF_INET) {
        int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
}

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

// The anchor: a request and an fd in answer between this process and a child (relay_bench.h).
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
            if (::poll(&p, 1, -1) != 1 || cocoon::relay::receive_msg(answerer.get(), request, {}) != 0 ||
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
            cocoon::relay::receive_msg(asker.get(), request, std::span(&received, 1)) != 0 || !received)
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

}  // namespace cocoon::bench
