// Test harness of the relay's unit tests (tests/unit/relay_*test.cc, in their process): loopback
// sockets, echo servers, streams that show a byte out of place, fd and memory counters.
#pragma once

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "relay/relay.h"
#include "tests/support/socket.h"

namespace cocoon::relay_test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr uint64_t kMiB = uint64_t{1024} * 1024;

// ---- Sockets -------------------------------------------------------------------------------

using test::Address;
using test::address_of;
using test::connect_to;
using test::listen_on;
using test::loopback;
using test::port_of;
using test::recv_exact;
using test::send_all;
using test::set_timeouts;
using test::unix_address;

// The next connection on a listener, blocking, or an invalid fd after `timeout`.
inline UniqueFd accept_one(int listener, std::chrono::milliseconds timeout = 5s)
{
    pollfd pfd{listener, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(timeout.count())) != 1)
        return UniqueFd();
    UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd)
        set_timeouts(fd.get(), 10s);
    return fd;
}

// Sends `message` and expects it back unchanged.
inline bool echoes(int fd, const std::string& message)
{
    if (!send_all(fd, message))
        return false;
    std::string back(message.size(), '\0');
    return recv_exact(fd, back.data(), back.size()) == back.size() && back == message;
}

// The peer must close or reset `fd` within `limit`: recv returns 0 or fails with ECONNRESET.
inline void expect_closed_within(int fd, std::chrono::milliseconds limit)
{
    const auto start = Clock::now();
    pollfd pfd{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, static_cast<int>(limit.count())), 1) << "still open after " << limit.count() << " ms";
    char byte;
    ssize_t n = ::recv(fd, &byte, 1, 0);
    const int err = errno;
    EXPECT_TRUE(n == 0 || (n < 0 && err == ECONNRESET)) << "recv: " << n << " " << std::strerror(err);
    EXPECT_LT(Clock::now() - start, limit);
}

// Connects to a relay that closes this client at once (its proxy refuses). The reset can come
// before connect() has returned; then connect itself fails with ECONNRESET, the same prompt close.
inline void expect_refused_promptly(const Address& addr, std::chrono::milliseconds limit = 1s)
{
    UniqueFd fd = test::try_connect(addr);
    if (!fd) {
        EXPECT_EQ(errno, ECONNRESET) << "connect: " << std::strerror(errno);
        return;
    }
    expect_closed_within(fd.get(), limit);
}

inline void reset_close(UniqueFd& fd)
{
    linger hard{1, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    fd.reset();
}

// ---- The process ---------------------------------------------------------------------------

inline std::set<int> open_fds()
{
    std::set<int> fds;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
        fds.insert(std::stoi(entry.path().filename().string()));
    return fds;
}

// Less the directory_iterator's own fd, which is open while it lists.
inline size_t count_fds()
{
    return open_fds().size() - 1;
}

// Resident memory in KiB (VmRSS), counted exactly: smaps_rollup walks the page tables, while
// /proc/self/status may show per-CPU counters that lag behind.
inline long vm_rss_kib()
{
    std::ifstream status("/proc/self/smaps_rollup");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("Rss:", 0) == 0)
            return std::stol(line.substr(4));
    return -1;
}

// Sets RLIMIT_NOFILE's soft limit (raising the hard one when allowed) and restores both at the end.
class NofileLimit {
public:
    explicit NofileLimit(rlim_t soft)
    {
        ::getrlimit(RLIMIT_NOFILE, &m_old);
        rlimit want{soft, std::max(soft, m_old.rlim_max)};
        m_ok = ::setrlimit(RLIMIT_NOFILE, &want) == 0;
    }
    ~NofileLimit() { ::setrlimit(RLIMIT_NOFILE, &m_old); }
    NofileLimit(const NofileLimit&) = delete;
    NofileLimit& operator=(const NofileLimit&) = delete;
    bool ok() const { return m_ok; }

private:
    rlimit m_old{};
    bool m_ok = false;
};

// The RLIMIT_NOFILE soft limit under which exactly `free` more fds can be opened.
inline rlim_t limit_leaving(size_t free)
{
    std::set<int> fds = open_fds();
    int fd = 0;
    for (size_t found = 0; fd < (1 << 20); ++fd)
        if (!fds.count(fd) && ++found == free + 1)  // +1: the listing's own fd is closed by now
            break;
    return static_cast<rlim_t>(fd + 1);
}

inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s)
{
    const auto deadline = Clock::now() + limit;
    while (!done()) {
        if (Clock::now() > deadline)
            return false;
        std::this_thread::sleep_for(1ms);
    }
    return true;
}

// ---- Streams that show any lost, doubled or reordered byte -----------------------------------

// Byte i of a stream is table[i % kPeriod]. The period is prime, so no chunk, page or pipe size
// lines up with it: a byte out of place compares wrong.
class Pattern {
public:
    static const Pattern& get()
    {
        static const Pattern pattern;
        return pattern;
    }
    void fill(uint64_t offset, char* out, size_t len) const
    {
        while (len > 0) {
            size_t pos = offset % kPeriod;
            size_t n = std::min(len, kPeriod - pos);
            std::memcpy(out, m_table.data() + pos, n);
            out += n;
            offset += n;
            len -= n;
        }
    }
    bool matches(uint64_t offset, const char* data, size_t len) const
    {
        while (len > 0) {
            size_t pos = offset % kPeriod;
            size_t n = std::min(len, kPeriod - pos);
            if (std::memcmp(data, m_table.data() + pos, n) != 0)
                return false;
            data += n;
            offset += n;
            len -= n;
        }
        return true;
    }

private:
    static constexpr size_t kPeriod = 1'000'003;
    Pattern() : m_table(kPeriod)
    {
        std::mt19937_64 random(20240601);
        for (char& c : m_table)
            c = static_cast<char>(random());
    }
    std::vector<char> m_table;
};

inline constexpr size_t kChunk = 256 * 1024;

// Sends `total` bytes of the pattern starting at `start`; `progress` follows the bytes sent.
inline uint64_t send_pattern(int fd, uint64_t start, uint64_t total, std::atomic<uint64_t>* progress = nullptr)
{
    std::vector<char> buf(kChunk);
    uint64_t sent = 0;
    while (sent < total) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, total - sent));
        Pattern::get().fill(start + sent, buf.data(), n);
        if (!send_all(fd, buf.data(), n))
            break;
        sent += n;
        if (progress)
            progress->store(sent);
    }
    return sent;
}

struct Received {
    uint64_t bytes = 0;
    bool intact = true;  // every byte matched the pattern
    bool eof = false;  // ended with a clean EOF
};

// Reads until EOF, comparing with the pattern from `start`. Until `slow_until` it reads 16 KiB
// every 2 ms: a slow reader.
inline Received receive_pattern(int fd, uint64_t start, Clock::time_point slow_until = {})
{
    std::vector<char> buf(kChunk);
    Received r;
    for (;;) {
        const bool slow = Clock::now() < slow_until;
        ssize_t n = ::recv(fd, buf.data(), slow ? 16 * 1024 : buf.size(), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r.eof = n == 0;
            return r;
        }
        if (r.intact && !Pattern::get().matches(start + r.bytes, buf.data(), static_cast<size_t>(n)))
            r.intact = false;
        r.bytes += static_cast<uint64_t>(n);
        if (slow)
            std::this_thread::sleep_for(2ms);
    }
}

// ---- Test servers and the relay's thread ---------------------------------------------------

// A Unix socket server that echoes every connection until EOF, on its own thread.
class EchoServer {
public:
    explicit EchoServer(const std::string& path, int backlog = 4096)
        : m_listener(listen_on(unix_address(path), backlog, SOCK_NONBLOCK)),
          m_thread([this](std::stop_token stop) { run(stop); })
    {
    }
    ~EchoServer() { stop(); }
    void stop()
    {
        m_thread.request_stop();
        if (m_thread.joinable())
            m_thread.join();
    }
    size_t open_connections() const { return m_open.load(); }

private:
    void run(const std::stop_token& stop)
    {
        std::vector<UniqueFd> connections;
        std::vector<pollfd> fds;
        std::vector<char> buf(64 * 1024);
        while (!stop.stop_requested()) {
            fds.assign(1, pollfd{m_listener.get(), POLLIN, 0});
            for (const UniqueFd& c : connections)
                fds.push_back({c.get(), POLLIN, 0});
            if (::poll(fds.data(), fds.size(), 10) <= 0)
                continue;
            for (size_t i = 1; i < fds.size(); ++i) {
                if (!fds[i].revents)
                    continue;
                UniqueFd& c = connections[i - 1];
                ssize_t n = ::recv(c.get(), buf.data(), buf.size(), 0);
                if (n > 0 && send_all(c.get(), buf.data(), static_cast<size_t>(n)))
                    continue;
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                c.reset();  // EOF, reset, or a peer that stopped reading
            }
            std::erase_if(connections, [](const UniqueFd& c) { return !c; });
            if (fds[0].revents & POLLIN) {
                for (int i = 0; i < 256; ++i) {
                    int fd = ::accept4(m_listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                    if (fd < 0) {
                        if (errno == EMFILE || errno == ENFILE)
                            std::this_thread::sleep_for(10ms);
                        break;
                    }
                    connections.emplace_back(fd);
                }
            }
            m_open.store(connections.size());
        }
    }

    UniqueFd m_listener;
    std::atomic<size_t> m_open{0};
    std::jthread m_thread;  // last: starts once the members it uses exist
};

// What a relay holds, as its thread saw it at the end of a turn (RelayRunner::counts).
struct RelayCounts {
    size_t connections = 0, waiting = 0, pending = 0;
};

// Calls run_once in a loop on its own thread, as the monitor's loop would.
class RelayRunner {
public:
    // `after`, if given, runs on the relay's thread after each turn (Relay is not thread-safe).
    explicit RelayRunner(relay::Relay& relay, std::function<void()> after = {})
        : m_thread([this, &relay, after = std::move(after)](std::stop_token stop) {
              while (!stop.stop_requested()) {
                  relay.run_once(10);
                  if (after)
                      after();
                  {
                      std::lock_guard lock(m_mutex);
                      m_counts = {relay.connection_count(), relay.waiting_count(), relay.pending_count()};
                  }
                  timespec cpu{};
                  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
                  m_cpu_ns.store(cpu.tv_sec * 1000000000LL + cpu.tv_nsec);
                  m_iterations.fetch_add(1);
              }
          })
    {
    }
    ~RelayRunner() { stop(); }
    RelayRunner(const RelayRunner&) = delete;
    RelayRunner& operator=(const RelayRunner&) = delete;
    void stop()
    {
        m_thread.request_stop();
        if (m_thread.joinable())
            m_thread.join();
    }
    uint64_t iterations() const { return m_iterations.load(); }
    std::chrono::nanoseconds cpu() const { return std::chrono::nanoseconds(m_cpu_ns.load()); }
    // The relay's queues as they were at the end of its last turn. Only its own thread may read
    // them (Relay::waiting_count and pending_count are plain containers' sizes): read from the
    // test's thread they can be caught mid-turn, a client given up on but still queued, or one
    // taken off the queue and not yet counted as asked for again.
    RelayCounts counts() const
    {
        std::lock_guard lock(m_mutex);
        return m_counts;
    }
    // The counts at the end of a turn begun after this call: what everything before it led to
    // (the turn under way may have started before).
    RelayCounts counts_after_a_turn() const
    {
        const uint64_t from = iterations();
        wait_until([&] { return iterations() >= from + 2; });
        return counts();
    }

private:
    mutable std::mutex m_mutex;
    RelayCounts m_counts;
    std::atomic<uint64_t> m_iterations{0};
    std::atomic<long long> m_cpu_ns{0};
    std::jthread m_thread;
};

// Messages of a relay, with the time each came.
class LogLines {
public:
    std::function<void(const std::string&)> sink()
    {
        return [this](const std::string& line) {
            std::lock_guard lock(m_mutex);
            m_lines.push_back({Clock::now(), line});
        };
    }
    std::vector<std::pair<Clock::time_point, std::string>> lines() const
    {
        std::lock_guard lock(m_mutex);
        return m_lines;
    }
    bool contains(const std::string& text) const
    {
        std::lock_guard lock(m_mutex);
        return std::any_of(m_lines.begin(), m_lines.end(),
                           [&](const auto& l) { return l.second.find(text) != std::string::npos; });
    }

private:
    mutable std::mutex m_mutex;
    std::vector<std::pair<Clock::time_point, std::string>> m_lines;
};

}  // namespace cocoon::relay_test
