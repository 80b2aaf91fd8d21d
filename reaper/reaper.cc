// PID 1 of the sandbox, after the command was forked: a wait loop in the
// style of tini. Runs unprivileged inside the sandbox's PID namespace.
#include "reaper/reaper.h"

#include <sys/wait.h>

#include <cerrno>

#include "reaper/status.h"

namespace cocoon::reaper {

int run(pid_t command)
{
    for (;;) {
        int status;
        pid_t pid = ::waitpid(-1, &status, 0);
        if (pid == command)
            return exit_code(status);
        if (pid < 0 && errno != EINTR)
            return 1;  // ECHILD: the command is gone without a status we saw
    }
}

} // namespace cocoon::reaper
