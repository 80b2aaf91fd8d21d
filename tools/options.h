// The parsed command line: typed values, filesystem and environment edits in
// command-line order. Made by parse_args (tools/cli.cc); pure data.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "mount/plan.h"
#include "ns/caps.h"
#include "ns/env.h"
#include "ns/launch.h"

namespace cocoon::tools {

struct Options {
    bool help = false;
    bool version = false;

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
    std::optional<std::string> hostname;
    std::optional<std::string> chdir;
    bool new_session = false;
    bool die_with_parent = false;
    bool as_pid_1 = false;
    bool forward_signals = false;
    std::optional<double> kill_after;
    std::vector<ns::RelayEndpoint> relays;
    int info_fd = -1;
    int json_status_fd = -1;

    std::vector<mount::Op> mounts;
    // Parse state: --perms and --size wait here for the option they modify
    // (bwrap's rule: the very next one). Empty once parse_args returns.
    std::optional<mode_t> next_perms;
    std::optional<unsigned long long> next_size;
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
    bool has_user_ns = true;
    bool has_cgroup_ns = true;
};

// args excludes argv[0]. Throws UsageError with a one-line message.
Options parse_args(const std::vector<std::string>& args);

// The option table as --help prints it.
std::string usage(const std::string& prog);

} // namespace cocoon::tools
