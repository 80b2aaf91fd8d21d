// cocoon --check: one line per feature this host allows or refuses a sandbox.
// Runs in: caller.
#pragma once

namespace cocoon::tools {

// Prints the report on stdout; returns 0 when a default sandbox can run here
// for this caller, else 1.
int run_check();

}  // namespace cocoon::tools
