// cocoon --check: what this host allows a sandbox, one line per feature, each
// "no" with what refused it and what to do about it, and a last line that says what to change
// when a default sandbox cannot run. Every probe runs in a short-lived child, so nothing of it
// touches cocoon's own process or stays on the host.
// Runs in: caller.
#include "tools/cocoon/check.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/netlink.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "mount/masked_proc.h"
#include "ns/monitor/cgroup.h"
#include "tools/cocoon/check_refusal.h"

namespace cocoon::tools {
namespace {

// Who runs --check, and what stands around it.
struct Caller {
    uid_t uid = 0;
    gid_t gid = 0;
    bool root = false;
    // Root with CAP_SYS_ADMIN: its sandboxes make their namespaces without a user namespace.
    // Anyone else's (a container's root's too) get one of their own.
    bool privileged = false;
    uint64_t effective = 0;
    ProcessFacts facts;
};

std::string read_line(const char* path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

Caller read_caller()
{
    Caller c;
    c.uid = ::getuid();
    c.gid = ::getgid();
    c.root = c.uid == 0;
    c.effective = sys::own_caps().effective;
    c.privileged = sys::privileged_root(c.uid, c.effective);
    utsname u{};
    if (::uname(&u) == 0)
        c.facts.kernel = parse_kernel_version(u.release);
    c.facts.seccomp = sys::under_seccomp_filter();
    return c;
}

// Runs probe in a forked child and returns its outcome (through a pipe: which call, since when;
// its errno as the exit code).
Outcome in_child(const std::function<Outcome()>& probe)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0)
        return {errno, "pipe2", {}};
    UniqueFd reader(fds[0]), writer(fds[1]);
    const pid_t pid = ::fork();
    if (pid < 0)
        return {errno, "fork", {}};
    if (pid == 0) {
        const Outcome o = probe();
        const std::string text = std::to_string(o.since.major) + " " + std::to_string(o.since.minor) + " " + o.call;
        (void)sys::write_all(writer.get(), text);
        ::_exit(o.err & 0xff);
    }
    writer.reset();
    std::string text;
    (void)sys::read_up_to(reader.get(), 4096, text);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    Outcome o;
    o.err = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
    int used = 0;
    if (std::sscanf(text.c_str(), "%u %u %n", &o.since.major, &o.since.minor, &used) >= 2 && used > 0)
        o.call = text.substr(static_cast<size_t>(used));
    return o;
}

// Maps the caller's uid and gid to root in the user namespace just made (a root caller's uid 0 to
// 0: Linux asks for CAP_SETFCAP then); 0 or the errno of the write that failed.
int map_ids(uid_t uid, gid_t gid)
{
    try {
        sys::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n");
        sys::write_file("/proc/self/setgroups", "deny");
        sys::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n");
        return 0;
    } catch (const SysError& e) {
        return e.code();
    }
}

// The namespaces a sandbox of this caller's would be made in: a new user namespace (unless root
// with CAP_SYS_ADMIN) plus `more`. Its outcome names the unshare when it fails.
Outcome enter(const Caller& c, int more, const std::string& names)
{
    const int user = c.privileged ? 0 : CLONE_NEWUSER;
    if (::unshare(user | more) < 0)
        return {errno, "unshare(" + std::string(user ? "CLONE_NEWUSER | " : "") + names + ")", {4, 6}};
    if (int err = user ? map_ids(c.uid, c.gid) : 0)
        return {err, "writing the new user namespace's id maps", {3, 8}};
    return {};
}

struct Report {
    bool runnable = true;
    std::vector<std::string> remedies;  // what to change, for the last line
    void line(bool ok, const std::string& what, const std::string& fix, bool needed, const std::string& remedy = "")
    {
        std::printf("%-4s %s%s\n", ok ? "yes" : "no", what.c_str(), ok || fix.empty() ? "" : (": " + fix).c_str());
        if (ok || !needed)
            return;
        runnable = false;
        const std::string change = what + ": " + (remedy.empty() ? fix : remedy);
        if (std::find(remedies.begin(), remedies.end(), change) == remedies.end())
            remedies.push_back(change);
    }
};

// What `node --version` prints ("v22.21.0"), or "" when PATH has no node (or it says nothing
// within 5 s: it is killed).
std::string node_version()
{
    int out[2];
    if (::pipe2(out, O_CLOEXEC) < 0)
        return "";
    UniqueFd reader(out[0]), writer(out[1]);
    const pid_t pid = ::fork();
    if (pid < 0)
        return "";
    if (pid == 0) {
        const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (::dup2(writer.get(), STDOUT_FILENO) < 0 || null < 0 || ::dup2(null, STDERR_FILENO) < 0 ||
            ::dup2(null, STDIN_FILENO) < 0)
            ::_exit(127);
        ::execlp("node", "node", "--version", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    writer.reset();
    std::string text;
    char buf[64];
    for (pollfd p{reader.get(), POLLIN, 0}; text.size() < 64 && ::poll(&p, 1, 5000) == 1;) {
        const ssize_t n = ::read(reader.get(), buf, sizeof buf);
        if (n <= 0)
            break;
        text.append(buf, static_cast<size_t>(n));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (text.empty() || text[0] != 'v')
        return "";
    return text.substr(0, text.find_first_of("\r\n"));
}

// Node reads HTTP_PROXY and friends for its own fetch and http only with NODE_USE_ENV_PROXY=1
// (which --proxy-env sets), since 24.0 and 22.21; older Node (and 23) connects directly, which
// --egress's transparent half takes (relay/dns.h) and --relay does not. Said, not needed: a
// program may read them itself.
void check_node(Report& r)
{
    const std::string version = node_version();
    if (version.empty())
        return;
    unsigned major = 0, minor = 0;
    std::sscanf(version.c_str(), "v%u.%u", &major, &minor);
    const bool reads = major >= 24 || (major == 22 && minor >= 21);
    r.line(reads, "Node.js " + version + " on PATH reads the proxy variables (NODE_USE_ENV_PROXY=1)",
           "Node before 22.21 (and 23) ignores the proxy variables; transparent egress covers it: under "
           "--egress its fetch reaches the allowed hosts without them, but through --relay to a proxy of your "
           "own it reaches nothing (run the agent with Node 22.21 or later there)",
           false);
}

// 1. Which way this caller's sandboxes are made (tools/cocoon/plan.cc decides the same).
void say_mode(const Caller& c)
{
    std::string mode;
    if (c.privileged)
        mode = "root with CAP_SYS_ADMIN: a sandbox makes the namespaces asked for, a user namespace only with "
               "--unshare-user (or --unshare-all), and its command keeps root's capabilities unless --cap-drop";
    else if (c.root)
        mode = "root without CAP_SYS_ADMIN (a container's root): every sandbox gets a user namespace of its own, "
               "as an unprivileged caller's does, and its command no capability unless --cap-add (its uid 0 is "
               "this root's)";
    else
        mode = "unprivileged (uid " + std::to_string(c.uid) +
               "): every sandbox gets a user namespace of its own, and its command no capability unless --cap-add";
    std::printf("%-4s %s\n", "mode", mode.c_str());
}

// 2. User namespaces: needed by every caller but root with CAP_SYS_ADMIN, mapped as a sandbox's.
void check_user_namespaces(Report& r, const Caller& c)
{
    const std::string max_userns = read_line("/proc/sys/user/max_user_namespaces");
    const std::string debian_knob = read_line("/proc/sys/kernel/unprivileged_userns_clone");
    const std::string apparmor_knob = read_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    const Outcome userns = in_child([&] {
        if (::unshare(CLONE_NEWUSER) < 0)
            return Outcome{errno, "unshare(CLONE_NEWUSER)", {3, 8}};
        if (int err = c.privileged ? 0 : map_ids(c.uid, c.gid))
            return Outcome{err, "writing the new user namespace's id maps", {3, 8}};
        return Outcome{};
    });
    std::string fix, change;
    if (max_userns == "0")
        fix = "user.max_user_namespaces is 0 (sysctl -w user.max_user_namespaces=15000)";
    else if (debian_knob == "0")
        fix = "kernel.unprivileged_userns_clone is 0 (sysctl -w kernel.unprivileged_userns_clone=1)";
    else if (apparmor_knob == "1")
        fix = "AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns=1): install the "
              "cocoon profile (README, \"AppArmor\")";
    else if (c.root && !c.privileged && !((c.effective >> CAP_SETFCAP) & 1))
        fix = "mapping uid 0 into one needs CAP_SETFCAP, which this root lacks too: give it CAP_SETFCAP (a "
              "container's root has it unless its runtime drops it), or run cocoon as another user";
    else {
        fix = refusal(userns, c.facts);
        change = remedy(userns, c.facts);
    }
    r.line(userns.err == 0, "user namespaces", fix, !c.privileged, change);
    if (!apparmor_knob.empty())
        r.line(apparmor_knob != "1" || userns.err == 0, "AppArmor allows cocoon user namespaces",
               "install the cocoon profile (README, \"AppArmor\")", !c.privileged);
}

// 3. The namespaces --unshare-all asks for, made as the caller's sandbox would be.
void check_namespaces(Report& r, const Caller& c)
{
    const Outcome all = in_child([&] {
        return enter(c, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP,
                     "CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP");
    });
    r.line(all.err == 0, "mount, PID, network, IPC, UTS and cgroup namespaces", refusal(all, c.facts), true,
           remedy(all, c.facts));
    // The sandbox's first process is made by clone3 (into its cgroup, with a pidfd); Docker's
    // default seccomp profile answers it ENOSYS without CAP_SYS_ADMIN.
    const Outcome clone3 = in_child([] {
        try {
            if (sys::clone3(0).pid == 0)
                ::_exit(0);
            return Outcome{};
        } catch (const SysError& e) {
            return Outcome{e.code(), "clone3", {5, 3}};
        }
    });
    r.line(clone3.err == 0, "clone3 (the sandbox's first process)", refusal(clone3, c.facts), true,
           remedy(clone3, c.facts));
}

// 4. The new mount API (all of it by Linux 5.12), and openat2.
void check_mount_api(Report& r, const Caller& c)
{
    const Outcome api = in_child([&] {
        if (Outcome o = enter(c, CLONE_NEWNS, "CLONE_NEWNS"); o.err)
            return o;
        UniqueFd fs(::fsopen("tmpfs", FSOPEN_CLOEXEC));
        if (!fs)
            return Outcome{errno, "fsopen", {5, 2}};
        if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0)
            return Outcome{errno, "fsconfig", {5, 2}};
        UniqueFd mnt(::fsmount(fs.get(), FSMOUNT_CLOEXEC, 0));
        if (!mnt)
            return Outcome{errno, "fsmount", {5, 2}};
        mount_attr attr{};
        attr.attr_set = MOUNT_ATTR_NOSUID;
        if (::mount_setattr(mnt.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
            return Outcome{errno, "mount_setattr", {5, 12}};
        return Outcome{};
    });
    r.line(api.err == 0, "new mount API", refusal(api, c.facts), true, remedy(api, c.facts));
    // openat2 resolves every destination under the new root. Where the kernel answers ENOSYS (a
    // seccomp policy that cannot read its struct, as in another cocoon's sandbox; a kernel before
    // 5.6), cocoon does the same resolution in userspace (base/resolve.h): not needed.
    const Outcome openat2 = in_child([] {
        open_how how{};
        how.flags = O_PATH | O_CLOEXEC;
        how.resolve = RESOLVE_IN_ROOT;
        if (::syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how) < 0)
            return Outcome{errno, "openat2", {5, 6}};
        return Outcome{};
    });
    r.line(openat2.err == 0, "openat2",
           openat2.err == ENOSYS ? refusal(openat2, c.facts) +
                                       ": cocoon resolves paths in userspace instead, with the same guarantees, a few "
                                       "system calls more per path"
                                 : refusal(openat2, c.facts),
           false);
}

// 5. A new procfs, as --proc makes it: in the caller's sandbox's namespaces, by PID 1 of a new PID
// namespace (a procfs shows its mounter's). Under a masked /proc (a container's) Linux refuses it
// in a user namespace: said so, from the mount table (mount/masked_proc.h), as --proc says it.
void check_proc(Report& r, const Caller& c)
{
    const Outcome proc = in_child([&] {
        if (Outcome o = enter(c, CLONE_NEWNS | CLONE_NEWPID, "CLONE_NEWNS | CLONE_NEWPID"); o.err)
            return o;
        return in_child([] {
            UniqueFd fs(::fsopen("proc", FSOPEN_CLOEXEC));
            if (!fs)
                return Outcome{errno, "fsopen(\"proc\")", {5, 2}};
            if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0)
                return Outcome{errno, "fsconfig of a procfs", {5, 2}};
            UniqueFd mnt(
                ::fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
            return mnt ? Outcome{} : Outcome{errno, "fsmount of a procfs", {5, 2}};
        });
    });
    const std::string what = "a new /proc (--proc with a PID namespace)";
    std::string masked;
    if (proc.err == EPERM && (!c.privileged || mount::in_user_namespace()))
        masked = mount::masked_proc_path(sys::read_small(AT_FDCWD, "/proc/self/mountinfo", size_t{4} << 20));
    if (!masked.empty())
        r.line(
            false, what, "refused (EPERM): " + mount::masked_proc_advice(masked), true,
            "run the container with /proc unmasked (Podman: --security-opt unmask=ALL; Docker: --security-opt "
            "systempaths=unconfined; Kubernetes: the pod's securityContext.procMount: Unmasked), or leave out --proc");
    else
        r.line(proc.err == 0, what, refusal(proc, c.facts), true, remedy(proc, c.facts));
}

// 6. A host name in a new UTS namespace (--hostname, which the agent profiles set): the sandbox's
// own to name, so only a filter refuses it (a container's default seccomp profile does).
void check_hostname(Report& r, const Caller& c)
{
    const Outcome uts = in_child([&] {
        if (Outcome o = enter(c, CLONE_NEWUTS, "CLONE_NEWUTS"); o.err)
            return o;
        static constexpr char kName[] = "sandbox";
        if (::sethostname(kName, sizeof kName - 1) < 0)
            return Outcome{errno, "sethostname", {2, 0}};
        return Outcome{};
    });
    r.line(uts.err == 0, "a host name in a new UTS namespace (--hostname)", refusal(uts, c.facts), true,
           remedy(uts, c.facts) + ", or leave out --hostname");
}

// 7. Netlink in a new network namespace (rtnetlink's fallback for lo).
void check_netlink(Report& r, const Caller& c)
{
    const Outcome netlink = in_child([&] {
        if (Outcome o = enter(c, CLONE_NEWNET, "CLONE_NEWNET"); o.err)
            return o;
        UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
        return sock ? Outcome{} : Outcome{errno, "socket(AF_NETLINK)", {2, 2}};
    });
    r.line(netlink.err == 0, "netlink in a new network namespace", refusal(netlink, c.facts), false);
}

// 8. seccomp filters (--seccomp, --add-seccomp-fd, the default policy), and overlayfs where the
// caller's sandboxes run (--overlay and friends).
void check_seccomp_and_overlay(Report& r, const Caller& c)
{
    const Outcome seccomp = in_child([] {
        unsigned action = SECCOMP_RET_ERRNO;
        if (::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0)
            return Outcome{errno, "seccomp(SECCOMP_GET_ACTION_AVAIL)", {4, 14}};
        return Outcome{};
    });
    r.line(seccomp.err == 0, "seccomp filters", refusal(seccomp, c.facts), false);
    const Outcome overlay = in_child([&] {
        if (Outcome o = enter(c, CLONE_NEWNS, "CLONE_NEWNS"); o.err)
            return o;
        UniqueFd fs(::fsopen("overlay", FSOPEN_CLOEXEC));
        // Linux 5.11 allows overlayfs in a user namespace.
        const KernelVersion since = c.privileged ? KernelVersion{5, 2} : KernelVersion{5, 11};
        return fs ? Outcome{} : Outcome{errno, "fsopen(\"overlay\")", since};
    });
    r.line(overlay.err == 0, c.privileged ? "overlayfs" : "overlayfs in a user namespace",
           overlay.err == ENODEV ? "this kernel has no overlayfs (CONFIG_OVERLAY_FS; modprobe overlay)"
                                 : refusal(overlay, c.facts),
           false);
}

// 9. cgroup v2, and whether the caller may make cgroups in its own: what
// the sandbox's cgroup, resource accounting and limits will use (ns/monitor/cgroup.h).
void check_cgroup(Report& r)
{
    const ns::OwnCgroup own = ns::own_cgroup();
    r.line(!own.mount.empty(), "cgroup v2" + (own.mount.empty() ? std::string() : " at " + own.mount),
           "not mounted: resource use is sampled, --memory-max and --pids-max are unavailable", false);
    if (own.mount.empty())
        return;
    const std::string controllers = read_line((own.mount + "/cgroup.controllers").c_str());
    std::string missing;
    for (const char* c : {"memory", "pids"})
        if (!ns::cgroup_offers(own.mount, c))
            missing += std::string(missing.empty() ? "" : " and ") + c;
    r.line(missing.empty(),
           "cgroup v2 memory and pids controllers (this cgroup v2 has: " +
               (controllers.empty() ? std::string("none") : controllers) + ")",
           "no " + missing + ": memory and tasks are sampled, --memory-max and --pids-max are unavailable", false);
    r.line(own.writable, "own cgroup " + own.dir + " writable (a sandbox gets a cgroup of its own below it)",
           "not writable: a sandbox stays in it, which the agent cannot write either; give --cgroup-parent "
           "DIR, or run under systemd-run --user --scope -p Delegate=yes",
           false);
    r.line(own.nsdelegate, "cgroup v2 mounted with nsdelegate (PID 1 is out of the agent's cgroup reach)",
           "no nsdelegate: an unprivileged caller's agent can move PID 1 into its own cgroup (root: "
           "--host-user closes it)",
           false);
}

// Security: a root caller's sandbox acts on the host as root unless --host-user names another
// user: its uid 0 is the host's (a user namespace maps it to itself), and owns root's files,
// capabilities or not. bwrap's rule, which cocoon keeps, adds root's capabilities unless
// --cap-drop (a root caller with CAP_SYS_ADMIN; one without has none unless --cap-add).
void check_caller(Report& r, const Caller& c)
{
    const std::string files = "without --host-user the sandbox's uid 0 is the host's, so the command reads root's "
                              "files (/etc/shadow through a read-only /etc) and, from a nested user namespace, "
                              "writes root's cgroup files, whatever its capabilities";
    if (c.privileged)
        r.line(false, "an unprivileged caller",
               "as root, pass --host-user USER (an unprivileged user made for the agent) and --cap-drop ALL: " + files +
                   "; without --cap-drop ALL it keeps root's capabilities too (SECURITY.md, \"A root caller's uid 0 "
                   "is the host's\")",
               false);
    else
        r.line(!c.root, "an unprivileged caller",
               "as root, pass --host-user USER (an unprivileged user made for the agent): " + files +
                   " (SECURITY.md, \"A root caller's uid 0 is the host's\")",
               false);
}

}  // namespace

int run_check()
{
    Report r;
    const Caller c = read_caller();
    say_mode(c);
    check_user_namespaces(r, c);
    check_namespaces(r, c);
    check_mount_api(r, c);
    check_proc(r, c);
    check_hostname(r, c);
    check_netlink(r, c);
    check_seccomp_and_overlay(r, c);
    check_cgroup(r);
    check_caller(r, c);
    check_node(r);
    if (r.runnable) {
        std::printf("a default sandbox can run here\n");
        return 0;
    }
    std::string change;
    for (const std::string& remedy : r.remedies)
        change += (change.empty() ? "" : "; ") + remedy;
    std::printf("a default sandbox cannot run here; to run one, change: %s\n", change.c_str());
    return 1;
}

}  // namespace cocoon::tools
