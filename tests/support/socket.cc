// Socket helpers of the relay's tests and benchmark; see socket.h.
#include "tests/support/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/time.h>
#include <sys/un.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/sys_error.h"

namespace cocoon::test {

Address loopback(int family, uint16_t port)
{
    Address addr;
    if (family == AF_INET6) {
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        in6->sin6_port = htons(port);
        addr.len = sizeof *in6;
    } else {
        auto* in4 = reinterpret_cast<sockaddr_in*>(&addr.storage);
        in4->sin_family = AF_INET;
        in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        in4->sin_port = htons(port);
        addr.len = sizeof *in4;
    }
    return addr;
}

std::optional<Address> ip_address(const std::string& host, uint16_t port)
{
    Address addr;
    auto* in4 = reinterpret_cast<sockaddr_in*>(&addr.storage);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
    if (::inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        addr.len = sizeof *in4;
    } else if (::inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        addr.len = sizeof *in6;
    } else {
        return std::nullopt;
    }
    return addr;
}

Address unix_address(const std::string& path)
{
    Address addr;
    auto* un = reinterpret_cast<sockaddr_un*>(&addr.storage);
    if (path.size() >= sizeof un->sun_path)
        throw SysError(ENAMETOOLONG, "unix socket " + path);
    un->sun_family = AF_UNIX;
    std::memcpy(un->sun_path, path.c_str(), path.size() + 1);
    addr.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
    return addr;
}

Address address_of(int fd)
{
    Address addr;
    addr.len = sizeof addr.storage;
    check(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr.storage), &addr.len), "getsockname");
    return addr;
}

uint16_t port_of(const Address& addr)
{
    if (addr.family() == AF_INET6)
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr.storage)->sin6_port);
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr.storage)->sin_port);
}

void set_timeouts(int fd, std::chrono::milliseconds timeout)
{
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

UniqueFd listen_on(const Address& addr, int backlog, int flags)
{
    UniqueFd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | flags, 0));
    if (!fd)
        throw SysError(errno, "socket");
    check(::bind(fd.get(), addr.get(), addr.len), "bind");
    check(::listen(fd.get(), backlog), "listen");
    return fd;
}

UniqueFd try_connect(const Address& addr, std::chrono::milliseconds timeout)
{
    UniqueFd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd)
        return fd;
    // Before connect: SO_SNDTIMEO bounds connect() too.
    set_timeouts(fd.get(), timeout);
    while (::connect(fd.get(), addr.get(), addr.len) < 0)
        if (errno != EINTR)
            return UniqueFd();  // errno survives fd's close
    return fd;
}

UniqueFd connect_to(const Address& addr, std::chrono::milliseconds timeout)
{
    UniqueFd fd = try_connect(addr, timeout);
    if (!fd)
        throw SysError(errno, "connect");
    return fd;
}

bool send_all(int fd, const void* data, size_t len)
{
    const char* p = static_cast<const char*>(data);
    while (len > 0) {
        ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            pollfd pfd{fd, POLLOUT, 0};
            if (::poll(&pfd, 1, 5000) != 1)
                return false;
            continue;
        }
        if (n <= 0)
            return false;
        p += n;
        len -= static_cast<size_t>(n);
    }
    return true;
}

bool send_all(int fd, std::string_view data)
{
    return send_all(fd, data.data(), data.size());
}

size_t recv_exact(int fd, void* data, size_t len)
{
    char* p = static_cast<char*>(data);
    size_t got = 0;
    while (got < len) {
        ssize_t n = ::recv(fd, p + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += static_cast<size_t>(n);
    }
    return got;
}

bool read_to_eof(int fd, const std::function<void(const char* data, size_t len)>& take, size_t chunk)
{
    std::vector<char> buf(chunk);
    for (;;) {
        ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        if (n == 0)
            return true;
        take(buf.data(), static_cast<size_t>(n));
    }
}

bool read_to_eof(int fd, std::string& out, size_t max)
{
    return read_to_eof(fd, [&](const char* data, size_t len) {
        if (out.size() < max)
            out.append(data, std::min(len, max - out.size()));
    });
}

std::optional<std::string> read_line(int fd, size_t max)
{
    std::string line;
    while (line.size() < max) {
        char c;
        ssize_t n = ::recv(fd, &c, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::nullopt;
        if (c == '\n')
            return line;
        line += c;
    }
    return std::nullopt;
}

rlim_t raise_nofile(rlim_t want)
{
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_cur >= want)
        return lim.rlim_cur;
    rlimit more{want, std::max(want, lim.rlim_max)};
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0)
        return want;
    more = {lim.rlim_max, lim.rlim_max};
    ::setrlimit(RLIMIT_NOFILE, &more);
    ::getrlimit(RLIMIT_NOFILE, &lim);
    return lim.rlim_cur;
}

}  // namespace cocoon::test
