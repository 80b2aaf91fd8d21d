// Relay listeners on the sandbox's loopback. Runs in the sandbox's first
// process, inside its network namespace; the fds go to the monitor at once.
#include "net/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "base/sys_error.h"

namespace cocoon::net {
namespace {

constexpr int kBacklog = 4096;

UniqueFd listen_on(int family, const sockaddr* addr, socklen_t len, uint16_t port)
{
    const std::string what = std::string("--relay ") + std::to_string(port) + ": can't listen on " +
                             (family == AF_INET ? "127.0.0.1" : "[::1]");
    UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd)
        throw SysError(errno, what);
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6)
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    check(::bind(fd.get(), addr, len), what);
    check(::listen(fd.get(), kBacklog), what);
    return fd;
}

}  // namespace

std::vector<UniqueFd> listen_loopback(uint16_t port)
{
    std::vector<UniqueFd> fds;
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fds.push_back(listen_on(AF_INET, reinterpret_cast<sockaddr*>(&v4), sizeof v4, port));

    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    v6.sin6_addr = in6addr_loopback;
    UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe || errno != EAFNOSUPPORT)  // a kernel without IPv6 gets 127.0.0.1 only
        fds.push_back(listen_on(AF_INET6, reinterpret_cast<sockaddr*>(&v6), sizeof v6, port));
    return fds;
}

}  // namespace cocoon::net
