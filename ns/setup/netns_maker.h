// The sandbox's network namespace, and its IPC namespace, made beside set-up. Making a network
// namespace is most of what the clone of a start costs (0.35-0.48 ms of its 0.5-0.65 here: the
// kernel sets up every network subsystem's state for it), an IPC namespace 55-75 us more (its
// sysctl tables and mqueue's internal mount), and nothing the first process does before its mounts
// end needs either. So the clone leaves them out, and a helper the monitor starts beside set-up
// (which runs on another CPU) joins the first process's user namespace (the namespaces are then
// the sandbox's, as the clone's would be), makes them, brings lo up (as bwrap does), and sends
// their fds (NetnsMsg) to the first process, which joins them once its mounts are done (set-up
// step 9, ns/setup/first_process.cc). Where the helper cannot (a seccomp filter refusing setns or
// unshare, a namespace limit) it sends nothing, and the first process makes the namespaces itself:
// the same namespaces, later.
// Runs in: monitor, setup: the monitor starts the helper; the helper is set-up's, in the
// sandbox's user namespace, with nothing of the sandbox running yet.
#pragma once

#include <sys/types.h>

#include "base/sys.h"

namespace cocoon::ns {

// Starts the helper: it joins the user namespace of the process of first_pidfd when join_user,
// makes a network namespace (and an IPC namespace when ipc), brings lo up there and sends the
// namespaces' fds on channel (the network namespace's first), then exits. The helper's pid and
// pidfd, to reap; pid -1 where it could not start (the first process then gets no message: the
// channel's end is all it sees once the caller closes its copy). On x86-64 (not under
// AddressSanitizer) the helper shares the caller's memory, as a thread would, on a stack of its
// own, and makes only raw system calls: no errno, no allocation, nothing of the caller's it could
// write (a fork would copy the monitor's page tables: 0.15-0.2 ms here). At most one helper at a
// time.
sys::Cloned start_netns_maker(int first_pidfd, bool join_user, bool ipc, int channel);

}  // namespace cocoon::ns
