// --disable-userns and --assert-userns-disabled. The limit is written by the
// sandbox's first process (all capabilities in the sandbox's user namespace);
// the nesting and the check run in the command's process before exec.
//
// How the limit works: each user namespace counts, per creating uid, the user
// namespaces made inside it and below it, and refuses one more than its
// user.max_user_namespaces allows (ENOSPC). The sandbox's namespace S gets a
// limit of 1; the command then moves into one new namespace N, which uses it
// up. Anything created from N counts against S too, so it fails; and the
// command's capabilities (if any) are N's, which give no write access to S's
// limit. ARCHITECTURE.md says why this and not a seccomp filter.
// Runs in: setup, pid2: set-up and PID 2 (nesting) set user.max_user_namespaces.
#include "ns/setup/userns_limit.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>

#include "base/sys.h"
#include "base/sys_error.h"
#include "ns/setup/uid_map.h"

namespace cocoon::ns {

UniqueFd limit_user_namespaces()
{
    // /proc/sys/user shows the limits of the writer's own user namespace: S.
    const char* what = "--disable-userns: Can't set user.max_user_namespaces to 1";
    UniqueFd limit(::open("/proc/sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC));
    if (!limit || ::write(limit.get(), "1", 1) != 1)
        throw SysError(errno, what);
    // The new root may have no /proc; the nested namespace's id maps are
    // written through this fd (it is CLOEXEC, so the command never holds it).
    return sys::check_fd(::open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC), "--disable-userns: open(/proc)");
}

void enter_nested_user_namespace(int proc_dir)
{
    // The ids the command has in S (--uid/--gid, or the caller's) stay its ids.
    const uid_t uid = ::geteuid();
    const gid_t gid = ::getegid();
    check(::unshare(CLONE_NEWUSER), "--disable-userns: unshare(CLONE_NEWUSER)");
    // "self" under the host's procfs is this process: the fd's procfs belongs
    // to a PID namespace that sees every process of the sandbox.
    write_id_maps(uid, uid, gid, gid, proc_dir);
}

void assert_user_namespaces_disabled()
{
    // Security: the check is a real attempt, so it holds whatever the reason
    // (our limit, a limit in an outer namespace, a host sysctl, a filter).
    // Success moves this process into a namespace it will never use: it exits.
    if (::unshare(CLONE_NEWUSER) == 0)
        throw UsageError("creation of new user namespaces was not disabled as requested");
}

}  // namespace cocoon::ns
