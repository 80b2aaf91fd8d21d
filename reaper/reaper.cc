// PID 1 of the sandbox, after the command was forked: tini's loop. Signals
// arrive through a signalfd (no work in handlers); children are reaped until
// none is left to wait for. Runs unprivileged inside the sandbox's PID namespace.
// Runs in: setup, pid1: set-up computes PID 1's signal mask; PID 1 reaps.
#include "reaper/reaper.h"

#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "base/sys_error.h"
#include "base/unique_fd.h"

namespace cocoon::reaper {

sigset_t forwarded_signals()
{
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH})
        sigaddset(&set, sig);
    return set;
}

sigset_t signals_to_block(bool forward)
{
    // Without --forward-signals, stop signals stay unblocked and unhandled: the
    // kernel then drops them for a namespace's init, so a supervisor that
    // signals every process group reaches the command exactly once.
    sigset_t set = forwarded_signals();
    if (!forward)
        sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    return set;
}

int run(pid_t command, bool forward)
{
    sigset_t set = signals_to_block(forward);
    UniqueFd sfd(static_cast<int>(check(::signalfd(-1, &set, SFD_CLOEXEC), "signalfd")));
    for (;;) {
        // Reap everything that has exited (the command, and orphans that the
        // kernel reparented to us) until none is left to reap now (0).
        int status;
        for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) != 0;) {
            if (pid == command)
                return status;
            if (pid < 0 && errno != EINTR)
                return 1 << 8;  // ECHILD: the command is gone unseen; report exit 1
        }
        signalfd_siginfo info;
        ssize_t n = ::read(sfd.get(), &info, sizeof info);
        if (n != sizeof info)
            continue;
        int sig = static_cast<int>(info.ssi_signo);
        if (sig != SIGCHLD && forward)
            ::kill(-command, sig);  // the command leads its own process group
    }
}

bool has_children()
{
    siginfo_t info{};
    return ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT | __WALL) == 0;
}

void end_leftovers()
{
    // kill(-1) from a namespace's init reaches every process in it but itself.
    ::kill(-1, SIGKILL);
    while (::waitpid(-1, nullptr, __WALL) > 0 || errno == EINTR) {}
}

}  // namespace cocoon::reaper
