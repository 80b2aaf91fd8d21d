// Relay and egress listeners on the sandbox's loopback. Runs in the sandbox's
// first process, inside its network namespace; the fds go to the monitor at once.
// Runs in: setup.
#include "net/listener.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

#include "base/sys.h"
#include "base/sys_error.h"

namespace cocoon::net {
namespace {

constexpr int kBacklog = 4096;

UniqueFd listen_on(int family, const sockaddr* addr, socklen_t len, const std::string& what)
{
    UniqueFd fd = sys::check_fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), what);
    int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (family == AF_INET6)
        ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    check(::bind(fd.get(), addr, len), what);
    check(::listen(fd.get(), kBacklog), what);
    return fd;
}

sockaddr_in ipv4(in_addr_t address, uint16_t port)
{
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    v4.sin_addr.s_addr = htonl(address);
    return v4;
}

}  // namespace

std::vector<UniqueFd> listen_loopback(uint16_t port, const std::string& option)
{
    const std::string what = option + " " + std::to_string(port) + ": can't listen on ";
    std::vector<UniqueFd> fds;
    const sockaddr_in v4 = ipv4(INADDR_LOOPBACK, port);
    fds.push_back(listen_on(AF_INET, reinterpret_cast<const sockaddr*>(&v4), sizeof v4, what + "127.0.0.1"));

    sockaddr_in6 v6{};
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    v6.sin6_addr = in6addr_loopback;
    UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe || errno != EAFNOSUPPORT)  // a kernel without IPv6 gets 127.0.0.1 only
        fds.push_back(listen_on(AF_INET6, reinterpret_cast<sockaddr*>(&v6), sizeof v6, what + "[::1]"));
    return fds;
}

std::vector<UniqueFd> listen_transparent(const std::vector<uint16_t>& ports)
{
    std::vector<UniqueFd> fds;
    for (uint16_t port : ports) {
        const sockaddr_in any = ipv4(INADDR_ANY, port);
        fds.push_back(listen_on(AF_INET, reinterpret_cast<const sockaddr*>(&any), sizeof any,
                                "--egress: can't listen on port " + std::to_string(port) + " for transparent egress"));
    }
    return fds;
}

UniqueFd dns_socket()
{
    const std::string what = "--egress: can't make the resolver's socket on 127.0.0.1:53";
    UniqueFd fd = sys::check_fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), what);
    const sockaddr_in v4 = ipv4(INADDR_LOOPBACK, 53);
    check(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&v4), sizeof v4), what);
    return fd;
}

}  // namespace cocoon::net
