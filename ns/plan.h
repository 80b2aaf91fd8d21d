// The launch's vocabulary: what a sandbox is made of, as plain data. The
// caller's planner (tools/cocoon/plan.h), before the clone, fills a LaunchPlan from the parsed options,
// tools/cocoon/entry.cc takes the caller's fds into CallerFds, and launch()
// (ns/launch.h) runs the two; every process of the launch reads them.
// Runs in: caller, monitor, setup, pid1, pid2: the caller makes the plan; the monitor and the
//  sandbox's processes read it.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "mount/plan.h"
#include "ns/setup/caps.h"
#include "ns/monitor/cgroup.h"
#include "ns/monitor/login_file.h"
#include "relay/host_socket.h"

namespace cocoon::ns {

// --relay PORT SOCKET: 127.0.0.1:PORT and [::1]:PORT inside, relayed to the
// host's Unix socket SOCKET (the one found there at start).
struct RelayEndpoint {
    uint16_t port = 0;
    std::string socket;
};

// --egress PORT: an HTTP proxy on 127.0.0.1:PORT and [::1]:PORT inside, run by
// the relay worker, reaching only what --egress-allow names (relay/egress.h).
struct EgressEndpoint {
    uint16_t port = 0;
    std::vector<std::string> allow;  // --egress-allow patterns, checked by make_launch_plan
    // Transparent egress (relay/dns.h): the ports the name rules allow, but for --egress's and
    // the --relay ports (their listeners are on 127.0.0.1 already); made by make_launch_plan.
    std::vector<uint16_t> transparent_ports = {};
};

// The options for the command's process and the sandbox's life, as parsed
// (tools/cocoon/options.h) and as launched: make_launch_plan copies them whole.
struct ProcessOptions {
    std::optional<std::string> chdir;  // --chdir; else the caller's cwd, $HOME, then "/"
    std::optional<std::string> hostname;  // --hostname, needs CLONE_NEWUTS
    std::optional<std::string> argv0;  // --argv0: what the command sees as argv[0]
    bool new_session = false;  // --new-session
    bool die_with_parent = false;  // --die-with-parent
    bool as_pid_1 = false;  // --as-pid-1
    bool forward_signals = false;  // --forward-signals
    std::optional<double> kill_after;  // --kill-after SECONDS
    bool disable_userns = false;  // --disable-userns: the command runs in a nested, full user namespace
    bool assert_userns_disabled = false;  // --assert-userns-disabled: fail if the command could make one
    bool default_seccomp = true;  // the built-in policy (ns/setup/seccomp_policy.h); --no-default-seccomp
    std::vector<std::string> lock_files;  // --lock-file: read-locked by PID 1, paths in the new root
    std::vector<RelayEndpoint> relays;  // --relay, needs CLONE_NEWNET
    std::optional<EgressEndpoint> egress;  // --egress, needs CLONE_NEWNET
    std::vector<LoginFile> login_files;  // --login-file: DEST's directory is a tmpfs op in the mount plan
    CgroupOptions cgroup;  // --cgroup-parent, --memory-max, --pids-max
};

// The caller's fds as the options name them (-1: not given). Numbers only:
// tools/cocoon/entry.cc takes each over into CallerFds before anything uses it.
struct FdNumbers {
    int info = -1;  // --info-fd
    int json_status = -1;  // --json-status-fd
    int egress_log = -1;  // --egress-log
    int sync = -1;  // --sync-fd
    int block = -1;  // --block-fd
    int userns_block = -1;  // --userns-block-fd
    int userns = -1;  // --userns
    int userns2 = -1;  // --userns2
    int pidns = -1;  // --pidns
};

// One caller fd, owned, and the words that named it ("--block-fd 5") for
// messages: a copy (see tools/cocoon/entry.cc) has another number.
struct CallerFd {
    UniqueFd fd;
    std::string name;
    explicit operator bool() const { return fd.valid(); }
    int get() const { return fd.get(); }
};

// The caller's fds that the monitor keeps: it writes the reports, and
// relays to the host sockets pinned at start.
struct MonitorFds {
    UniqueFd info;  // --info-fd
    UniqueFd json_status;  // --json-status-fd
    UniqueFd egress_log;  // --egress-log
    // --relay: each SOCKET opened before the sandbox exists, in command-line
    // order (relay/host_socket.h); the first process closes its copies.
    std::vector<std::shared_ptr<const relay::HostSocket>> relay_sockets;
};

// The caller's fds that the sandbox uses. Each has one user; the monitor
// closes its copies once the first process exists. Of those options name,
// only `sync` ever reaches the command, and only with --as-pid-1 (where the
// command is PID 1); `inherited` are the ones no option names.
struct SandboxFds {
    CallerFd sync;  // --sync-fd: held by PID 1 while the sandbox runs
    CallerFd block;  // --block-fd: waited on by the first process after setup
    CallerFd userns_block;  // --userns-block-fd: waited on instead of writing id maps
    CallerFd userns;  // --userns: joined by the helper before the namespaces are made
    CallerFd pidns;  // --pidns: joined by the helper before the first process is made
    CallerFd userns2;  // --userns2: joined by the first process after setup
    mount::Fds mount;  // --file, --bind-data, --bind-fd, ...: consumed by mount::apply
    // Every fd above 2 that the caller left open without FD_CLOEXEC and no
    // option names (none with --close-fds): a handover, as under bwrap. The
    // command gets each at its number; PID 1 closes its copies.
    std::vector<UniqueFd> inherited;
};

// Every caller fd cocoon uses, owned from tools/cocoon/entry.cc on.
struct CallerFds {
    MonitorFds monitor;
    SandboxFds sandbox;
};

// Everything the sandbox needs, decided before any process is made, and
// const from then on (runtime state lives in ns/launch_context.h's LaunchContext).
struct LaunchPlan {
    unsigned long long clone_flags = 0;  // CLONE_NEW* (CLONE_NEWNS always)
    uid_t uid = 0, gid = 0;  // inside, when CLONE_NEWUSER
    uid_t real_uid = 0, real_gid = 0;  // the host ids mapped to uid/gid: the caller's, or --host-user's
    // --host-user (a root caller): real_uid/real_gid are another user's. The
    // monitor writes the id maps, and the first process takes those ids for
    // good once it has opened the bind sources (ns/host_user.h).
    bool host_user = false;
    std::optional<uid_t> switch_uid;  // --uid with --userns: setresuid inside it
    std::optional<gid_t> switch_gid;  // --gid with --userns: setresgid inside it
    mount::Plan mounts;
    std::vector<std::string> env;
    std::string host_cwd;
    CapSet caps = 0;
    bool ambient_caps = false;
    ProcessOptions process;
    std::vector<std::vector<sock_filter>> seccomp;  // loaded in order, last step before exec
    // PID 1 forks the command and stays to reap it (a PID namespace, or
    // --sync-fd/--lock-file, which need a holder that outlives the exec).
    bool fork_command = false;
    // With fork_command: PID 1 re-executes itself once set up, so that its mm
    // belongs to the sandbox's user namespace and the caller (its owner) may
    // open PID 1's /proc/PID/ns to join the sandbox (--info-fd's child-pid).
    // Only when the command gets no CAP_SYS_PTRACE in that namespace.
    bool reexec_pid1 = false;
    std::vector<std::string> argv;  // argv[0] is the program execvp looks for
    std::string log_prefix;  // --level-prefix: "<4>" before the relay's warnings
};

}  // namespace cocoon::ns
