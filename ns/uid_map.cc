// Writing uid_map, setgroups and gid_map of the child's user namespace. Runs in
// the monitor, with the caller's privilege, right after clone.
#include "ns/uid_map.h"

#include <string>

#include "base/sys.h"

namespace cocoon::ns {

void write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid)
{
    std::string proc = "/proc/" + std::to_string(pid) + "/";
    sys::write_file(proc + "uid_map", std::to_string(inside_uid) + " " + std::to_string(outside_uid) + " 1\n");
    // Security: with setgroups allowed, the sandbox could drop a supplementary
    // group and so gain access that a group-deny permission meant to refuse.
    sys::write_file(proc + "setgroups", "deny");
    sys::write_file(proc + "gid_map", std::to_string(inside_gid) + " " + std::to_string(outside_gid) + " 1\n");
}

} // namespace cocoon::ns
