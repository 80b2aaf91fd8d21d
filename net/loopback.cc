// Bringing lo up in a new network namespace: the SIOCSIFFLAGS ioctl, with
// rtnetlink via libnl-route as the fallback, before privileges drop.
// Runs in: monitor, setup: the first process, and loopback_up_quietly in the monitor's network
//  namespace helper (ns/launch.cc), in the sandbox's user namespace.
#include "net/loopback.h"

#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>
#include <map>
#include <memory>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"

namespace cocoon::net {
namespace {

constexpr int kLoopbackIndex = 1;

template <class T, void (*Free)(T*)> struct Deleter {
    void operator()(T* p) const { Free(p); }
};
using Sock = std::unique_ptr<nl_sock, Deleter<nl_sock, nl_socket_free>>;
using Link = std::unique_ptr<rtnl_link, Deleter<rtnl_link, rtnl_link_put>>;
using Addr = std::unique_ptr<rtnl_addr, Deleter<rtnl_addr, rtnl_addr_put>>;
using NlAddr = std::unique_ptr<nl_addr, Deleter<nl_addr, nl_addr_put>>;

// libnl returns negative NLE_* codes; map the ones that matter back to errno.
[[noreturn]] void throw_nl(int err, const std::string& what)
{
    const std::map<int, int> to_errno{
        {NLE_PERM, EPERM}, {NLE_NOACCESS, EACCES}, {NLE_OBJ_NOTFOUND, ENODEV}, {NLE_NOMEM, ENOMEM}};
    const auto known = to_errno.find(-err);
    throw SysError(known == to_errno.end() ? EIO : known->second, what + " (" + nl_geterror(err) + ")");
}

// An rtnetlink socket, connected; `what` names a failure to connect.
Sock route_socket(const std::string& what)
{
    Sock sock(nl_socket_alloc());
    if (!sock)
        throw SysError(ENOMEM, "nl_socket_alloc");
    if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0)
        throw_nl(err, what);
    return sock;
}

// The ioctl way's three calls on sock: lo's flags after IFF_UP is set, or false with failed naming
// the call that failed (errno its cause). Bringing lo up makes the kernel assign 127.0.0.1/8 and
// ::1 itself. Throws and allocates nothing: loopback_up_quietly's caller may not.
bool set_loopback_up(int sock, short& flags, const char*& failed) noexcept
{
    ifreq req{};
    std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
    failed = "ioctl(SIOCGIFFLAGS, lo)";
    if (::ioctl(sock, SIOCGIFFLAGS, &req) < 0)
        return false;
    req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP);
    failed = "ioctl(SIOCSIFFLAGS, lo)";
    if (::ioctl(sock, SIOCSIFFLAGS, &req) < 0)
        return false;
    failed = "ioctl(SIOCGIFFLAGS, lo)";
    if (::ioctl(sock, SIOCGIFFLAGS, &req) < 0)
        return false;
    flags = req.ifr_flags;
    return true;
}

}  // namespace

void loopback_up_netlink()
{
    Sock sock = route_socket("Can't connect to rtnetlink");
    // In a new network namespace lo always exists with ifindex 1
    // (LOOPBACK_IFINDEX), so no RTM_GETLINK round trip is needed.
    Link lo(rtnl_link_alloc());
    Link change(rtnl_link_alloc());
    if (!lo || !change)
        throw SysError(ENOMEM, "rtnl_link_alloc");
    rtnl_link_set_ifindex(lo.get(), kLoopbackIndex);
    rtnl_link_set_flags(change.get(), IFF_UP);
    if (int err = rtnl_link_change(sock.get(), lo.get(), change.get(), 0); err < 0)
        throw_nl(err, "Can't bring lo up");
    // Bringing lo up makes the kernel assign 127.0.0.1/8 and ::1/128 itself
    // (inetdev and addrconf handle NETDEV_UP for the loopback device), at
    // once and usable; adding them by hand would cost two more round trips.
}

void add_loopback_address(const std::string& cidr)
{
    const std::string what = "Can't add " + cidr + " to lo";
    Sock sock = route_socket(what + ": can't connect to rtnetlink");
    nl_addr* parsed = nullptr;
    int err = nl_addr_parse(cidr.c_str(), AF_INET, &parsed);
    if (err < 0)
        throw_nl(err, what);
    NlAddr local(parsed);
    Addr address(rtnl_addr_alloc());
    if (!address)
        throw SysError(ENOMEM, "rtnl_addr_alloc");
    rtnl_addr_set_ifindex(address.get(), kLoopbackIndex);
    rtnl_addr_set_scope(address.get(), RT_SCOPE_HOST);
    if ((err = rtnl_addr_set_local(address.get(), local.get())) < 0 ||
        (err = rtnl_addr_add(sock.get(), address.get(), 0)) < 0)
        throw_nl(err, what);
}

short loopback_up_ioctl()
{
    UniqueFd sock = sys::check_fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), "socket(AF_INET)");
    short flags = 0;
    const char* failed = "";
    if (!set_loopback_up(sock.get(), flags, failed))
        throw SysError(errno, failed);
    return flags;
}

bool loopback_up_quietly(int sock) noexcept
{
    short flags = 0;
    const char* failed = "";
    return set_loopback_up(sock, flags, failed) && (flags & IFF_UP) && (flags & IFF_RUNNING);
}

bool loopback_is_up()
{
    UniqueFd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    ifreq req{};
    std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
    return sock && ::ioctl(sock.get(), SIOCGIFFLAGS, &req) == 0 && (req.ifr_flags & IFF_UP) &&
           (req.ifr_flags & IFF_RUNNING);
}

void loopback_up()
{
    // The ioctl first: one socket and three calls on the start-up path of
    // every sandbox, where rtnetlink through libnl takes eight system calls
    // and a request/reply (ARCHITECTURE.md, "Start-up"). Netlink stays as
    // the fallback for a host that refuses the ioctl.
    std::string ioctl_error;
    try {
        const short flags = loopback_up_ioctl();
        if ((flags & IFF_UP) && (flags & IFF_RUNNING))
            return;
        ioctl_error = "lo is not running after SIOCSIFFLAGS";
    } catch (const SysError& e) {
        ioctl_error = e.what();
    }
    try {
        loopback_up_netlink();
    } catch (const SysError& fallback) {
        throw SysError(fallback.code(), "Can't bring up lo: " + ioctl_error + "; then " + fallback.what());
    }
    if (!loopback_is_up())
        throw SysError(ENETDOWN, "lo is not up after setup (" + ioctl_error + ")");
}

}  // namespace cocoon::net
