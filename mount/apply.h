// Applying the mount plan. Runs in the sandbox's first process (PID 1 with a
// PID namespace), inside the new mount namespace, with CAP_SYS_ADMIN over it.
// Runs in: setup.
#pragma once

#include <functional>
#include <vector>

#include "mount/plan.h"

namespace cocoon::mount {

// Builds the new root on a fresh tmpfs, applies plan.ops in order, then makes
// it the process's root and detaches the old one. Throws SysError/UsageError.
// fds: the fds the ops name, closed once used (none reaches the command).
// sources_opened, if given, runs once every host source (bind, overlay layer,
// the host's /proc) is open and before anything is made: what follows makes
// files, directories and filesystems, and mounts overlays, whose owner (and
// an overlay's credentials for its layers) is whoever this process is then.
// Returns every tmpfs it made (the root, each Tmpfs op's, the hidden ones of
// --bind-data and --tmp-overlay) as the O_PATH fd of its mount, for the
// resource report to fstatfs (ns/monitor/usage.h); at most one per op and two more.
std::vector<UniqueFd> apply(const Plan& plan, Fds fds, const std::function<void()>& sources_opened = {});

}  // namespace cocoon::mount
