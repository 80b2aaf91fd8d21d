// --host-user: a root caller's sandbox acting on the host as another user.
// map_host_user runs in the monitor (root over the caller's namespace);
// become_host_user in the sandbox's first process, once its bind sources are open.
// Runs in: monitor, setup: the monitor writes --host-user's id maps; set-up switches to the user.
#pragma once

#include <sys/types.h>

namespace cocoon::ns {

// Writes the id maps of pid's user namespace (just made, by a root caller's
// clone): inside_uid -> host_uid and inside_gid -> host_gid, one id each,
// nothing else. setgroups stays allowed, so that the first process can clear
// the supplementary groups it inherited from root.
void map_host_user(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid);

// The first process drops root's host ids for good: no supplementary groups,
// then gid and uid (real, effective, saved and fs) set to the mapped ones.
// It keeps its capabilities over the sandbox's namespaces.
void become_host_user(uid_t inside_uid, gid_t inside_gid);

}  // namespace cocoon::ns
