// Writing uid_map, setgroups and gid_map of a new user namespace. Runs in the
// sandbox's first process right after clone, before anything else, and (for
// --disable-userns) in the command's process for its nested namespace.
// Runs in: setup, pid2: set-up writes the sandbox's maps; PID 2 writes its nested namespace's.
#include "ns/setup/uid_map.h"

#include <string>

#include "base/sys.h"

namespace cocoon::ns {

void write_id_maps(uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid, int proc_dir)
{
    // The namespace's creator may map its own ids (one line each) without any
    // privilege in the parent namespace, so no round trip to the monitor.
    const std::string proc = proc_dir == AT_FDCWD ? "/proc/self/" : "self/";
    sys::write_file(proc + "uid_map", std::to_string(inside_uid) + " " + std::to_string(outside_uid) + " 1\n",
                    proc_dir);
    // Security: with setgroups allowed, the sandbox could drop a supplementary
    // group and so gain access that a group-deny permission meant to refuse.
    sys::write_file(proc + "setgroups", "deny", proc_dir);
    sys::write_file(proc + "gid_map", std::to_string(inside_gid) + " " + std::to_string(outside_gid) + " 1\n",
                    proc_dir);
}

}  // namespace cocoon::ns
