// cocoon --check: what this host allows a sandbox, one line per feature, each
// "no" with what to do about it. Every probe runs in a short-lived child, so
// nothing of it touches cocoon's own process or stays on the host.
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
#include <sys/wait.h>
#include <unistd.h>

#include <linux/netlink.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

#include "base/sys.h"
#include "base/unique_fd.h"
#include "ns/monitor/cgroup.h"

namespace cocoon::tools {
namespace {

// Runs probe in a forked child; its exit code is 0 for yes, else an errno.
int in_child(const std::function<int()>& probe)
{
    pid_t pid = ::fork();
    if (pid < 0)
        return errno;
    if (pid == 0)
        ::_exit(probe());
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
}

// Maps the caller's uid and gid to root in the user namespace just made.
bool map_ids(uid_t uid, gid_t gid)
{
    try {
        sys::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n");
        sys::write_file("/proc/self/setgroups", "deny");
        sys::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n");
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

// A new user namespace (when not root) plus `more`; 0 or an errno.
int enter(int more)
{
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    const int user = uid == 0 ? 0 : CLONE_NEWUSER;
    if (::unshare(user | more) < 0)
        return errno;
    if (user && !map_ids(uid, gid))
        return EPERM;
    return 0;
}

std::string read_line(const char* path)
{
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

struct Report {
    bool runnable = true;
    void line(bool ok, const std::string& what, const std::string& fix, bool needed)
    {
        std::printf("%-4s %s%s\n", ok ? "yes" : "no", what.c_str(), ok || fix.empty() ? "" : (": " + fix).c_str());
        if (!ok && needed)
            runnable = false;
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

// 1. User namespaces: needed by every unprivileged caller.
void check_user_namespaces(Report& r, bool root)
{
    const std::string max_userns = read_line("/proc/sys/user/max_user_namespaces");
    const std::string debian_knob = read_line("/proc/sys/kernel/unprivileged_userns_clone");
    const std::string apparmor_knob = read_line("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    int userns = in_child([] { return ::unshare(CLONE_NEWUSER) < 0 ? errno : 0; });
    std::string fix;
    if (max_userns == "0")
        fix = "user.max_user_namespaces is 0 (sysctl -w user.max_user_namespaces=15000)";
    else if (debian_knob == "0")
        fix = "kernel.unprivileged_userns_clone is 0 (sysctl -w kernel.unprivileged_userns_clone=1)";
    else if (apparmor_knob == "1")
        fix = "AppArmor restricts them (kernel.apparmor_restrict_unprivileged_userns=1): install the "
              "cocoon profile (README, \"AppArmor\")";
    else
        fix = std::strerror(userns);
    r.line(userns == 0, "user namespaces", fix, !root);
    if (!apparmor_knob.empty())
        r.line(apparmor_knob != "1" || userns == 0, "AppArmor allows cocoon user namespaces",
               "install the cocoon profile (README, \"AppArmor\")", !root);
}

// 2. The namespaces --unshare-all asks for, made as the caller would.
void check_namespaces(Report& r)
{
    int all = in_child([] {
        return enter(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP);
    });
    r.line(all == 0, "mount, PID, network, IPC, UTS and cgroup namespaces", all ? std::string(std::strerror(all)) : "",
           true);
}

// 3. The new mount API (all of it by Linux 5.12), and openat2.
void check_mount_api(Report& r)
{
    int api = in_child([] {
        if (int err = enter(CLONE_NEWNS))
            return err;
        UniqueFd fs(::fsopen("tmpfs", FSOPEN_CLOEXEC));
        return fs ? 0 : errno;
    });
    r.line(api == 0, "new mount API", api ? "needs Linux 5.12 or later (" + std::string(std::strerror(api)) + ")" : "",
           true);
    // openat2 resolves every destination under the new root. Where the kernel answers ENOSYS (a
    // seccomp policy that cannot read its struct, as in another cocoon's sandbox; a kernel before
    // 5.6), cocoon does the same resolution in userspace (base/resolve.h): not needed.
    int openat2 = in_child([] {
        open_how how{};
        how.flags = O_PATH | O_CLOEXEC;
        how.resolve = RESOLVE_IN_ROOT;
        return ::syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how) < 0 ? errno : 0;
    });
    r.line(openat2 == 0, "openat2",
           openat2 == ENOSYS ? "answered ENOSYS (a seccomp filter, or Linux before 5.6): cocoon resolves paths in "
                               "userspace instead, with the same guarantees, a few system calls more per path"
                             : std::strerror(openat2),
           false);
}

// 4. Netlink in a new network namespace (rtnetlink's fallback for lo).
void check_netlink(Report& r)
{
    int netlink = in_child([] {
        if (int err = enter(CLONE_NEWNET))
            return err;
        UniqueFd sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
        return sock ? 0 : errno;
    });
    r.line(netlink == 0, "netlink in a new network namespace", netlink ? std::strerror(netlink) : "", false);
}

// 5. seccomp filters (--seccomp, --add-seccomp-fd, the default policy).
void check_seccomp(Report& r)
{
    int seccomp = in_child([] {
        unsigned action = SECCOMP_RET_ERRNO;
        return ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0 ? errno : 0;
    });
    r.line(seccomp == 0, "seccomp filters", seccomp ? "the kernel lacks CONFIG_SECCOMP_FILTER" : "", false);
}

// 6. overlayfs where the caller's sandboxes run (--overlay and friends).
void check_overlay(Report& r, bool root)
{
    int overlay = in_child([] {
        if (int err = enter(CLONE_NEWNS))
            return err;
        UniqueFd fs(::fsopen("overlay", FSOPEN_CLOEXEC));
        return fs ? 0 : errno;
    });
    r.line(overlay == 0, root ? "overlayfs" : "overlayfs in a user namespace",
           overlay ? "needs overlayfs (Linux 5.11 or later for user namespaces): " + std::string(std::strerror(overlay))
                   : "",
           false);
}

// 7. cgroup v2, and whether the caller may make cgroups in its own: what
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
// --cap-drop.
void check_caller(Report& r, bool root)
{
    r.line(!root, "an unprivileged caller",
           "as root, pass --host-user USER (an unprivileged user made for the agent) and --cap-drop ALL: "
           "without --host-user the sandbox's uid 0 is the host's, so the command reads root's files "
           "(/etc/shadow through a read-only /etc) and, from a nested user namespace, writes root's cgroup "
           "files, whatever its capabilities; without --cap-drop ALL it keeps root's capabilities too "
           "(SECURITY.md, \"A root caller's uid 0 is the host's\")",
           false);
}

}  // namespace

int run_check()
{
    Report r;
    const bool root = ::getuid() == 0;
    check_user_namespaces(r, root);
    check_namespaces(r);
    check_mount_api(r);
    check_netlink(r);
    check_seccomp(r);
    check_overlay(r, root);
    check_cgroup(r);
    check_caller(r, root);
    check_node(r);
    std::printf("%s\n", r.runnable ? "a default sandbox can run here" : "a default sandbox cannot run here");
    return r.runnable ? 0 : 1;
}

}  // namespace cocoon::tools
