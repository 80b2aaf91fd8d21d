// The launch: one plan, one clone, one setup sequence in the sandbox.
// launch() runs in the monitor (cocoon's own process, outside the sandbox).
#pragma once

#include <linux/filter.h>
#include <sched.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mount/plan.h"
#include "ns/caps.h"

namespace cocoon::ns {

// --relay PORT SOCKET: 127.0.0.1:PORT and [::1]:PORT inside, relayed to the
// host's Unix socket SOCKET.
struct RelayEndpoint {
    uint16_t port = 0;
    std::string socket;
};

// Everything the sandbox needs, decided before any process is made.
struct LaunchPlan {
    unsigned long long clone_flags = 0;  // CLONE_NEW* (CLONE_NEWNS always)
    uid_t uid = 0, gid = 0;  // inside, when CLONE_NEWUSER
    uid_t real_uid = 0, real_gid = 0;  // the caller's, mapped to uid/gid
    mount::Plan mounts;
    std::vector<std::string> env;
    std::optional<std::string> chdir;  // else the caller's cwd, $HOME, then "/"
    std::string host_cwd;
    std::optional<std::string> hostname;
    CapSet caps = 0;
    bool ambient_caps = false;
    bool new_session = false;
    bool die_with_parent = false;
    bool as_pid_1 = false;
    bool forward_signals = false;  // --forward-signals
    std::optional<double> kill_after;  // --kill-after SECONDS
    std::vector<RelayEndpoint> relays;  // --relay, needs CLONE_NEWNET
    int info_fd = -1;  // --info-fd
    int json_status_fd = -1;  // --json-status-fd
    int sync_fd = -1;  // --sync-fd: held by PID 1 (the command with --as-pid-1)
    int block_fd = -1;  // --block-fd: waited on after setup, before the command
    int userns_block_fd = -1;  // --userns-block-fd: waited on instead of writing id maps
    int userns_fd = -1;  // --userns: joined before the other namespaces are made
    int pidns_fd = -1;  // --pidns: joined before the first process is made
    int userns2_fd = -1;  // --userns2: joined after setup, before the command
    std::optional<uid_t> switch_uid;  // --uid with --userns: setresuid inside it
    std::optional<gid_t> switch_gid;  // --gid with --userns: setresgid inside it
    std::vector<std::string> lock_files;  // --lock-file: read-locked by PID 1, paths in the new root
    std::vector<std::vector<sock_filter>> seccomp;  // loaded in order, last step before exec
    bool disable_userns = false;  // --disable-userns: the command runs in a nested, full user namespace
    bool assert_userns_disabled = false;  // --assert-userns-disabled: fail if the command could make one
    bool reaper = false;  // PID 1 forks the command and waits for it
    bool terminal_foreground = false;  // set by launch(): cocoon owned the terminal
    std::optional<cpu_set_t> cpu_affinity;  // set by launch(): the caller's, to restore
    std::vector<std::string> argv;  // argv[0] is the program execvp looks for
    std::optional<std::string> argv0;  // --argv0: what the command sees as argv[0]
    std::string log_prefix;  // --level-prefix: "<4>" before the relay's warnings
};

// Runs the sandbox and returns cocoon's exit code: the command's, or 128+N if
// signal N killed it. Throws (SysError/UsageError) when the sandbox could not
// be set up; nothing of it is left running then.
int launch(const LaunchPlan& plan);

}  // namespace cocoon::ns
