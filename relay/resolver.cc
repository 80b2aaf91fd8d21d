// The resolver thread. It owns the c-ares channel alone: the worker's main thread only queues names
// and takes results, under m_mutex, and learns of results from an eventfd.
// Runs in: worker.
#include "relay/resolver.h"

#include <ares.h>
#include <netinet/in.h>
#include <poll.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
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

void Resolver::add_name_server(UniqueFd socket)
{
    NameServer server;
    socklen_t length = sizeof server.peer;
    if (::getpeername(socket.get(), reinterpret_cast<sockaddr*>(&server.peer), &length) < 0)
        return;  // not a connected socket: c-ares will find no server there
    server.socket = std::move(socket);
    std::lock_guard lock(m_servers_mutex);
    m_servers.push_back(std::move(server));
}

// c-ares (1.18: ares__open_socket, then ares__connect_socket to the server's address, with no
// socket option set on a socket of these functions') asks for a socket of a family, then connects
// it: it gets a copy of a name server's socket of that family, and at the connect, the copy of
// the one connected to that address takes its fd number. Anything else fails as a socket the
// kernel refused would: a TCP socket (EACCES; ARES_FLAG_IGNTC asks for none), a server the
// monitor handed no socket for (ECONNREFUSED).
int Resolver::open_socket(int family, int type, int, void* self)
{
    auto& resolver = *static_cast<Resolver*>(self);
    if (type != SOCK_DGRAM) {
        errno = EACCES;
        return -1;
    }
    std::lock_guard lock(resolver.m_servers_mutex);
    for (const NameServer& server : resolver.m_servers)
        if (server.peer.ss_family == family)
            return ::fcntl(server.socket.get(), F_DUPFD_CLOEXEC, 0);
    errno = EAFNOSUPPORT;
    return -1;
}

int Resolver::connect_socket(int fd, const sockaddr* address, socklen_t length, void* self)
{
    auto& resolver = *static_cast<Resolver*>(self);
    std::lock_guard lock(resolver.m_servers_mutex);
    for (const NameServer& server : resolver.m_servers) {
        const bool same =
            address->sa_family == AF_INET && server.peer.ss_family == AF_INET && length >= sizeof(sockaddr_in)
                ? reinterpret_cast<const sockaddr_in*>(address)->sin_port ==
                          reinterpret_cast<const sockaddr_in&>(server.peer).sin_port &&
                      reinterpret_cast<const sockaddr_in*>(address)->sin_addr.s_addr ==
                          reinterpret_cast<const sockaddr_in&>(server.peer).sin_addr.s_addr
            : address->sa_family == AF_INET6 && server.peer.ss_family == AF_INET6 && length >= sizeof(sockaddr_in6)
                ? reinterpret_cast<const sockaddr_in6*>(address)->sin6_port ==
                          reinterpret_cast<const sockaddr_in6&>(server.peer).sin6_port &&
                      std::memcmp(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr,
                                  &reinterpret_cast<const sockaddr_in6&>(server.peer).sin6_addr, sizeof(in6_addr)) == 0
                : false;
        if (same)
            return ::dup3(server.socket.get(), fd, O_CLOEXEC) < 0 ? -1 : 0;
    }
    errno = ECONNREFUSED;
    return -1;
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
// Its sockets come from `functions` (the monitor's name-server sockets); UDP only.
Channel make_channel(std::string& init_error, const ares_socket_functions& functions, void* user)
{
    ares_channel raw = nullptr;
    ares_options options{};
    options.timeout = 2000;  // ms per try
    options.tries = 2;
    options.flags = ARES_FLAG_IGNTC;
    const int init = ares_init_options(&raw, &options, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS);
    init_error = init == ARES_SUCCESS ? "" : std::string("c-ares: ") + ares_strerror(init);
    if (init == ARES_SUCCESS)
        ares_set_socket_functions(raw, &functions, user);
    return Channel(init == ARES_SUCCESS ? raw : nullptr);
}

int close_socket(ares_socket_t fd, void*)
{
    return ::close(fd);
}

ares_ssize_t receive_from(ares_socket_t fd, void* buffer, size_t size, int flags, sockaddr* from,
                          ares_socklen_t* from_size, void*)
{
    return ::recvfrom(fd, buffer, size, flags, from, from_size);
}

ares_ssize_t send_vector(ares_socket_t fd, const iovec* parts, int count, void*)
{
    return ::writev(fd, parts, count);
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
    // Static: c-ares keeps the pointer for the channel's life.
    static const ares_socket_functions functions = {open_socket, close_socket, connect_socket, receive_from,
                                                    send_vector};
    const Channel channel = make_channel(init_error, functions, this);
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
