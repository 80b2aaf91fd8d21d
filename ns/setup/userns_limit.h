// --disable-userns and --assert-userns-disabled: keeping the command from
// creating user namespaces. Runs in the sandbox's setup processes.
// Runs in: setup, pid2: set-up and PID 2 (nesting) set user.max_user_namespaces.
#pragma once

#include "base/unique_fd.h"

namespace cocoon::ns {

// In the sandbox's first process, which holds CAP_SYS_RESOURCE over the
// sandbox's user namespace, while the host's /proc is still in view: lets
// that namespace hold one more user namespace in all (the command's), and
// returns an fd of /proc for enter_nested_user_namespace.
UniqueFd limit_user_namespaces();

// In the command's process, after the mounts are done and before its
// capabilities are set: moves it into a new user namespace (the one the limit
// allows) with its current uid and gid mapped to themselves.
void enter_nested_user_namespace(int proc_dir);

// Tries to create a user namespace; throws UsageError with bwrap's message
// if that works. Any failure counts as "disabled", as with bwrap.
void assert_user_namespaces_disabled();

}  // namespace cocoon::ns
