// The monitor's side of a running sandbox: one poll loop until PID 1 is gone.
// Runs in cocoon's own process, outside the sandbox, with the caller's privilege.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>

#include "base/unique_fd.h"
#include "ns/launch.h"
#include "ns/login_file.h"
#include "ns/terminal.h"
#include "ns/usage.h"

namespace cocoon::ns {

// Signals the monitor takes over (blocks, then reads from a signalfd) for this
// plan: the forwarded set with --forward-signals, the stop signals with
// --kill-after, none otherwise (bwrap's dispositions).
sigset_t monitor_signals(const LaunchPlan& plan);

// Serves the sandbox whose first process is `pid` until it exits; returns
// cocoon's exit code. Throws with the sandbox's message when setup failed.
// `pidfd` (borrowed) is PID 1's; `parent` is a pidfd of cocoon's parent with
// --die-with-parent, else invalid; `reports` are where --info-fd and
// --json-status-fd write; `logins` syncs the --login-file copies.
// `usage` was started before the sandbox existed, with --json-status-fd
// only (else it is empty); it is sampled every 100 ms and its figures end
// the exit line; `cgroup` (maybe none) is emptied once PID 1 is reaped and
// its figures replace the samples; `terminals` are put back once the sandbox
// has ended.
int monitor(const LaunchPlan& plan, pid_t pid, int pidfd, UniqueFd sock, UniqueFd parent, MonitorFds reports,
            std::optional<UsageMeter>& usage, SandboxCgroup& cgroup, LoginFiles logins, Terminals& terminals);

}  // namespace cocoon::ns
