// Mapping a wait status to cocoon's exit code. Pure; used by PID 1 and the monitor.
// Runs in: monitor, pid1: PID 1 sends the wait status; the monitor maps it.
#pragma once

namespace cocoon::reaper {

struct ExitStatus {
    int code;  // the command's exit code, or 128+N if signal N killed it
    int signal;  // N, or 0 when the command exited by itself
};

ExitStatus exit_status(int wait_status);

}  // namespace cocoon::reaper
