// The launch sequence, in the monitor: the sandbox's cgroup, login files and
// terminals made ready, the first process cloned (ns/setup/first_process.cc), its
// maps written for --host-user, then the monitor's loop.
// Runs in: caller, monitor, setup: the caller clones; the monitor writes id maps and makes an unasked
//  cgroup, and its network namespace helper (a vfork-style child, system calls only) the sandbox's
//  network namespace; the clone's first lines are set-up's.
#include "ns/launch.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
#include "ns/setup/spawn.h"
#include "net/loopback.h"
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
                                const std::function<void()>& close_cgroup, unsigned long long clone_flags)
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
    sys::Cloned first = clone_first_process(clone_flags, fds.cgroup, sandbox);
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

// The sandbox's network namespace as make_netns_beside leaves it.
struct NetnsMade {
    UniqueFd fd;
    bool lo_up = false;
    unsigned long long inode = 0;  // for the namespace report (ns/monitor/monitor.cc)
};

// What the helper writes back, through a pipe: the shared memory of a vfork-style child is not
// shared in a sanitizer build, where cocoon_clone3 forks (ns/setup/spawn.cc).
struct NetnsHelperResult {
    int fd = -1;  // the namespace's, in the fd table the helper shares with the monitor
    int failed_step = 0;  // 0: none failed; else 1 setns, 2 unshare, 3 socket, 4 SIOCGSKNS
    bool lo_up = false;
};

// The helper, as the child of a vfork-style clone3: system calls only, its result written to
// result_fd. A function of its own (not inlined), so that its locals lie below the frame of the
// monitor's, which it shares.
[[noreturn]] __attribute__((noinline)) void netns_helper_main(int user, int result_fd)
{
    NetnsHelperResult r;
    int sock = -1;
    if (user >= 0 && ::setns(user, CLONE_NEWUSER) < 0)
        r.failed_step = 1;
    else if (::unshare(CLONE_NEWNET) < 0)
        r.failed_step = 2;
    else if ((sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
        r.failed_step = 3;
    else if (r.lo_up = net::loopback_up_quietly(sock), (r.fd = ::ioctl(sock, SIOCGSKNS)) < 0)
        r.failed_step = 4;
    if (sock >= 0)
        ::close(sock);
    ::_exit(::write(result_fd, &r, sizeof r) == sizeof r ? 0 : 1);
}

// Start-up speed: making a network namespace is most of what a clone with every namespace costs
// (here 0.34 ms of ~0.5 ms: the loopback device, its sysctl and proc entries, IPv6's tables). So
// the first process is cloned without one, and this helper makes it while set-up runs on the other
// CPU: a vfork-style child of the monitor (its memory and fd table shared, the monitor stopped
// until it exits). It joins the sandbox's user namespace where there is one (which then owns the
// network namespace, as after a clone with both), makes the namespace, brings lo up by the ioctl
// and leaves the namespace's fd in the shared table. The first process joins it before it forks
// the command (command_cgroup_from_monitor). Measured: tools/bench/startup, ARCHITECTURE.md.
// Security: the helper holds the monitor's memory and fds and, in the sandbox's user namespace,
// its every capability; nothing of the sandbox's can reach it. The command does not exist until
// the first process has the namespace, which the monitor sends only once the helper has exited and
// been reaped; the first process is cocoon's own code. The helper runs system calls only: nothing
// that throws or allocates in the memory it shares.
// A helper that fails, whatever the cause (a security module that refuses its setns through the
// pidfd, a seccomp filter that refuses setns or unshare, no network namespace left), leaves the
// namespace to the first process, which makes it as the clone did, on set-up's path (kNetnsMakeIt):
// its error, if it fails too, is the run's. A report then names no net-namespace (the monitor does
// not know it, and the first process's report went out at its start).
NetnsMade make_netns_beside(const LaunchPlan& plan, const sys::Cloned& first)
{
    int out[2];
    if (::pipe2(out, O_CLOEXEC) < 0)
        return {};
    UniqueFd read_end(out[0]), write_end(out[1]);
    const int result_fd = write_end.get(), user = (plan.clone_flags & CLONE_NEWUSER) ? first.pidfd.get() : -1;
    clone_args args{};
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_FILES;
    args.exit_signal = SIGCHLD;
    const long helper = cocoon_clone3(&args, sizeof args);
    if (helper == 0)
        netns_helper_main(user, result_fd);
    if (helper < 0)
        return {};
    // Closed only once the helper is reaped: the fd table is one (in a sanitizer build, where the
    // helper is forked and the monitor goes on at once, an earlier close was the helper's too).
    while (::waitpid(static_cast<pid_t>(helper), nullptr, 0) < 0 && errno == EINTR) {}
    write_end.reset();  // a helper that wrote nothing: EOF
    NetnsHelperResult r;
    if (::read(read_end.get(), &r, sizeof r) != sizeof r || r.failed_step != 0)
        return {};
    NetnsMade made{UniqueFd(r.fd), r.lo_up, 0};
    struct stat st {};
    if (::fstat(made.fd.get(), &st) == 0)
        made.inode = st.st_ino;
    return made;
}

// The work the monitor does on another CPU (CpuPin::step_aside) while the first process sets up:
// the sandbox's cgroup looked up and made (cgroup_channel: LaunchContext::command_cgroup_channel),
// its leaf sent to the first process (no fd: the caller may make no cgroup here).
SandboxCgroup work_beside_setup(const LaunchPlan& plan, const sys::Cloned& first, int cgroup_channel, bool report,
                                bool worker, NetnsMade* netns)
{
    try {
        if (netns)
            *netns = make_netns_beside(plan, first);
        SandboxCgroup cgroup = SandboxCgroup::make(plan.process.cgroup, report, plan.log_prefix, worker);
        int fds[3];
        size_t count = 0;
        if (cgroup.command_fd() >= 0) {
            fds[count++] = cgroup.command_fd();
            fds[count++] = cgroup.command_procs_fd();
        }
        if (netns && netns->fd)
            fds[count++] = netns->fd.get();
        const uint8_t netns_kind = !netns ? 0 : netns->fd ? CommandCgroupMsg::kNetnsFd : CommandCgroupMsg::kNetnsMakeIt;
        const CommandCgroupMsg msg{.send_pidfd = static_cast<uint8_t>(cgroup.pid1_movable()),
                                   .netns = netns_kind,
                                   .lo_up = static_cast<uint8_t>(netns && netns->lo_up)};
        // Not sent only where the first process is gone: it failed, and the channel says why.
        (void)relay::send_msg(cgroup_channel, msg, std::span<const int>(fds, count));
        if (netns)
            netns->fd.reset();  // the sandbox's from here on
        return cgroup;
    } catch (...) {
        kill_and_reap(first.pidfd.get());
        throw;
    }
}

// What the monitor and the first process make beside set-up, not before the clone, where the
// sandbox's cgroup comes through LaunchContext::command_cgroup_channel.
void decide_work_beside_setup(LaunchContext& ctx, const LaunchPlan& plan, const SandboxFds& sandbox, bool report)
{
    // The network namespace is made beside set-up too (make_netns_beside) where the first process
    // needs it only before it forks the command: not for --relay or --egress, whose listeners it
    // makes in it early, nor --userns2, joined after set-up.
    ctx.netns_beside = ctx.command_cgroup_channel >= 0 && (plan.clone_flags & CLONE_NEWNET) &&
                       plan.process.relays.empty() && !plan.process.egress && !sandbox.userns2 &&
                       !bench::skips(bench::Skip::NetnsBeside);
    // Start-up speed: so is the IPC namespace (~25 us to make here, with its mqueue instance and
    // sysctl tables), by the first process itself while it waits for the monitor's message, time
    // it otherwise spends idle. It makes it in the sandbox's user namespace, as the clone does. Not
    // with --mqueue, whose mount belongs to the IPC namespace of the process making it (in set-up,
    // so the namespace must exist by then), nor where a report names the namespaces (--info-fd:
    // the first process reports them at its start), nor --userns2, joined after set-up.
    ctx.ipc_beside = ctx.command_cgroup_channel >= 0 && (plan.clone_flags & CLONE_NEWIPC) && !report &&
                     !sandbox.userns2 &&
                     std::none_of(plan.mounts.ops.begin(), plan.mounts.ops.end(),
                                  [](const mount::Op& op) { return std::holds_alternative<mount::Mqueue>(op); }) &&
                     !bench::skips(bench::Skip::IpcBeside);
    // Start-up speed: so are the command's session keyring and default seccomp policy (the policy
    // takes ~60 us to load here, the kernel checking, translating and compiling it), which the
    // command then inherits from PID 1 instead of making them between its fork and its exec
    // (SECURITY.md, "Default seccomp policy"). Not where PID 1 runs again as a fresh image
    // (plan.reexec_pid1).
    ctx.confined_before_fork =
        ctx.command_cgroup_channel >= 0 && !plan.reexec_pid1 && !bench::skips(bench::Skip::SeccompBeside);
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
    // cgroup there, or PID 2 moves itself. (A benchmark build that leaves the cgroup out keeps the
    // channel: SandboxCgroup::make makes none, and the network namespace still comes through it.)
    UniqueFd cgroup_channel, child_cgroup_channel;
    if (!SandboxCgroup::asked(plan.process.cgroup, json_status) && plan.fork_command && !fds.sandbox.userns &&
        !fds.sandbox.pidns && !plan.host_user) {
        check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
        cgroup_channel.reset(sv[0]);
        child_cgroup_channel.reset(sv[1]);
        ctx.command_cgroup_channel = sv[1];
    }
    decide_work_beside_setup(ctx, plan, fds.sandbox, report);
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
    sys::Cloned first = start_first_process(
        plan, ctx, fds.sandbox, {sock.get(), child_sock.get(), first_cgroup}, report, in_helper,
        [&] { cgroup.close_in_child(); },
        plan.clone_flags & ~((ctx.netns_beside ? CLONE_NEWNET : 0ull) | (ctx.ipc_beside ? CLONE_NEWIPC : 0ull)));
    // The first process sets up on this CPU; what the monitor does meanwhile runs on another.
    ctx.pin.step_aside();
    child_sock.reset();
    child_cgroup_channel.reset();
    if (plan.host_user)
        write_host_user_maps(plan, first, sock.get());
    NetnsMade netns;
    if (cgroup_channel) {
        cgroup = work_beside_setup(plan, first, cgroup_channel.get(), json_status, worker,
                                   ctx.netns_beside ? &netns : nullptr);
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
                        usage, cgroup, std::move(logins), terminals, netns.inode});
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
