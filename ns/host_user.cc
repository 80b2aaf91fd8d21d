// --host-user: the id maps the monitor writes, and the first process's switch
// to those ids. ARCHITECTURE.md ("A root caller acting as another user") has
// the reasoning; SECURITY.md the class it closes.
// Runs in: monitor, setup: the monitor writes --host-user's id maps; set-up switches to the user.
#include "ns/host_user.h"

#include <grp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <string>

#include "base/sys.h"
#include "base/sys_error.h"

namespace cocoon::ns {

void map_host_user(pid_t pid, uid_t inside_uid, uid_t host_uid, gid_t inside_gid, gid_t host_gid)
{
    // A map that names anyone but the writer's own euid takes CAP_SETUID
    // (CAP_SETGID) over the parent of the namespace: the monitor has it as
    // root, the first process (inside the new namespace) never does.
    const std::string proc = "/proc/" + std::to_string(pid) + "/";
    try {
        sys::write_file(proc + "uid_map", std::to_string(inside_uid) + " " + std::to_string(host_uid) + " 1\n");
        sys::write_file(proc + "gid_map", std::to_string(inside_gid) + " " + std::to_string(host_gid) + " 1\n");
    } catch (const SysError& e) {
        throw SysError(e.code(), "--host-user: can't map the sandbox's ids: " + e.context());
    }
}

void become_host_user(uid_t inside_uid, gid_t inside_gid)
{
    // Security: root's supplementary groups (gid 0 among them) would open
    // every group-readable file of root's to the sandbox. Cleared while
    // setgroups is still allowed (map_host_user left it so); afterwards the
    // namespace maps one gid only, so no setgroups can add any other.
    check(::setgroups(0, nullptr), "--host-user: setgroups");
    // Security: real, effective, saved and fs ids all become the mapped ones.
    // The host's uid 0 is not mapped in this namespace, so nothing in it can
    // name it again: no setuid, setfsuid or setresuid can return to it, and
    // no exec can give it (a setuid-root file's owner is unmapped too).
    check(::setresgid(inside_gid, inside_gid, inside_gid), "--host-user: setresgid");
    check(::setresuid(inside_uid, inside_uid, inside_uid), "--host-user: setresuid");
    // The capabilities stay: the kernel clears them only when a process
    // leaves its namespace's uid 0, and the host's uid 0 is not that here.
    // The id change made this process non-dumpable (the kernel's rule for a
    // set-id transition). What could reach it now holds CAP_SYS_PTRACE over
    // this namespace, which only the caller (its owner, host root) has, or
    // runs in it as USER, which nothing does yet; so it is made dumpable
    // again, as a sandbox of USER's own would be: PID 1 turns it off for
    // itself as in any sandbox (child_main, be_reaper), and the command's
    // process needs it to write the id maps of its nested namespace
    // (--disable-userns: /proc/self/uid_map is its owner's to write).
    check(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "--host-user: prctl(PR_SET_DUMPABLE)");
}

}  // namespace cocoon::ns
