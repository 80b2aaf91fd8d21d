// The parsed command line: typed values, filesystem and environment edits in
// command-line order. Made by parse_args (tools/cocoon/cli.cc); pure data.
// Runs in: caller.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mount/plan.h"
#include "ns/setup/caps.h"
#include "ns/env.h"
#include "ns/plan.h"

namespace cocoon::tools {

// One compiled seccomp program as read from its fd (--seccomp or
// --add-seccomp-fd); make_launch_plan checks its size.
struct SeccompInput {
    std::string option;  // "--seccomp FD" or "--add-seccomp-fd FD", for errors
    int fd = -1;
    std::string bytes;  // filled by parse_args from the fd
};

struct Options {
    bool help = false;
    bool version = false;
    bool check = false;  // --check
    bool dry_run = false;  // --dry-run
    std::string agent;  // --agent PROFILE, spliced into the options by parse_args ("" without)
    // --dry-run: the option words as expanded (the profile's in place of --agent).
    std::vector<std::string> option_words;

    bool unshare_user = false;
    bool unshare_user_try = false;
    bool unshare_pid = false;
    bool unshare_net = false;
    bool unshare_ipc = false;
    bool unshare_uts = false;
    bool unshare_cgroup = false;
    bool unshare_cgroup_try = false;

    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    std::optional<std::string> host_user;  // --host-user USER[:GROUP], as given
    ns::ProcessOptions process;  // copied whole into the plan
    ns::FdNumbers fds;  // taken over by tools/cocoon/entry.cc
    std::vector<SeccompInput> seccomp;  // --seccomp (the last one) or every --add-seccomp-fd
    bool level_prefix = false;  // --level-prefix
    bool no_follow_sources = false;  // --no-follow-sources
    bool close_fds = false;  // --close-fds: no inherited fd but 0-2 and the options' reaches the command

    // Said on stderr, prefixed like errors, when the options are used (bwrap
    // warns about a repeated --seccomp, for one).
    std::vector<std::string> warnings;

    std::vector<mount::InputOp> mounts;
    // Parse state: --perms and --size wait here for the option they modify
    // (bwrap's rule: the very next one). Empty once parse_args returns.
    std::optional<mode_t> next_perms;
    std::optional<unsigned long long> next_size;
    std::vector<std::string> next_egress_allow;  // --egress-allow before --egress
    // --overlay-src paths wait here for the overlay option that uses them.
    std::vector<std::string> next_overlay_srcs;
    std::vector<ns::EnvOp> env;
    std::vector<ns::CapOp> caps;

    std::vector<std::string> command;
};

// What the plan depends on besides the options, read from the host once.
struct HostFacts {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<std::string> environ;
    std::string cwd;
    ns::CapSet permitted_caps = ns::kAllCaps;  // the caller's permitted set
    // Its effective set: a root caller without CAP_SYS_ADMIN there gets a user namespace.
    ns::CapSet effective_caps = ns::kAllCaps;
    bool has_user_ns = true;
    bool has_cgroup_ns = true;
    // The terminal on stdout (ttyname(1)), if any: --dev binds it at console.
    std::optional<std::string> stdout_tty;
    // /etc/passwd and /etc/group, read only for a root caller's --host-user.
    std::string passwd, group;
};

// Reads an fd the caller handed over to EOF and closes it (--args,
// --seccomp, --add-seccomp-fd). Throws SysError(errno, context).
using FdReader = std::function<std::string(int fd, const std::string& context)>;

// The real reader: read(2) to EOF, at most 16 MiB, then close(2).
std::string read_fd(int fd, const std::string& context);

// args excludes argv[0]. Throws UsageError with a one-line message. The fds
// of --args and the seccomp options are read (and closed) through `read`;
// everything else is pure.
Options parse_args(const std::vector<std::string>& args, const FdReader& read = read_fd);

// Whether --level-prefix is among the options before the command (not in
// --args files, which are not read here). Used to prefix errors that
// parse_args itself throws; pure.
bool level_prefix_requested(const std::vector<std::string>& args);

// The option table as --help prints it.
std::string usage(const std::string& prog);

}  // namespace cocoon::tools
