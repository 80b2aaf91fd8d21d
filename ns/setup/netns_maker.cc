// The network namespace's helper (ns/setup/netns_maker.h).
// Runs in: monitor, setup: the monitor starts the helper; the helper is set-up's, in the
//  sandbox's user namespace, with nothing of the sandbox running yet.
#include "ns/setup/netns_maker.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "base/sys_error.h"
#include "ns/channel.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COCOON_NETNS_MAKER_FORK 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || !defined(__x86_64__)
#define COCOON_NETNS_MAKER_FORK 1
#endif

namespace cocoon::ns {
namespace {

// What the helper needs, written by the caller before the clone and only read after it.
struct MakerArgs {
    int first_pidfd;
    bool join_user;
    bool ipc;
    int channel;
};

// A system call's raw result (-errno on failure): errno is the caller's own, in the memory the
// helper shares with it.
long raw_syscall(long nr, long a1 = 0, long a2 = 0, long a3 = 0)
{
#ifndef COCOON_NETNS_MAKER_FORK
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a1), "S"(a2), "d"(a3) : "rcx", "r11", "memory");
    return ret;
#else
    const long ret = ::syscall(nr, a1, a2, a3);
    return ret < 0 ? -errno : ret;
#endif
}

// The namespaces' fds, sent as NetnsMsg; nothing where any step fails.
void make_and_send(const MakerArgs& a)
{
    // Security: only the two fds it uses once it joins the sandbox's user namespace, where it holds
    // every capability: none of the monitor's (the caller's terminals, login files, sockets) stays
    // open in a process of that namespace.
    const long lo = a.first_pidfd < a.channel ? a.first_pidfd : a.channel;
    const long hi = a.first_pidfd < a.channel ? a.channel : a.first_pidfd;
    raw_syscall(SYS_close_range, 3, lo - 1, 0);
    raw_syscall(SYS_close_range, lo + 1, hi - 1, 0);
    raw_syscall(SYS_close_range, hi + 1, ~0U, 0);
    if (a.join_user && raw_syscall(SYS_setns, a.first_pidfd, CLONE_NEWUSER) != 0)
        return;
    if (raw_syscall(SYS_unshare, CLONE_NEWNET | (a.ipc ? CLONE_NEWIPC : 0)) != 0)
        return;
    // lo up, as net::loopback_up's ioctl way does (a refusal leaves it to the first process).
    const long sock = raw_syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq req{};
    req.ifr_name[0] = 'l';
    req.ifr_name[1] = 'o';
    if (sock < 0 || raw_syscall(SYS_ioctl, sock, SIOCGIFFLAGS, reinterpret_cast<long>(&req)) != 0)
        return;
    req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP);
    if (raw_syscall(SYS_ioctl, sock, SIOCSIFFLAGS, reinterpret_cast<long>(&req)) != 0)
        return;
    const long netns =
        raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/thread-self/ns/net"), O_RDONLY | O_CLOEXEC);
    const long ipcns = a.ipc ? raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/thread-self/ns/ipc"),
                                           O_RDONLY | O_CLOEXEC)
                             : 0;
    if (netns < 0 || ipcns < 0)
        return;
    // relay::send_msg's framing (one NetnsMsg, one or two fds), by hand: its sendmsg would set
    // errno, the monitor's, in the memory the two share.
    NetnsMsg msg;
    iovec iov{&msg, sizeof msg};
    const int fds[2] = {static_cast<int>(netns), static_cast<int>(ipcns)};
    const size_t count = a.ipc ? 2 : 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control;
    hdr.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* cmsg = CMSG_FIRSTHDR(&hdr);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(count * sizeof(int));
    __builtin_memcpy(CMSG_DATA(cmsg), fds, count * sizeof(int));
    raw_syscall(SYS_sendmsg, a.channel, reinterpret_cast<long>(&hdr), MSG_NOSIGNAL);
}

#ifndef COCOON_NETNS_MAKER_FORK
MakerArgs g_args;
alignas(64) char g_stack[16 * 1024];

int maker_main(void* args)
{
    make_and_send(*static_cast<const MakerArgs*>(args));
    raw_syscall(SYS_exit, 0);
    return 0;
}
#endif

}  // namespace

sys::Cloned start_netns_maker(int first_pidfd, bool join_user, bool ipc, int channel)
{
#ifndef COCOON_NETNS_MAKER_FORK
    g_args = {first_pidfd, join_user, ipc, channel};
    int pidfd = -1;
    const pid_t pid = ::clone(maker_main, g_stack + sizeof g_stack, CLONE_VM | CLONE_PIDFD | SIGCHLD, &g_args, &pidfd);
    return {pid < 0 ? -1 : pid, UniqueFd(pid < 0 ? -1 : pidfd)};
#else
    sys::Cloned maker{-1, UniqueFd()};
    try {
        maker = sys::clone3(0);
    } catch (const SysError&) {
        return maker;
    }
    if (maker.pid == 0) {
        make_and_send({first_pidfd, join_user, ipc, channel});
        ::_exit(0);
    }
    return maker;
#endif
}

}  // namespace cocoon::ns
