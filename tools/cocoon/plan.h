// Options + host facts -> the launch plan. Pure.
// Runs in: caller.
#pragma once

#include "base/sys_error.h"
#include "ns/plan.h"
#include "tools/cocoon/options.h"

namespace cocoon::tools {

// No command after the options: invoked as bwrap, cocoon then prints bwrap's usage to stderr
// and exits 1, as bwrap does (tools/cocoon/entry.cc); as cocoon, this one line.
class NoCommandError : public UsageError {
public:
    NoCommandError() : UsageError("No command specified (see --help)") {}
};

// Applies bwrap's rules (implicit user namespace for an unprivileged caller,
// --uid needs a user namespace, --hostname needs a UTS namespace, ...).
// Throws UsageError with a one-line message (NoCommandError without a command).
ns::LaunchPlan make_launch_plan(const Options& options, const HostFacts& host);

// bwrap's check of a seccomp program as it reads it: a whole number of 8-byte
// instructions. Throws UsageError in bwrap's words, the option its detail().
void check_whole_instructions(const SeccompInput& input);

// A seccomp program's bytes as sock_filter instructions; throws UsageError
// naming the option unless it is a non-empty multiple of 8 bytes of at most
// BPF_MAXINSNS instructions.
std::vector<sock_filter> seccomp_program(const SeccompInput& input);

}  // namespace cocoon::tools
