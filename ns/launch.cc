// The launch sequence. launch() runs in the monitor; child_main() is the first
// process of the sandbox (PID 1 when there is a PID namespace), which holds
// every capability over its new namespaces until it drops them before exec.
#include "ns/launch.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "mount/apply.h"
#include "net/loopback.h"
#include "ns/env.h"
#include "ns/uid_map.h"
#include "reaper/reaper.h"
#include "reaper/status.h"

extern char** environ;

namespace cocoon::ns {
namespace {

void set_no_new_privs()
{
    // Security: no exec in the sandbox (setuid binaries, file capabilities)
    // can ever gain privilege.
    check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)");
}

void set_parent_death_signal()
{
    check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)");
}

// bwrap's rule: --chdir, else the caller's cwd if it exists in the sandbox,
// else $HOME, else "/". Sets PWD to match.
void enter_working_dir(const LaunchPlan& plan, std::vector<std::string>& env)
{
    std::string cwd = "/";
    if (plan.chdir) {
        check(::chdir(plan.chdir->c_str()), "Can't chdir to " + *plan.chdir);
        cwd = *plan.chdir;
    } else if (::chdir(plan.host_cwd.c_str()) == 0) {
        cwd = plan.host_cwd;
    } else if (const char* home = ::getenv("HOME"); home && ::chdir(home) == 0) {
        cwd = home;
    } else {
        check(::chdir("/"), "Can't chdir to /");
    }
    set_env(env, "PWD", cwd);
}

// The command's process: final privileges, then exec. Throws on failure.
[[noreturn]] void exec_command(const LaunchPlan& plan)
{
    if (plan.new_session)
        // Security: a new session has no controlling terminal, so the command
        // cannot push input into the caller's terminal with TIOCSTI.
        check(::setsid(), "setsid");
    if (plan.die_with_parent)
        set_parent_death_signal();

    std::vector<std::string> env = plan.env;
    enter_working_dir(plan, env);

    apply_caps(plan.caps, plan.ambient_caps);
    set_no_new_privs();
    // Security: only stdin, stdout and stderr cross into the sandbox; an
    // inherited directory fd would be a way back into the host's tree.
    check(::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC), "close_range");

    std::vector<char*> argv, envp;
    for (const std::string& arg : plan.argv)
        argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (const std::string& entry : env)
        envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    environ = envp.data();  // execvp searches the command's PATH, not ours
    ::execvp(argv[0], argv.data());
    throw SysError(errno, "execvp " + plan.argv[0]);
}

// The sandbox's first process. Never returns: it execs the command, becomes
// the reaper, or reports what failed to the monitor and exits 1.
[[noreturn]] void child_main(const LaunchPlan& plan, int sock)
{
    try {
        // 1. User namespace: map the caller's ids.
        if (plan.clone_flags & CLONE_NEWUSER)
            write_id_maps(plan.uid, plan.real_uid, plan.gid, plan.real_gid);
        // 2. Die with the monitor (--die-with-parent).
        if (plan.die_with_parent)
            set_parent_death_signal();
        // 3. UTS namespace: hostname.
        if (plan.hostname)
            check(::sethostname(plan.hostname->data(), plan.hostname->size()), "sethostname");
        // 4. Network namespace: lo up, as bwrap does; nothing else exists in it.
        if (plan.clone_flags & CLONE_NEWNET)
            net::loopback_up();
        // 5. Mount namespace: the new root, in command-line order, then pivot_root.
        mount::apply(plan.mounts);
        // 6. PID namespace: stay as PID 1 to reap, run the command as PID 2.
        if ((plan.clone_flags & CLONE_NEWPID) && !plan.as_pid_1) {
            pid_t command = check(::fork(), "fork");
            if (command == 0)
                exec_command(plan);
            // Security: PID 1 keeps no privilege while it waits.
            apply_caps(0, false);
            set_no_new_privs();
            ::close(sock);
            ::_exit(reaper::run(command));
        }
        // 7. Otherwise this process becomes the command.
        exec_command(plan);
    } catch (const std::exception& e) {
        std::string msg = e.what();
        ::send(sock, msg.data(), msg.size(), MSG_NOSIGNAL);
        ::_exit(1);
    }
}

} // namespace

int launch(const LaunchPlan& plan)
{
    if (plan.die_with_parent)
        set_parent_death_signal();

    int sv[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
    UniqueFd sock(sv[0]), child_sock(sv[1]);

    int raw_pidfd = -1;
    pid_t pid;
    try {
        pid = sys::clone3(plan.clone_flags, &raw_pidfd);
    } catch (const SysError& e) {
        throw SysError(e.code(), "Creating new namespace failed");
    }
    if (pid == 0) {
        sock.reset();
        child_main(plan, child_sock.get());
    }
    UniqueFd pidfd(raw_pidfd);
    child_sock.reset();

    // Setup errors arrive as one message each; EOF means every setup process
    // has exec'd the command or exited.
    std::string error;
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(sock.get(), buf, sizeof buf, 0);
        if (n > 0 && error.empty())
            error.assign(buf, static_cast<size_t>(n));
        else if (n == 0 || (n < 0 && errno != EINTR))
            break;
    }

    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            throw SysError(errno, "waitpid");
    if (!error.empty())
        throw std::runtime_error(error);  // already "what: why" from the sandbox
    return reaper::exit_code(status);
}

} // namespace cocoon::ns
