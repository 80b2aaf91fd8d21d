// The resolver thread. It owns the c-ares channel alone: the worker's main thread only queues names
// and takes results, under m_mutex, and learns of results from an eventfd.
#include "relay/resolver.h"

#include <ares.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <type_traits>

#include "base/sys_error.h"

namespace cocoon::relay {
namespace {

void signal_fd(int fd)
{
    uint64_t one = 1;
    if (::write(fd, &one, sizeof one) < 0) {
        // The counter cannot overflow at one per result; EAGAIN would mean it is set already.
    }
}

void drain_fd(int fd)
{
    uint64_t count;
    if (::read(fd, &count, sizeof count) < 0) {
        // EAGAIN: nothing was signalled.
    }
}

struct Pending {
    Resolution result;
    uint16_t port = 0;
    Resolver* owner = nullptr;
};

struct ChannelDeleter {
    void operator()(ares_channel channel) const { ares_destroy(channel); }
};

}  // namespace

Resolver::Resolver()
    : m_ready(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), m_wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC))
{
    if (!m_ready || !m_wake)
        throw SysError(errno, "eventfd (egress resolver)");
    if (int rc = ares_library_init(ARES_LIB_INIT_ALL); rc != ARES_SUCCESS)
        throw UsageError(std::string("--egress: c-ares: ") + ares_strerror(rc));
    m_thread = std::thread([this] { run(); });
}

Resolver::~Resolver()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    signal_fd(m_wake.get());
    m_thread.join();
    ares_library_cleanup();
}

void Resolver::resolve(uint64_t id, const std::string& host, uint16_t port)
{
    {
        std::lock_guard lock(m_mutex);
        m_queries.push_back({id, host, port});
    }
    signal_fd(m_wake.get());
}

std::vector<Resolution> Resolver::take()
{
    drain_fd(m_ready.get());
    std::lock_guard lock(m_mutex);
    return std::exchange(m_results, {});
}

namespace {

using Channel = std::unique_ptr<std::remove_pointer_t<ares_channel>, ChannelDeleter>;

// The c-ares channel, or none with init_error saying why (each query is then answered with it).
Channel make_channel(std::string& init_error)
{
    ares_channel raw = nullptr;
    ares_options options{};
    options.timeout = 2000;  // ms per try
    options.tries = 2;
    const int init = ares_init_options(&raw, &options, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
    init_error = init == ARES_SUCCESS ? "" : std::string("c-ares: ") + ares_strerror(init);
    return Channel(init == ARES_SUCCESS ? raw : nullptr);
}

// The IPv4 and IPv6 addresses of an answer, in its order, each with `port` set.
std::vector<sockaddr_storage> addresses_of(const ares_addrinfo* info, uint16_t port)
{
    std::vector<sockaddr_storage> out;
    for (const ares_addrinfo_node* node = info->nodes; node; node = node->ai_next) {
        sockaddr_storage address{};
        if (node->ai_family == AF_INET && node->ai_addrlen >= sizeof(sockaddr_in)) {
            std::memcpy(&address, node->ai_addr, sizeof(sockaddr_in));
            reinterpret_cast<sockaddr_in*>(&address)->sin_port = htons(port);
        } else if (node->ai_family == AF_INET6 && node->ai_addrlen >= sizeof(sockaddr_in6)) {
            std::memcpy(&address, node->ai_addr, sizeof(sockaddr_in6));
            reinterpret_cast<sockaddr_in6*>(&address)->sin6_port = htons(port);
        } else {
            continue;
        }
        out.push_back(address);
    }
    return out;
}

// Waits for the wake-up fd and c-ares's sockets, no longer than c-ares's next timeout, then lets
// c-ares read, write or time out what is due.
void wait_and_process(ares_channel channel, int wake)
{
    pollfd fds[ARES_GETSOCK_MAXNUM + 1];
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    fds[0] = {wake, POLLIN, 0};
    nfds_t n = 1;
    int bits = channel ? ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM) : 0;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
        short events = 0;
        if (ARES_GETSOCK_READABLE(bits, i))
            events |= POLLIN;
        if (ARES_GETSOCK_WRITABLE(bits, i))
            events |= POLLOUT;
        if (events)
            fds[n++] = {socks[i], events, 0};
    }
    int timeout_ms = -1;
    if (n > 1) {
        timeval max{1, 0}, tv{};
        timeval* next = ares_timeout(channel, &max, &tv);
        timeout_ms = static_cast<int>(next->tv_sec * 1000 + next->tv_usec / 1000) + 1;
    }
    if (::poll(fds, n, timeout_ms) < 0 && errno != EINTR)
        return;
    if (fds[0].revents)
        drain_fd(wake);
    if (!channel)
        return;
    bool any = false;
    for (nfds_t i = 1; i < n; ++i) {
        if (!fds[i].revents)
            continue;
        any = true;
        const bool readable = fds[i].revents & (POLLIN | POLLERR | POLLHUP);
        const bool writable = fds[i].revents & POLLOUT;
        ares_process_fd(channel, readable ? fds[i].fd : ARES_SOCKET_BAD, writable ? fds[i].fd : ARES_SOCKET_BAD);
    }
    if (!any && n > 1)
        ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
}

}  // namespace

void Resolver::on_done(void* arg, int status, int, ares_addrinfo* info)
{
    std::unique_ptr<Pending> pending(static_cast<Pending*>(arg));
    if (status != ARES_SUCCESS) {
        pending->result.error = ares_strerror(status);
    } else {
        pending->result.addresses = addresses_of(info, pending->port);
        if (pending->result.addresses.empty())
            pending->result.error = "no address";
    }
    if (info)
        ares_freeaddrinfo(info);
    Resolver& owner = *pending->owner;
    {
        std::lock_guard lock(owner.m_mutex);
        owner.m_results.push_back(std::move(pending->result));
    }
    signal_fd(owner.m_ready.get());
}

void Resolver::run()
{
    std::string init_error;
    const Channel channel = make_channel(init_error);
    for (;;) {
        std::deque<Query> queries;
        {
            std::lock_guard lock(m_mutex);
            if (m_stop)
                return;
            queries.swap(m_queries);
        }
        for (Query& q : queries) {
            auto pending = std::make_unique<Pending>();
            pending->result.id = q.id;
            pending->port = q.port;
            pending->owner = this;
            if (!channel) {
                pending->result.error = init_error;
                on_done(pending.release(), ARES_ENOTINITIALIZED, 0, nullptr);
                continue;
            }
            ares_addrinfo_hints hints{};
            hints.ai_family = AF_UNSPEC;
            hints.ai_socktype = SOCK_STREAM;
            ares_getaddrinfo(channel.get(), q.host.c_str(), nullptr, &hints, on_done, pending.release());
        }
        wait_and_process(channel.get(), m_wake.get());
    }
}

}  // namespace cocoon::relay
