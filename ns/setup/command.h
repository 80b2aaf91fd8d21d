// The command's process: what it is made of before the fork (ExecImage) and
// its last steps, from its process group and cgroup to the exec. Internal to
// ns/, used by the first process (ns/setup/first_process.cc).
// Runs in: setup, pid1, pid2: set-up prepares the exec; PID 1 forks PID 2, which switches ids and
//  execs.
#pragma once

#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "ns/setup/caps.h"
#include "ns/launch_context.h"

namespace cocoon::ns {

void set_no_new_privs();
void set_parent_death_signal();
// Closes every fd above 2 but those in `keep` (negative entries are ignored).
void close_fds_except(std::vector<int> keep);
// The command's confinement that does not depend on its ids or capabilities: a new, empty session
// keyring and cocoon's default seccomp policy (plan.process.default_seccomp). PID 1 puts it in
// place before it forks the command, which inherits it (LaunchContext::confined_before_fork); else
// exec_command does, last. PID 1 loads the policy by CAP_SYS_ADMIN in its user namespace, which it
// holds there, not by no_new_privs: that stays its last step (be_reaper), and the command's own,
// before its exec.
void confine_for_command(const LaunchPlan& plan);

// What the command's exec needs, made before PID 1 forks it: PID 2 then
// allocates nothing between fork and exec. Start-up speed: every heap write
// there (building strings, and malloc_consolidate walking the arena) is a
// copy-on-write page fault on the path to the command's first instruction.
struct ExecImage {
    std::vector<std::string> env;
    std::vector<char*> argv, envp;
    const char* program = nullptr;
    std::vector<int> inherited;  // SandboxFds::inherited: open in the command
};

// Enters the working directory (so PWD is known) and builds argv and envp.
ExecImage prepare_exec(const LaunchPlan& plan, const std::vector<UniqueFd>& inherited);

// The command's process: final privileges, then exec. Throws on failure.
// proc_dir: the host's /proc, held for --disable-userns only. keep: the one
// caller fd the command keeps (--sync-fd with --as-pid-1), else invalid.
[[noreturn]] void exec_command(const LaunchPlan& plan, const LaunchContext& ctx, ExecImage& image, int proc_dir,
                               CallerFd keep, CapSet bounding = kAllCaps);

// PID 2 (between fork and exec): reports a failure to the monitor on `sock`
// and exits, never unwinding into PID 1's frames. in_leaf: it was cloned into
// the command's cgroup leaf (cgroup), so it does not move itself there.
[[noreturn]] void command_main(const LaunchPlan& plan, const LaunchContext& ctx, ExecImage& image, int proc_dir,
                               int sock, CapSet bounding, const CommandCgroup& cgroup, bool in_leaf);

}  // namespace cocoon::ns
