// The launch sequence, in the monitor: the sandbox's cgroup, login files and
// terminals made ready, the first process cloned (ns/setup/first_process.cc), its
// maps written for --host-user, then the monitor's loop.
// Runs in: caller, monitor, setup: the caller clones; the monitor writes id maps and makes an unasked
//  cgroup; the clone's first lines are set-up's.
#include "ns/launch.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <variant>

#include "base/bench_skip.h"
#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "ns/channel.h"
#include "ns/host_user.h"
#include "ns/join.h"
#include "ns/launch_context.h"
#include "ns/monitor/monitor.h"
#include "ns/monitor/terminal.h"
#include "relay/fd_message.h"

namespace cocoon::ns {
namespace {

// Security: never leave a sandbox running unsupervised. SIGKILL, then wait.
void kill_and_reap(int pidfd)
{
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    siginfo_t info;
    while (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED) < 0 && errno == EINTR) {}
}

// --die-with-parent watches the parent process (not the thread that started
// us, as PR_SET_PDEATHSIG would) through a pidfd. A parent outside cocoon's
// PID namespace (cocoon is a container's PID 1: getppid() is 0) has no pid
// here to open: then the kernel's parent-death signal, SIGKILL to cocoon,
// which the sandbox's first process follows (its own, step 4).
UniqueFd watch_parent()
{
    pid_t parent = ::getppid();
    if (parent == 0) {
        check(::prctl(PR_SET_PDEATHSIG, SIGKILL), "--die-with-parent: prctl(PR_SET_PDEATHSIG)");
        return UniqueFd();
    }
    UniqueFd fd = sys::check_fd(::syscall(SYS_pidfd_open, parent, 0),
                                "--die-with-parent: pidfd_open(" + std::to_string(parent) + ")");
    if (::getppid() != parent)
        throw UsageError("--die-with-parent: the parent process has already exited");
    return fd;
}

// The setup channel's two ends, and the cgroup the first process starts in.
struct FirstProcessFds {
    int sock;  // the monitor's end
    int child_sock;  // the first process's end
    int cgroup;
};

// Clones the sandbox's first process (child_main), or with --userns/--pidns
// has a helper join those and clone it. in_helper: what the helper or the
// first process drops of the monitor's; close_cgroup: the cgroup fds, which
// the joining helper keeps until it has cloned.
sys::Cloned start_first_process(const LaunchPlan& plan, const LaunchContext& ctx, SandboxFds& sandbox,
                                FirstProcessFds fds, bool report, const std::function<void()>& in_helper,
                                const std::function<void()>& close_cgroup)
{
    if (sandbox.userns || sandbox.pidns) {
        JoinedChild joined = clone_in_joined_namespaces(plan, sandbox, fds.child_sock, fds.cgroup, in_helper, [&] {
            close_cgroup();
            child_main(plan, ctx, std::move(sandbox), report, fds.child_sock);
        });
        if (!joined.pidfd || joined.pid <= 0) {
            if (joined.pidfd)
                kill_and_reap(joined.pidfd.get());
            auto msg = receive_queued_message(fds.sock);
            if (auto* err = msg ? std::get_if<ErrorMsg>(&*msg) : nullptr)
                rethrow(*err);
            throw UsageError("Joining the namespaces failed");
        }
        return sys::Cloned{joined.pid, std::move(joined.pidfd)};
    }
    sys::Cloned first = clone_first_process(plan.clone_flags, fds.cgroup, sandbox);
    if (first.pid == 0) {
        in_helper();
        close_cgroup();
        child_main(plan, ctx, std::move(sandbox), report, fds.child_sock);
    }
    return first;
}

// --host-user: the first process waits for its id maps (child_main, step 2),
// which name another user: the monitor's to write.
void write_host_user_maps(const LaunchPlan& plan, const sys::Cloned& first, int sock)
{
    try {
        map_host_user(first.pid, plan.uid, plan.real_uid, plan.gid, plan.real_gid);
        if (::send(sock, "1", 1, MSG_NOSIGNAL) != 1)
            throw SysError(errno, "--host-user: send");
    } catch (...) {
        kill_and_reap(first.pidfd.get());
        throw;
    }
}

// The work the monitor does on another CPU (CpuPin::step_aside) while the first process sets up:
// the sandbox's cgroup looked up and made (cgroup_channel: LaunchContext::command_cgroup_channel),
// its leaf sent to the first process (no fd: the caller may make no cgroup here).
SandboxCgroup work_beside_setup(const LaunchPlan& plan, const sys::Cloned& first, int cgroup_channel, bool report,
                                bool worker)
{
    try {
        SandboxCgroup cgroup = SandboxCgroup::make(plan.process.cgroup, report, plan.log_prefix, worker);
        const int fds[] = {cgroup.command_fd(), cgroup.command_procs_fd()};
        const CommandCgroupMsg msg{.send_pidfd = static_cast<uint8_t>(cgroup.pid1_movable())};
        // Not sent only where the first process is gone: it failed, and the channel says why.
        (void)relay::send_msg(cgroup_channel, msg, std::span<const int>(fds, cgroup.command_fd() >= 0 ? 2 : 0));
        return cgroup;
    } catch (...) {
        kill_and_reap(first.pidfd.get());
        throw;
    }
}

// Each relayed connection holds about two fds in the relay worker, which inherits
// this limit; use the whole hard limit (the sandbox was cloned with the caller's limits).
void raise_fd_limit()
{
    rlimit limit;
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &limit);
    }
}

}  // namespace

int launch(const LaunchPlan& plan, CallerFds fds)
{
    // The report's clock and CPU baseline start here, and only for a report
    // (the clock's first read faults in the vDSO's data pages: ~20 us).
    std::optional<UsageMeter> usage;
    if (fds.monitor.json_status)
        usage.emplace();
    LaunchContext ctx;
    ctx.tmpfs_report = static_cast<bool>(fds.monitor.json_status);
    ctx.terminal_foreground =
        plan.process.forward_signals && ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
    UniqueFd parent = plan.process.die_with_parent ? watch_parent() : UniqueFd();

    int sv[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
    UniqueFd sock(sv[0]), child_sock(sv[1]);

    // Block the signals the monitor will read from a signalfd before the
    // sandbox exists, so none is lost or kills us in between.
    sigset_t handled = monitor_signals(plan);
    check(::sigprocmask(SIG_BLOCK, &handled, &ctx.caller_mask), "sigprocmask");

    // --login-file: every SRC is opened and read before the sandbox exists.
    LoginFiles logins(plan.process.login_files, plan.log_prefix, plan.mounts.no_follow_sources);
    ctx.login_seeds = logins.seeds();
    // The caller's terminals, as they are before the command can change them.
    Terminals terminals = bench::skips(bench::Skip::Terminal) ? Terminals() : Terminals::save();

    const bool report = fds.monitor.info || fds.monitor.json_status;
    const bool json_status = static_cast<bool>(fds.monitor.json_status);
    const bool worker = !plan.process.relays.empty() || plan.process.egress;
    // Start-up speed: a cgroup nobody asked for (no --cgroup-parent, limit or report) is looked up
    // and made while the first process sets up, not before the clone: PID 1 then stays in the
    // caller's cgroup, and the command (PID 2, cloned into the leaf) and everything it starts are
    // in the sandbox's from their first instruction, as before. Not where the first process is the
    // command, joins namespaces, or runs as another user (--host-user): it is cloned into the
    // cgroup there, or PID 2 moves itself.
    UniqueFd cgroup_channel, child_cgroup_channel;
    if (!SandboxCgroup::asked(plan.process.cgroup, json_status) && plan.fork_command && !fds.sandbox.userns &&
        !fds.sandbox.pidns && !plan.host_user && !bench::skips(bench::Skip::Cgroup)) {
        check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
        cgroup_channel.reset(sv[0]);
        child_cgroup_channel.reset(sv[1]);
        ctx.command_cgroup_channel = sv[1];
    }
    // Otherwise the sandbox's cgroup, limits set, before the first process exists (and the
    // worker's leaf).
    SandboxCgroup cgroup;
    if (!cgroup_channel)
        cgroup = SandboxCgroup::make(plan.process.cgroup, json_status, plan.log_prefix, worker);
    // The first process goes into the sandbox's cgroup when it stays as PID 1
    // (its PID 2 then goes into the command's leaf), else straight
    // into the leaf: it is the command.
    const int first_cgroup = plan.fork_command ? cgroup.fd() : cgroup.command_fd();
    if (plan.fork_command)
        ctx.command_cgroup = {cgroup.command_fd(), cgroup.command_procs_fd(), cgroup.pid1_movable()};
    // cocoon's own binary (O_PATH), which PID 1 runs again as a fresh image.
    if (plan.reexec_pid1)
        ctx.exe = sys::check_fd(::open("/proc/self/exe", O_PATH | O_CLOEXEC), "Can't open /proc/self/exe");
    // The first process's view: none of the monitor's own fds. The joining
    // helper drops them too, but keeps the cgroup's until it has cloned.
    auto in_helper = [&] {
        sock.reset();
        cgroup_channel.reset();
        parent.reset();
        fds.monitor = {};
        logins = LoginFiles();
        terminals.forget();
    };
    ctx.pin.batch_for_clone();
    sys::Cloned first = start_first_process(plan, ctx, fds.sandbox, {sock.get(), child_sock.get(), first_cgroup},
                                            report, in_helper, [&] { cgroup.close_in_child(); });
    // The first process sets up on this CPU; what the monitor does meanwhile runs on another.
    ctx.pin.step_aside();
    child_sock.reset();
    child_cgroup_channel.reset();
    if (plan.host_user)
        write_host_user_maps(plan, first, sock.get());
    if (cgroup_channel) {
        cgroup = work_beside_setup(plan, first, cgroup_channel.get(), json_status, worker);
        cgroup_channel.reset();
    }
    // The sandbox has its own copies. The monitor keeps none (as bwrap's), so
    // the sync fd reaches EOF exactly when the sandbox ends, cocoon alive or not.
    fds.sandbox = {};
    ctx.pin.release();
    if (!plan.process.relays.empty())
        raise_fd_limit();

    int code;
    try {
        code = monitor({plan, first.pid, first.pidfd.get(), std::move(sock), std::move(parent), std::move(fds.monitor),
                        usage, cgroup, std::move(logins), terminals});
    } catch (...) {
        // After a setup error the sandbox is gone already; the signal then
        // finds nothing.
        kill_and_reap(first.pidfd.get());
        (void)terminals.restore();
        throw;
    }
    if (ctx.terminal_foreground)
        take_terminal();  // back from the sandbox's (now gone) process group
    return code;
}

}  // namespace cocoon::ns
