// Joining namespaces the caller handed over as fds (--userns, --pidns,
// --userns2). The checks run in the monitor; the joins in short-lived setup
// processes and in the sandbox's first process.
// Runs in: caller, setup: the caller checks --userns/--pidns fds; set-up runs the join helper.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "base/sys.h"
#include "base/unique_fd.h"
#include "ns/plan.h"

namespace cocoon::ns {

// Throws naming `option` and fd unless fd is open and is a namespace of type
// `nstype` (CLONE_NEWUSER, CLONE_NEWPID): "Invalid --userns 5: not a user namespace".
void check_namespace_fd(int fd, int nstype, const std::string& option);

// setns(fd, nstype); throws naming the fd as the caller did ("--userns 5"),
// with a hint for the kernel's EINVAL/EPERM (the namespace's place in the
// tree, its owner).
void join_namespace(const CallerFd& fd, int nstype);

// clone3 of the sandbox's first process (into cgroup_fd when >= 0). Throws
// SysError "Creating new namespace failed", with a hint where the kernel
// refuses a PID namespace inside the one fds.pidns names.
sys::Cloned clone_first_process(unsigned long long flags, int cgroup_fd, const SandboxFds& fds);

// The sandbox's first process as the monitor sees it.
struct JoinedChild {
    pid_t pid = -1;
    UniqueFd pidfd;  // invalid after a failure whose ErrorMsg went to error_sock
};

// Starts the sandbox's first process inside the joined namespaces
// (fds.userns, fds.pidns) through a short-lived helper. The first
// process is cocoon's own child (CLONE_PARENT), so the monitor waits for it
// as usual. In the helper, `in_helper` runs first (it drops the monitor's
// fds); in the first process, `child` runs and must not return. With
// cgroup_fd >= 0 the first process starts in that cgroup.
JoinedChild clone_in_joined_namespaces(const LaunchPlan& plan, const SandboxFds& fds, int error_sock, int cgroup_fd,
                                       const std::function<void()>& in_helper, const std::function<void()>& child);

}  // namespace cocoon::ns
