// The relay benchmark's servers: the stand-in proxy (an epoll server on a Unix socket and on
// 127.0.0.1) and the relay under test, each in a process of its own that the driver (relay.cc)
// forks with spawn() below, as the benchmark's caller; see relay_bench.h.
// Runs in: dev.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "relay/host_socket.h"
#include "relay/relay.h"
#include "ns/monitor/relay_worker.h"
#include "relay/worker.h"
#include "tools/bench/relay_bench.h"

using namespace cocoon::test;

namespace cocoon::bench {

// ---- Processes -----------------------------------------------------------------------------

void die(const std::string& message)
{
    std::fprintf(stderr, "relay_bench: %s\n", message.c_str());
    std::exit(1);
}

void die_errno(const std::string& call)
{
    die(call + ": " + std::strerror(errno));
}

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

namespace {

// ---- The stand-in proxy (relay_bench.h says what each first byte asks of it) ----------------

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

}  // namespace

void serve_proxy(const std::string& path, UniqueFd tcp)
{
    Proxy server(path, std::move(tcp));
    server.serve();
}

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
    // the confined worker (relay/worker.h, ns/monitor/relay_worker.h) that relays.
    cocoon::relay::WorkerOptions worker_options;
    worker_options.relay = options;
    worker_options.relay_names = {path};
    cocoon::ns::RelayWorker worker(std::move(worker_options), {target});
    worker.add_listener(std::move(listener), cocoon::relay::ListenerKind::Relay, 0);
    while (Clock::now() < deadline) {
        pollfd p{worker.fd(), POLLIN, 0};
        if (::poll(&p, 1, 1000) > 0 && !worker.serve())
            break;
    }
    worker.stop("");
}

}  // namespace cocoon::bench
