// Host-side doubles for the relay e2e tests (CONNECT proxy, HTTP server, cocoon
// in the background), run by the test process; the byte and socket helpers also serve the client.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/support/socket.h"

namespace cocoon::test::relay_e2e {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1024 * 1024;
// Where tests bind a host directory they share with the in-sandbox client.
constexpr const char* kShared = "/shared";

inline long long ms_since(Clock::time_point start)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// ---- Bytes ------------------------------------------------------------------------------------

// xorshift64: the deterministic pseudo-random bytes of the large transfers.
class Pattern {
public:
    explicit Pattern(uint64_t seed) : m_state(seed ? seed : 1) {}

    // Fills `size` bytes (rounded up to whole 8-byte words: buf must have room for them).
    void fill(char* buf, size_t size)
    {
        for (size_t i = 0; i < size; i += 8) {
            m_state ^= m_state << 13;
            m_state ^= m_state >> 7;
            m_state ^= m_state << 17;
            std::memcpy(buf + i, &m_state, 8);
        }
    }

private:
    uint64_t m_state;
};

// FNV-1a over little-endian 64-bit words of a byte stream, however it is cut into chunks, then over
// the length: order, loss and duplication all change it.
class StreamHash {
public:
    void update(const char* data, size_t size)
    {
        m_bytes += size;
        while (size > 0) {
            if (m_carry_len == 0 && size >= 8) {
                const size_t words = size / 8;
                for (size_t i = 0; i < words; ++i) {
                    uint64_t word;
                    std::memcpy(&word, data + i * 8, 8);
                    m_hash = mix(m_hash, word);
                }
                data += words * 8;
                size -= words * 8;
                continue;
            }
            m_carry |= uint64_t{static_cast<uint8_t>(*data)} << (8 * m_carry_len);
            ++data;
            --size;
            if (++m_carry_len == 8) {
                m_hash = mix(m_hash, m_carry);
                m_carry = 0;
                m_carry_len = 0;
            }
        }
    }
    void update(const std::string& data) { update(data.data(), data.size()); }

    uint64_t bytes() const { return m_bytes; }
    uint64_t value() const { return mix(m_carry_len ? mix(m_hash, m_carry) : m_hash, m_bytes); }
    // "bytes=N hash=HEX", the form both ends print.
    std::string text() const
    {
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value()));
        return "bytes=" + std::to_string(m_bytes) + " hash=" + hex;
    }

private:
    static uint64_t mix(uint64_t h, uint64_t word) { return (h ^ word) * 0x100000001b3ULL; }

    uint64_t m_hash = 0xcbf29ce484222325ULL;
    uint64_t m_carry = 0;
    int m_carry_len = 0;
    uint64_t m_bytes = 0;
};

// ---- Sockets ----------------------------------------------------------------------------------

// A blocking TCP connection to host (an IPv4 or IPv6 literal):port whose calls time out after 20 s;
// invalid, with errno set, on failure.
inline UniqueFd connect_tcp(const std::string& host, uint16_t port)
{
    const std::optional<Address> addr = ip_address(host, port);
    if (!addr) {
        errno = EINVAL;
        return UniqueFd();
    }
    return try_connect(*addr, std::chrono::seconds(20));
}

// ---- Servers ----------------------------------------------------------------------------------

// A listener served by a thread that hands each connection to a thread of its own. Connections
// are blocking sockets with 30 s timeouts; stop() shuts every one down and joins every thread.
class ThreadServer {
public:
    using Handler = std::function<void(int fd)>;

    explicit ThreadServer(Handler handler) : m_handler(std::move(handler)) {}
    ~ThreadServer() { stop(); }
    ThreadServer(const ThreadServer&) = delete;
    ThreadServer& operator=(const ThreadServer&) = delete;

    // Listens on a Unix stream socket at `path`, replacing a stale socket file.
    void listen_unix(const std::string& path)
    {
        ::unlink(path.c_str());
        start(listen_on(unix_address(path), 4096, SOCK_NONBLOCK));
    }

    // Listens on 127.0.0.1 on a free port, which it returns.
    uint16_t listen_tcp()
    {
        UniqueFd fd = listen_on(loopback(), 4096, SOCK_NONBLOCK);
        const uint16_t port = port_of(address_of(fd.get()));
        start(std::move(fd));
        return port;
    }

    // Closes the listener; open connections go on. A Unix socket's file stays, so connecting to
    // it is refused from now on.
    void close_listener()
    {
        if (m_acceptor.joinable()) {
            uint64_t one = 1;
            if (::write(m_wake.get(), &one, sizeof one) < 0)
                std::perror("eventfd write");
            m_acceptor.join();
        }
        m_listener.reset();
        m_wake.reset();
    }

    // Closes the listener and every connection, and joins every thread.
    void stop()
    {
        close_listener();
        std::vector<std::thread> threads;
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
            for (int fd : m_live)
                ::shutdown(fd, SHUT_RDWR);
            threads.swap(m_threads);
        }
        for (std::thread& thread : threads)
            thread.join();
    }

    bool stopping() const { return m_stopping; }

private:
    void start(UniqueFd listener)
    {
        close_listener();
        m_listener = std::move(listener);
        m_wake.reset(::eventfd(0, EFD_CLOEXEC));
        m_acceptor = std::thread([this, fd = m_listener.get(), wake = m_wake.get()] { accept_loop(fd, wake); });
    }

    // Runs until close_listener() wakes it.
    void accept_loop(int listener, int wake)
    {
        for (;;) {
            pollfd fds[2] = {{listener, POLLIN, 0}, {wake, POLLIN, 0}};
            if (::poll(fds, 2, -1) < 0 && errno != EINTR)
                return;
            if (fds[1].revents)
                return;
            if (!(fds[0].revents & POLLIN))
                continue;
            int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE)
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            set_timeouts(fd, std::chrono::seconds(30));
            std::lock_guard lock(m_mutex);
            if (m_stopping) {
                ::close(fd);
                continue;
            }
            try {
                m_threads.emplace_back([this, fd] { serve(fd); });
                m_live.insert(fd);
            } catch (const std::exception&) {
                ::close(fd);  // out of threads: the client sees its connection closed
            }
        }
    }

    void serve(int fd)
    {
        try {
            m_handler(fd);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "test server: %s\n", e.what());
        }
        // Under the lock, so that stop() never shuts down a reused fd number.
        std::lock_guard lock(m_mutex);
        m_live.erase(fd);
        ::close(fd);
    }

    Handler m_handler;
    UniqueFd m_listener;
    UniqueFd m_wake;
    std::thread m_acceptor;
    std::mutex m_mutex;
    std::set<int> m_live;
    std::vector<std::thread> m_threads;
    std::atomic<bool> m_stopping{false};
};

// Copies bytes both ways until both sides sent EOF, one fails, `stop` holds, or 60 s passed.
// Half-closes are passed on with shutdown(SHUT_WR).
inline void pump(int a, int b, const std::function<bool()>& stop)
{
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    bool eof[2] = {false, false};
    const int fd[2] = {a, b};
    char buf[65536];
    while (!(eof[0] && eof[1]) && !stop() && Clock::now() < deadline) {
        pollfd fds[2] = {{eof[0] ? -1 : a, POLLIN, 0}, {eof[1] ? -1 : b, POLLIN, 0}};
        if (::poll(fds, 2, 100) < 0 && errno != EINTR)
            return;
        for (int i = 0; i < 2; ++i) {
            if (!fds[i].revents)
                continue;
            ssize_t n = ::recv(fd[i], buf, sizeof buf, MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n < 0)
                return;
            if (n == 0) {
                eof[i] = true;
                ::shutdown(fd[1 - i], SHUT_WR);
            } else if (!send_all(fd[1 - i], buf, static_cast<size_t>(n))) {
                return;
            }
        }
    }
}

// The end of a request head, or npos.
inline size_t head_end(const std::string& data)
{
    size_t at = data.find("\r\n\r\n");
    return at == std::string::npos ? at : at + 4;
}

// Reads a request or response head (up to the blank line); `rest` gets what came after it.
inline std::optional<std::string> read_head(int fd, std::string& rest)
{
    std::string data;
    char buf[4096];
    while (head_end(data) == std::string::npos) {
        if (data.size() > 65536)
            return std::nullopt;
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::nullopt;
        data.append(buf, static_cast<size_t>(n));
    }
    const size_t end = head_end(data);
    rest = data.substr(end);
    return data.substr(0, end);
}

// A tiny HTTP/1.1 server on 127.0.0.1: every request gets `body`, then the connection closes.
// Records each request as "METHOD TARGET host=HOST".
class HttpServer {
public:
    explicit HttpServer(std::string body) : m_body(std::move(body)), m_server([this](int fd) { serve(fd); })
    {
        m_port = m_server.listen_tcp();
    }

    uint16_t port() const { return m_port; }
    std::vector<std::string> requests()
    {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }

private:
    void serve(int fd)
    {
        std::string rest;
        const std::optional<std::string> head = read_head(fd, rest);
        if (!head)
            return;
        std::istringstream in(*head);
        std::string method, target, host;
        in >> method >> target;
        for (const std::string& line : lines(*head))
            if (line.rfind("Host: ", 0) == 0)
                host = line.substr(6, line.find('\r') - 6);
        {
            std::lock_guard lock(m_mutex);
            m_requests.push_back(method + " " + target + " host=" + host);
        }
        send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(m_body.size()) +
                         "\r\nConnection: close\r\n\r\n" + m_body);
        ::shutdown(fd, SHUT_WR);
        std::string ignored;
        read_to_eof(fd, ignored);
    }

    std::string m_body;
    std::mutex m_mutex;
    std::vector<std::string> m_requests;
    uint16_t m_port = 0;
    ThreadServer m_server;
};

// An HTTP proxy on a Unix socket. `CONNECT host:port` connects to 127.0.0.1:port whatever the
// host, answers 200 and tunnels; an absolute-form request (`GET http://host:port/path`) is sent
// to 127.0.0.1:port in origin form. Records each request line's "METHOD TARGET".
class HttpProxy {
public:
    explicit HttpProxy(const std::string& path) : m_server([this](int fd) { serve(fd); })
    {
        m_server.listen_unix(path);
    }

    std::vector<std::string> requests()
    {
        std::lock_guard lock(m_mutex);
        return m_requests;
    }

private:
    void serve(int fd)
    {
        std::string rest;
        const std::optional<std::string> head = read_head(fd, rest);
        if (!head)
            return;
        std::istringstream in(*head);
        std::string method, target, version;
        in >> method >> target >> version;
        {
            std::lock_guard lock(m_mutex);
            m_requests.push_back(method + " " + target);
        }
        std::string authority, path;
        if (method == "CONNECT") {
            authority = target;
        } else if (target.rfind("http://", 0) == 0) {
            const size_t slash = target.find('/', 7);
            authority = target.substr(7, slash == std::string::npos ? std::string::npos : slash - 7);
            path = slash == std::string::npos ? "/" : target.substr(slash);
        } else {
            send_all(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            return;
        }
        const size_t colon = authority.rfind(':');
        const int port = colon == std::string::npos ? 80 : std::atoi(authority.c_str() + colon + 1);
        UniqueFd up = connect_tcp("127.0.0.1", static_cast<uint16_t>(port));
        if (!up) {
            send_all(fd, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
            return;
        }
        if (method == "CONNECT") {
            send_all(fd, "HTTP/1.1 200 Connection established\r\n\r\n");
        } else {
            std::string request = method + " " + path + " " + version + "\r\n";
            const std::vector<std::string> head_lines = lines(*head);
            for (size_t i = 1; i < head_lines.size(); ++i)
                if (head_lines[i].rfind("Proxy-", 0) != 0)
                    request += head_lines[i] + "\n";
            if (!send_all(up.get(), request))
                return;
        }
        if (!rest.empty() && !send_all(up.get(), rest))
            return;
        pump(fd, up.get(), [this] { return m_server.stopping(); });
    }

    std::mutex m_mutex;
    std::vector<std::string> m_requests;
    ThreadServer m_server;
};

// ---- cocoon in the background -------------------------------------------------------------------

// cocoon run as the test's child with stdout and stderr in files, optionally with a given soft
// RLIMIT_NOFILE. Whatever still runs when this goes away is SIGKILLed and reaped.
class Background {
public:
    // fd3: an fd of the test's that cocoon gets as its fd 3 (an --egress-log), or -1. hard: nofile
    // is the hard limit too (the monitor raises its soft limit to the hard one for --relay).
    Background(const std::vector<std::string>& args, const std::string& dir, std::optional<rlim_t> nofile = {},
               int fd3 = -1, bool hard = false)
        : m_out(dir + "/cocoon.out"), m_err(dir + "/cocoon.err")
    {
        std::vector<std::string> argv{cocoon_bin()};
        argv.insert(argv.end(), args.begin(), args.end());
        std::vector<char*> raw;
        for (std::string& arg : argv)
            raw.push_back(arg.data());
        raw.push_back(nullptr);
        rlimit lim{};
        ::getrlimit(RLIMIT_NOFILE, &lim);
        if (nofile)
            lim.rlim_cur = std::min(*nofile, lim.rlim_max);
        if (nofile && hard)
            lim.rlim_max = lim.rlim_cur;
        // Opened before fork: the child of a threaded process makes only async-signal-safe calls.
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        UniqueFd out(::open(m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        UniqueFd err(::open(m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (!in || !out || !err)
            throw std::runtime_error("Background: open failed");
        m_pid = ::fork();
        if (m_pid == 0) {
            ::setrlimit(RLIMIT_NOFILE, &lim);
            if (::dup2(in.get(), 0) < 0 || ::dup2(out.get(), 1) < 0 || ::dup2(err.get(), 2) < 0)
                ::_exit(127);
            if (fd3 >= 0 && (fd3 == 3 ? ::fcntl(3, F_SETFD, 0) : ::dup2(fd3, 3)) < 0)
                ::_exit(127);
            ::execv(raw[0], raw.data());
            ::_exit(127);
        }
        if (m_pid < 0)
            throw std::runtime_error("Background: fork failed");
    }

    ~Background()
    {
        if (!m_code) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
    }

    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

    // cocoon's exit code (128+N for signal N), or nothing if it still runs after timeout_ms.
    std::optional<int> wait(int timeout_ms)
    {
        const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
        while (!m_code) {
            int status;
            if (::waitpid(m_pid, &status, WNOHANG) == m_pid)
                m_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            else if (Clock::now() >= deadline)
                break;
            else
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        return m_code;
    }

    bool running() { return !wait(0); }
    pid_t pid() const { return m_pid; }
    std::string out() const { return read_file(m_out); }
    std::string err() const { return read_file(m_err); }

private:
    std::string m_out, m_err;
    pid_t m_pid = -1;
    std::optional<int> m_code;
};

}  // namespace cocoon::test::relay_e2e
