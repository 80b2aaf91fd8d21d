// Wait status -> exit code. Pure.
// Runs in: monitor, pid1: PID 1 sends the wait status; the monitor maps it.
#include "reaper/status.h"

#include <sys/wait.h>

namespace cocoon::reaper {

ExitStatus exit_status(int wait_status)
{
    if (WIFEXITED(wait_status))
        return {WEXITSTATUS(wait_status), 0};
    if (WIFSIGNALED(wait_status))
        return {128 + WTERMSIG(wait_status), WTERMSIG(wait_status)};
    return {1, 0};
}

}  // namespace cocoon::reaper
