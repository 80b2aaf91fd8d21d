// Wait status -> exit code. Pure.
#include "reaper/status.h"

#include <sys/wait.h>

namespace cocoon::reaper {

int exit_code(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}

} // namespace cocoon::reaper
