// The command's process, from the first process's fork (or the first process
// itself) to the exec: process group, cgroup, working directory, final
// capabilities, seccomp, fds.
// Runs in: setup, pid1, pid2: set-up prepares the exec; PID 1 forks PID 2, which switches ids and
//  execs.
#include "ns/setup/command.h"

#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "ns/channel.h"
#include "ns/env.h"
#include "ns/monitor/cgroup.h"
#include "ns/setup/seccomp_policy.h"
#include "ns/setup/userns_limit.h"

extern char** environ;

namespace cocoon::ns {
namespace {

// bwrap's rule: --chdir, else the caller's cwd if it exists in the sandbox,
// else the command's $HOME, else "/". Sets PWD to match.
void enter_working_dir(const LaunchPlan& plan, std::vector<std::string>& env)
{
    std::string cwd = "/";
    if (const auto& dir = plan.process.chdir) {
        check(::chdir(dir->c_str()), "Can't chdir to " + *dir);
        cwd = *dir;
    } else if (::chdir(plan.host_cwd.c_str()) == 0) {
        cwd = plan.host_cwd;
    } else if (auto home = get_env(env, "HOME"); home && ::chdir(home->c_str()) == 0) {
        cwd = *home;
    } else {
        check(::chdir("/"), "Can't chdir to /");
    }
    set_env(env, "PWD", cwd);
}

}  // namespace

void set_no_new_privs()
{
    // Security: no exec in the sandbox (setuid binaries, file capabilities)
    // can ever gain privilege.
    check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)");
}

namespace {

// Security: a session keyring of its own, new and empty: none of the caller's keys is reachable,
// and nothing the command files there outlives it. Before the policy, which refuses keyctl.
// EPERM: keyctl is refused already (cocoon in a cocoon sandbox), so no keyring is reachable to
// leave; ENOSYS: a kernel without keys.
void join_new_session_keyring()
{
    if (::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 && errno != EPERM && errno != ENOSYS)
        throw SysError(errno, "Can't join a new session keyring (keyctl)");
}

}  // namespace

void confine_for_command(const LaunchPlan& plan)
{
    join_new_session_keyring();
    if (plan.process.default_seccomp)
        load_default_seccomp_policy();
}

void set_parent_death_signal()
{
    check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)");
}

void close_fds_except(std::vector<int> keep)
{
    std::sort(keep.begin(), keep.end());
    unsigned first = 3;
    for (int fd : keep) {
        if (fd < static_cast<int>(first))
            continue;
        if (static_cast<unsigned>(fd) > first)
            check(::close_range(first, static_cast<unsigned>(fd) - 1, 0), "close_range");
        first = static_cast<unsigned>(fd) + 1;
    }
    check(::close_range(first, ~0U, 0), "close_range");
}

ExecImage prepare_exec(const LaunchPlan& plan, const std::vector<UniqueFd>& inherited)
{
    ExecImage image;
    for (const UniqueFd& fd : inherited)
        image.inherited.push_back(fd.get());
    image.env = plan.env;
    enter_working_dir(plan, image.env);
    for (const std::string& arg : plan.argv)
        image.argv.push_back(const_cast<char*>(arg.c_str()));
    image.argv.push_back(nullptr);
    // --argv0: the program is still found by the command's first word.
    image.program = image.argv[0];
    if (plan.process.argv0)
        image.argv[0] = const_cast<char*>(plan.process.argv0->c_str());
    for (const std::string& entry : image.env)
        image.envp.push_back(const_cast<char*>(entry.c_str()));
    image.envp.push_back(nullptr);
    return image;
}

[[noreturn]] void exec_command(const LaunchPlan& plan, const LaunchContext& ctx, ExecImage& image, int proc_dir,
                               CallerFd keep, CapSet bounding)
{
    if (plan.process.new_session) {
        // Security: a new session has no controlling terminal, so the command
        // cannot push input into the caller's terminal with TIOCSTI.
        check(::setsid(), "setsid");
    } else if (plan.process.forward_signals) {
        // Its own process group (--forward-signals signals that group), with
        // the terminal when cocoon had it.
        check(::setpgid(0, 0), "setpgid");
        if (ctx.terminal_foreground)
            take_terminal();
    }

    // --uid/--gid with --userns: ids that the joined namespace maps.
    if (plan.switch_gid)
        check(::setresgid(*plan.switch_gid, *plan.switch_gid, *plan.switch_gid),
              "unable to switch to gid " + std::to_string(*plan.switch_gid));
    if (plan.switch_uid) {
        // Security: PR_SET_KEEPCAPS keeps the permitted set across the switch
        // away from uid 0 (the effective set is cleared regardless); it lasts
        // only until exec, and apply_caps below trims the set to what the
        // plan allows, so the command gets no capability the plan does not name.
        check(::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "prctl(PR_SET_KEEPCAPS)");
        check(::setresuid(*plan.switch_uid, *plan.switch_uid, *plan.switch_uid),
              "unable to switch to uid " + std::to_string(*plan.switch_uid));
    }
    // Security: --disable-userns: the command gets a user namespace of its own
    // that is the last one allowed, so it can make no more (and its
    // capabilities, if any, are over that namespace only). Before apply_caps:
    // the new namespace comes with a full capability set to trim.
    if (plan.process.disable_userns)
        enter_nested_user_namespace(proc_dir);
    if (plan.process.disable_userns || plan.process.assert_userns_disabled)
        assert_user_namespaces_disabled();
    apply_caps(plan.caps, plan.ambient_caps, bounding);
    set_no_new_privs();
    // Security: the fds that cross into the sandbox are stdin, stdout and
    // stderr, `keep`, and those the caller left inheritable for the command
    // (as bwrap passes them: the caller's decision, taken by tools/cocoon/entry.cc
    // before cocoon opened anything). Nothing of cocoon's may follow them:
    // the setup channel would let the command forge the monitor's messages,
    // a directory fd of setup's would be a way back into the host's tree. So
    // every fd is marked CLOEXEC here, whatever its own flag says, and only
    // those named are unmarked.
    check(::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC), "close_range");
    if (keep)
        check(::fcntl(keep.fd.release(), F_SETFD, 0), keep.name);
    for (int fd : image.inherited)
        if (::fcntl(fd, F_SETFD, 0) < 0)
            throw SysError(errno, "fcntl(F_SETFD) of inherited fd " + std::to_string(fd));

    environ = image.envp.data();  // execvp searches the command's PATH, not ours
    ::sigprocmask(SIG_SETMASK, &ctx.caller_mask, nullptr);
    ctx.pin.restore();
    // Security: the filters come last, after no_new_privs (which the kernel
    // requires of an unprivileged filter), so they need to allow nothing but
    // the exec itself: cocoon's default policy, then the caller's, which
    // stack on it (the kernel runs them all; the strictest answer wins).
    // The default policy (with the session keyring) may be PID 1's already,
    // inherited: it refuses nothing the steps above make.
    if (!ctx.confined_before_fork)
        confine_for_command(plan);
    // --seccomp, --add-seccomp-fd: in command-line order (the kernel runs the last one first).
    for (const std::vector<sock_filter>& program : plan.seccomp)
        load_seccomp_program(program, "Unable to set up system call filtering as requested: prctl(PR_SET_SECCOMP)");
    ::execvp(image.program, image.argv.data());
    throw SysError(errno, "execvp " + plan.argv[0]);
}

// PID 2 has an exception boundary of its own.
[[noreturn]] void command_main(const LaunchPlan& plan, const LaunchContext& ctx, ExecImage& image, int proc_dir,
                               int sock, CapSet bounding, const CommandCgroup& cgroup, bool in_leaf)
{
    try {
        // PID 1 (the holder, this process's parent) gets the caller's affinity back before the
        // command can see it: on its own it does so only once it runs again after the fork, which
        // on a loaded host can be after the command read /proc/1/status.
        ctx.pin.restore(::getppid());
        enter_command_cgroup(in_leaf ? -1 : cgroup.procs, cgroup.leaf >= 0, (plan.clone_flags & CLONE_NEWCGROUP) != 0);
        if (cgroup.send_pidfd) {
            UniqueFd self = sys::check_fd(::syscall(SYS_pidfd_open, ::getpid(), 0), "pidfd_open");
            send_message(sock, PidfdMsg{false, std::move(self)});
        }
        exec_command(plan, ctx, image, proc_dir, CallerFd(), bounding);
    } catch (const std::exception& e) {
        send_message(sock, error_message(e, "13 (exec)"));
    }
    ::_exit(1);
}

}  // namespace cocoon::ns
