// The sandbox's PID 1: reaps every process and ends with the command.
// Runs inside the sandbox's PID namespace with no capabilities.
#pragma once

#include <sys/types.h>

namespace cocoon::reaper {

// Reaps children until `command` exits, then returns its exit code. When PID 1
// returns and exits, the kernel kills every process left in the namespace.
int run(pid_t command);

} // namespace cocoon::reaper
