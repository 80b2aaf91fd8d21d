// Egress benchmark driver. Two roles in one binary:
//
//   egress_bench host SECONDS     (outside) serves on 127.0.0.1: a sink that streams zeros and an
//                                 echo server; prints "ports SINK ECHO" and serves for SECONDS.
//   egress_bench client PROXY_PORT SINK ECHO MIB PINGS SECONDS
//                                 (inside a sandbox) tunnels through the HTTP proxy at
//                                 127.0.0.1:PROXY_PORT with CONNECT, and measures: MIB MiB
//                                 downloaded from the sink, PINGS 64-byte round trips to the echo
//                                 server, and CONNECT+close cycles for SECONDS seconds. Prints
//                                 "mibps X", "rtt_us X", "conns_per_s X".
//   egress_bench exchange ECHO N  (outside) the monitor's share of an upstream, N times: a request of
//                                 relay/worker_protocol.h's size on a pipe, answered by another
//                                 process over SOCK_SEQPACKET with an fd: a TCP socket whose
//                                 non-blocking connect to 127.0.0.1:ECHO it started, then closed.
//                                 Prints "exchange_cpu_us X", "exchange_us X" (both processes' CPU
//                                 and the round trip, per exchange), and the same without the
//                                 socket and connect (an fd of /dev/null): "anchor_cpu_us X",
//                                 "anchor_us X".
//
// tools/bench/egress runs it against cocoon --egress and against cocoon --relay to tinyproxy
// (behind a Unix socket), in one run.
// Runs in: dev.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int listen_tcp(uint16_t& port)
{
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(fd, 4096) < 0) {
        std::perror("listen");
        std::exit(1);
    }
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

void serve(int listener, bool sink)
{
    for (;;) {
        int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        std::thread([fd, sink] {
            int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            std::vector<char> buf(256 * 1024, 0);
            if (sink) {
                // "N\n": N bytes of zeros follow.
                std::string line;
                char c;
                while (::read(fd, &c, 1) == 1 && c != '\n')
                    line += c;
                long long left = std::atoll(line.c_str());
                while (left > 0) {
                    ssize_t n = ::write(fd, buf.data(), static_cast<size_t>(std::min<long long>(left, 256 * 1024)));
                    if (n <= 0)
                        break;
                    left -= n;
                }
            } else {
                for (ssize_t n; (n = ::read(fd, buf.data(), buf.size())) > 0;)
                    if (::write(fd, buf.data(), static_cast<size_t>(n)) != n)
                        break;
            }
            ::close(fd);
        }).detach();
    }
}

int host(int seconds)
{
    uint16_t sink_port = 0, echo_port = 0;
    int sink = listen_tcp(sink_port), echo = listen_tcp(echo_port);
    std::printf("ports %u %u\n", sink_port, echo_port);
    std::fflush(stdout);
    std::thread(serve, sink, true).detach();
    std::thread(serve, echo, false).detach();
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    return 0;
}

// Transparent egress (proxy port 0): the address the sandbox's resolver gave for "localhost",
// asked once, as a client that caches its lookups would.
in_addr g_transparent{};

// A TCP connection to address:port with TCP_NODELAY; -1 when refused.
int dial(in_addr address, uint16_t port)
{
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr = address;
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
        ::close(fd);
        return -1;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

// A tunnel to 127.0.0.1:target through the proxy (proxy 0: transparent); -1 when refused.
int tunnel(uint16_t proxy, uint16_t target)
{
    if (proxy == 0)
        return dial(g_transparent, target);
    const int fd = dial(in_addr{htonl(INADDR_LOOPBACK)}, proxy);
    if (fd < 0)
        return -1;
    const std::string req = "CONNECT 127.0.0.1:" + std::to_string(target) +
                            " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(target) + "\r\n\r\n";
    if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
        ::close(fd);
        return -1;
    }
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1)
        head += c;
    if (head.compare(0, 12, "HTTP/1.1 200") != 0 && head.compare(0, 12, "HTTP/1.0 200") != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

int client(uint16_t proxy, uint16_t sink, uint16_t echo, long long mib, int pings, double seconds)
{
    if (proxy == 0) {
        addrinfo hints{};
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        if (::getaddrinfo("localhost", nullptr, &hints, &found) != 0 || !found)
            return std::printf("error resolving localhost\n"), 1;
        g_transparent = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
        ::freeaddrinfo(found);
    }
    // Throughput.
    {
        int fd = tunnel(proxy, sink);
        if (fd < 0)
            return std::printf("error tunnel to the sink\n"), 1;
        const long long bytes = mib * 1024 * 1024;
        const std::string req = std::to_string(bytes) + "\n";
        if (::write(fd, req.data(), req.size()) < 0)
            return 1;
        std::vector<char> buf(1 << 20);
        long long got = 0;
        const auto start = Clock::now();
        for (ssize_t n; got < bytes && (n = ::read(fd, buf.data(), buf.size())) > 0;)
            got += n;
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        ::close(fd);
        std::printf("mibps %.0f\n", static_cast<double>(got) / (1024 * 1024) / s);
    }
    // Round trips.
    {
        int fd = tunnel(proxy, echo);
        if (fd < 0)
            return std::printf("error tunnel to the echo server\n"), 1;
        char msg[64] = {};
        std::vector<double> us;
        for (int i = 0; i < pings; ++i) {
            const auto start = Clock::now();
            if (::write(fd, msg, sizeof msg) != sizeof msg)
                return 1;
            size_t got = 0;
            while (got < sizeof msg) {
                ssize_t n = ::read(fd, msg + got, sizeof msg - got);
                if (n <= 0)
                    return 1;
                got += static_cast<size_t>(n);
            }
            us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
        }
        std::sort(us.begin(), us.end());
        std::printf("rtt_us %.1f\n", us[us.size() / 2]);
        ::close(fd);
    }
    // Connections per second: CONNECT, one echo, close.
    {
        long count = 0;
        const auto end = Clock::now() + std::chrono::duration<double>(seconds);
        const auto start = Clock::now();
        while (Clock::now() < end) {
            int fd = tunnel(proxy, echo);
            if (fd < 0)
                return std::printf("error tunnel %ld\n", count), 1;
            char b = 'x';
            if (::write(fd, &b, 1) != 1 || ::read(fd, &b, 1) != 1)
                return 1;
            ::close(fd);
            ++count;
        }
        std::printf("conns_per_s %.0f\n", count / std::chrono::duration<double>(Clock::now() - start).count());
    }
    return 0;
}

// relay/worker_protocol.h's Request and Answer, by size: the bench builds without cocoon's headers.
constexpr size_t kRequestSize = 284;
constexpr size_t kAnswerSize = 12;

bool send_with_fd(int sock, const void* msg, size_t size, int fd)
{
    iovec iov{const_cast<void*>(msg), size};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    hdr.msg_control = control;
    hdr.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&hdr);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    return ::sendmsg(sock, &hdr, MSG_NOSIGNAL) == static_cast<ssize_t>(size);
}

int receive_fd(int sock, void* msg, size_t size)
{
    iovec iov{msg, size};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    hdr.msg_control = control;
    hdr.msg_controllen = sizeof control;
    if (::recvmsg(sock, &hdr, MSG_CMSG_CLOEXEC) != static_cast<ssize_t>(size))
        return -1;
    cmsghdr* c = CMSG_FIRSTHDR(&hdr);
    int fd = -1;
    if (c && c->cmsg_type == SCM_RIGHTS)
        std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

double cpu_ms(int who)
{
    rusage used{};
    ::getrusage(who, &used);
    auto ms = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
    };
    return ms(used.ru_utime) + ms(used.ru_stime);
}

// The worker's side asks, a child answers as the monitor does (upstream: socket + non-blocking
// connect to 127.0.0.1:echo, else an fd of /dev/null); per exchange: both processes' CPU, wall.
std::pair<double, double> exchanges(uint16_t echo, int count, bool upstream)
{
    int pipe_fds[2], pair[2];
    if (::pipe2(pipe_fds, O_CLOEXEC) < 0 || ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
        return {0, 0};
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pipe_fds[1]);
        ::close(pair[0]);
        const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        char request[kRequestSize];
        const char answer[kAnswerSize] = {};
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(echo);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        for (;;) {
            pollfd p{pipe_fds[0], POLLIN, 0};
            if (::poll(&p, 1, -1) != 1 || ::read(pipe_fds[0], request, sizeof request) != sizeof request)
                ::_exit(0);
            int fd = null;
            if (upstream) {
                fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to);  // EINPROGRESS
            }
            send_with_fd(pair[1], answer, sizeof answer, fd);
            if (upstream)
                ::close(fd);
        }
    }
    ::close(pipe_fds[0]);
    ::close(pair[1]);
    const double before = cpu_ms(RUSAGE_SELF);
    const auto start = Clock::now();
    char request[kRequestSize] = {};
    int done = 0;
    for (; done < count; ++done) {
        char answer[kAnswerSize];
        pollfd p{pair[0], POLLIN, 0};
        if (::write(pipe_fds[1], request, sizeof request) != sizeof request || ::poll(&p, 1, -1) != 1)
            break;
        const int fd = receive_fd(pair[0], answer, sizeof answer);
        if (fd < 0)
            break;
        ::close(fd);
    }
    const double wall = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    const double own = cpu_ms(RUSAGE_SELF) - before;
    ::close(pipe_fds[1]);
    ::close(pair[0]);
    ::waitpid(child, nullptr, 0);
    const double child_cpu = cpu_ms(RUSAGE_CHILDREN);  // this child's only: the first reaped
    if (done == 0)
        return {0, 0};
    return {(own + child_cpu) * 1000 / done, wall / done};
}

int exchange(uint16_t echo, int count)
{
    // The anchor first: RUSAGE_CHILDREN adds up every child reaped, so the second is less the first.
    const auto anchor = exchanges(echo, count, false);
    const double anchor_child_ms = cpu_ms(RUSAGE_CHILDREN);
    auto upstream = exchanges(echo, count, true);
    upstream.first -= anchor_child_ms * 1000 / count;
    std::printf("exchange_cpu_us %.1f\nexchange_us %.1f\nanchor_cpu_us %.1f\nanchor_us %.1f\n", upstream.first,
                upstream.second, anchor.first, anchor.second);
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    const std::string role = argc > 1 ? argv[1] : "";
    if (role == "host" && argc == 3)
        return host(std::atoi(argv[2]));
    if (role == "exchange" && argc == 4)
        return exchange(static_cast<uint16_t>(std::atoi(argv[2])), std::atoi(argv[3]));
    if (role == "client" && argc == 8)
        return client(static_cast<uint16_t>(std::atoi(argv[2])), static_cast<uint16_t>(std::atoi(argv[3])),
                      static_cast<uint16_t>(std::atoi(argv[4])), std::atoll(argv[5]), std::atoi(argv[6]),
                      std::atof(argv[7]));
    std::fprintf(stderr, "usage: %s host SECONDS | client PROXY_PORT SINK ECHO MIB PINGS SECONDS | exchange ECHO N\n",
                 argv[0]);
    return 2;
}
