// uid/gid maps of the sandbox's user namespace. Written by the sandbox's first
// process itself, which holds CAP_SETUID over the namespace it was born in.
// Runs in: setup, pid2: set-up writes the sandbox's maps; PID 2 writes its nested namespace's.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

namespace cocoon::ns {

// Maps inside_uid/gid to the caller's outside ids (one id each) and denies
// setgroups in the calling process's user namespace. proc_dir: an fd of a
// procfs root, for a process whose root has no /proc (else /proc is used).
void write_id_maps(uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid, int proc_dir = AT_FDCWD);

}  // namespace cocoon::ns
