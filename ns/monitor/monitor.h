// The monitor's side of a running sandbox: one poll loop until PID 1 is gone.
// Runs in cocoon's own process, outside the sandbox, with the caller's privilege.
// Runs in: monitor.
#pragma once

#include <sys/types.h>

#include <optional>

#include "base/unique_fd.h"
#include "ns/plan.h"
#include "ns/monitor/cgroup.h"
#include "ns/monitor/login_file.h"
#include "ns/monitor/stop.h"
#include "ns/monitor/terminal.h"
#include "ns/monitor/usage.h"

namespace cocoon::ns {

// What the monitor serves: the sandbox whose first process is `pid`.
struct Supervised {
    const LaunchPlan& plan;
    pid_t pid;
    int pidfd;  // PID 1's, borrowed
    UniqueFd sock;  // the setup channel
    UniqueFd parent;  // a pidfd of cocoon's parent with --die-with-parent, else invalid
    MonitorFds reports;  // where --info-fd and --json-status-fd write, the --relay sockets
    // Started before the sandbox existed, with --json-status-fd only (else empty); sampled
    // every 100 ms or less often, its figures end the exit line.
    std::optional<UsageMeter>& usage;
    SandboxCgroup& cgroup;  // maybe none: emptied once PID 1 is reaped, its figures replace the samples
    LoginFiles logins;  // syncs the --login-file copies
    Terminals& terminals;  // put back once the sandbox has ended
    // The network namespace's inode where the monitor made it (ns/launch.cc, make_netns_beside):
    // the first process, cloned without it, reports none; 0 otherwise.
    unsigned long long netns_inode = 0;
};

// Serves the sandbox until PID 1 exits; returns cocoon's exit code. Throws with the sandbox's
// message when set-up failed, and a ProtocolError once the setup channel sent what its table
// refuses (ns/monitor/setup_rules.h: the monitor then ended the sandbox). The event sources, first to last: the stop
// path (ns/monitor/stop.h), PID 1's exit, the setup channel, the command's exit and grace period
// (ns/monitor/command_watch.h), the relay worker (ns/monitor/relay_worker.h), the usage sampler
// (ns/monitor/usage.h), login sync (ns/monitor/login_file.h).
int monitor(Supervised supervised);

}  // namespace cocoon::ns
