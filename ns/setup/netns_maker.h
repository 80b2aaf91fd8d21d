// The sandbox's network namespace, made beside set-up. Making one is most of what the clone of a
// start costs (0.35-0.48 ms of its 0.5-0.65 here: the kernel sets up every network subsystem's
// state for it), and nothing the first process does before its mounts end needs it. So the clone
// leaves it out, and a helper the monitor starts on another CPU joins the first process's user
// namespace (the network namespace is then the sandbox's, as the clone's would be), makes it,
// brings lo up (as bwrap does), and sends its fd (NetnsMsg) to the first process, which joins it
// once its mounts are done (set-up step 9, ns/setup/first_process.cc). Where the helper cannot (a
// seccomp filter refusing setns or unshare, a namespace limit) it sends nothing, and the first
// process makes the namespace itself: the same namespace, later.
// Runs in: monitor, setup: the monitor starts the helper; the helper is set-up's, in the
// sandbox's user namespace, with nothing of the sandbox running yet.
#pragma once

#include <sys/types.h>

#include "base/sys.h"

namespace cocoon::ns {

// Starts the helper: it joins the user namespace of the process of first_pidfd when join_user,
// makes a network namespace, brings lo up there and sends the namespace's fd on channel, then
// exits. The helper's pid and pidfd, to reap; pid -1 where it could not start (the first process
// then gets no message: the channel's end is all it sees once the caller closes its copy).
// On x86-64 (not under AddressSanitizer) the helper shares the caller's memory, as a thread would,
// on a stack of its own, and makes only raw system calls: no errno, no allocation, nothing of the
// caller's it could write (a fork would copy the monitor's page tables: 0.15-0.2 ms here). At
// most one helper at a time.
sys::Cloned start_netns_maker(int first_pidfd, bool join_user, int channel);

}  // namespace cocoon::ns
