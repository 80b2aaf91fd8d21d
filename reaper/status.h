// Mapping a wait status to cocoon's exit code. Pure; used by PID 1 and the monitor.
#pragma once

namespace cocoon::reaper {

// The command's exit code if it exited, 128+N if signal N killed it.
int exit_code(int wait_status);

} // namespace cocoon::reaper
