// Applying the mount plan. Runs in the sandbox's first process (PID 1 with a
// PID namespace), inside the new mount namespace, with CAP_SYS_ADMIN over it.
#pragma once

#include "mount/plan.h"

namespace cocoon::mount {

// Builds the new root on a fresh tmpfs, applies plan.ops in order, then makes
// it the process's root and detaches the old one. Throws SysError/UsageError.
// fds: the fds the ops name, closed once used (none reaches the command).
void apply(const Plan& plan, Fds fds);

}  // namespace cocoon::mount
