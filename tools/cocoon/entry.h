// cocoon's main, callable from tests: argv -> Options -> LaunchPlan -> launch.
// Runs in: caller, monitor, pid1, worker: every image of cocoon starts here: the caller, which
//  becomes the monitor; PID 1's and the relay worker's re-exec.
#pragma once

namespace cocoon::tools {

// Returns the process's exit code; prints one-line errors prefixed by the
// program's name ("bwrap" when invoked as bwrap, else "cocoon").
int cocoon_main(int argc, char** argv);

// Ends the process with `code` at once: stdio flushed, no destructors or exit
// handlers (under the sanitizers it returns `code`, for LeakSanitizer).
int exit_now(int code);

}  // namespace cocoon::tools
