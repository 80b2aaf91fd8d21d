// uid/gid maps of the sandbox's user namespace. Written by the monitor.
#pragma once

#include <sys/types.h>

namespace cocoon::ns {

// Maps inside_uid/gid to the caller's outside ids (one id each) and denies
// setgroups in the namespace of process `pid`.
void write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid);

} // namespace cocoon::ns
