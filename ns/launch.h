// The launch: one plan, one clone, one setup sequence in the sandbox.
// launch() runs in the monitor (cocoon's own process, outside the sandbox).
// Runs in: caller, monitor: the caller calls launch(), which returns in the monitor.
#pragma once

#include <string>
#include <vector>

#include "ns/plan.h"

namespace cocoon::ns {

// Runs the sandbox and returns cocoon's exit code: the command's, or 128+N if
// signal N killed it. Throws (SysError/UsageError) when the sandbox could not
// be set up; nothing of it is left running then.
int launch(const LaunchPlan& plan, CallerFds fds);

// PID 1 as a fresh image (LaunchPlan::reexec_pid1): cocoon's main hands it
// its arguments when the first is the internal marker is_pid1_mode finds.
bool is_pid1_mode(const std::vector<std::string>& args);
[[noreturn]] void pid1_main(const std::vector<std::string>& args);

}  // namespace cocoon::ns
