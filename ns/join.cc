// Joining the caller's namespaces. check_namespace_fd runs in the monitor
// before any process exists; clone_in_joined_namespaces forks a helper that
// joins and clones the sandbox's first process, then exits.
// Runs in: caller, setup: the caller checks --userns/--pidns fds; set-up runs the join helper.
#include "ns/join.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <utility>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "ns/channel.h"

namespace cocoon::ns {

void check_namespace_fd(int fd, int nstype, const std::string& option)
{
    const std::string name = option + " " + std::to_string(fd);
    if (::fcntl(fd, F_GETFD) < 0)
        throw SysError(errno, "Invalid " + name);
    // NS_GET_NSTYPE fails with ENOTTY for anything that is not an nsfs file.
    if (::ioctl(fd, NS_GET_NSTYPE) != nstype)
        throw UsageError("Invalid " + name + ": not a " +
                         (nstype == CLONE_NEWUSER  ? "user"
                          : nstype == CLONE_NEWPID ? "PID"
                                                   : "other") +
                         " namespace");
}

void join_namespace(const CallerFd& fd, int nstype)
{
    if (::setns(fd.get(), nstype) == 0)
        return;
    int err = errno;
    std::string hint;
    // The kernel's reasons, as setns(2) gives them: EINVAL for a namespace
    // that is not below ours (or is ours: re-entering would regain
    // capabilities), EPERM when we lack CAP_SYS_ADMIN over its owner.
    if (err == EINVAL && nstype == CLONE_NEWUSER)
        hint = " (it must be a descendant of the current user namespace, not the current one)";
    else if (err == EINVAL && nstype == CLONE_NEWPID)
        hint = " (it must be the current PID namespace or a descendant of it)";
    else if (err == EPERM)
        hint = " (it must be owned by the user namespace in use, or one below it that the caller owns)";
    throw SysError(err, "Joining " + fd.name + " failed" + hint);
}

sys::Cloned clone_first_process(unsigned long long flags, int cgroup_fd, const SandboxFds& fds)
{
    try {
        return sys::clone3(flags, cgroup_fd);
    } catch (const SysError& e) {
        // The kernel nests a PID namespace only under one whose owner is our
        // user namespace or an ancestor of it.
        bool nested = fds.pidns && (flags & CLONE_NEWPID) && e.code() == EINVAL;
        throw SysError(e.code(),
                       "Creating new namespace failed" + (nested ? " (--unshare-pid inside " + fds.pidns.name +
                                                                       " needs --userns with that namespace's owner)"
                                                                 : std::string()));
    }
}

JoinedChild clone_in_joined_namespaces(const LaunchPlan& plan, const SandboxFds& fds, int error_sock, int cgroup_fd,
                                       const std::function<void()>& in_helper, const std::function<void()>& child)
{
    int sv[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
    UniqueFd pidfd_read(sv[0]), pidfd_write(sv[1]);
    // Why a helper: setns into a user namespace cannot be undone, and the
    // namespaces clone3 makes belong to the caller's user namespace. So a
    // process that has joined must make them, and it must not be the monitor,
    // which keeps the caller's identity (relay sockets, signals).
    pid_t helper = static_cast<pid_t>(check(::fork(), "fork"));
    if (helper == 0) {
        pidfd_read.reset();
        in_helper();
        try {
            // User namespace first: it decides who may join the PID namespace
            // (CAP_SYS_ADMIN over its owner) and owns every namespace made next.
            if (fds.userns)
                join_namespace(fds.userns, CLONE_NEWUSER);
            unsigned long long flags = plan.clone_flags;
            if (fds.pidns) {
                // setns only moves our future children into the PID namespace,
                // and the kernel makes a nested one (--unshare-pid) only from a
                // process that is in it already: one more fork then.
                join_namespace(fds.pidns, CLONE_NEWPID);
                if (flags & CLONE_NEWPID) {
                    // CLONE_PARENT as below; the monitor reaps it by its pidfd.
                    sys::Cloned middle = sys::clone3(CLONE_PARENT, cgroup_fd);
                    if (middle.pid != 0) {
                        send_message(pidfd_write.get(), PidfdMsg{false, std::move(middle.pidfd)});
                        ::_exit(0);
                    }
                }
            }
            // CLONE_PARENT: the first process is the monitor's child, so it dies with
            // the monitor (PDEATHSIG) and is reaped by it. Its pidfd goes to the monitor:
            // a pid read here would be in the joined PID namespace's numbering.
            sys::Cloned first = clone_first_process(flags | CLONE_PARENT, cgroup_fd, fds);
            if (first.pid == 0) {
                pidfd_write.reset();
                child();
                ::_exit(1);
            }
            send_message(pidfd_write.get(), PidfdMsg{true, std::move(first.pidfd)});
            ::_exit(0);
        } catch (const std::exception& e) {
            send_message(error_sock, error_message(e, "joining namespaces"));
            ::_exit(1);
        }
    }
    pidfd_write.reset();
    JoinedChild out;
    // Until EOF: every sender (helper, intermediate, first process) has
    // closed its end by then.
    while (auto msg = receive_message(pidfd_read.get())) {
        auto* sent = std::get_if<PidfdMsg>(&*msg);
        if (!sent)
            continue;
        if (sent->first_process) {
            out.pidfd = std::move(sent->fd);
        } else {
            siginfo_t info;
            while (::waitid(P_PIDFD, static_cast<id_t>(sent->fd.get()), &info, WEXITED) < 0 && errno == EINTR) {}
        }
    }
    while (::waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {}
    if (out.pidfd)
        out.pid = sys::pidfd_pid(out.pidfd.get());
    return out;
}

}  // namespace cocoon::ns
