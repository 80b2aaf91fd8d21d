// The sandbox's own cgroup v2: PARENT/cocoon-PID, where PARENT is
// --cgroup-parent, else the caller's own cgroup when it was delegated to the
// caller. The first process is cloned into it (CLONE_INTO_CGROUP), so every
// process of the sandbox is in it from its first instruction; limits
// (--memory-max, --pids-max) are set before that, and the report reads
// cpu.stat, memory.peak and pids.peak. See ARCHITECTURE.md, "Resource report".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/unique_fd.h"

namespace cocoon::ns {

struct Usage;

// --cgroup-parent, --memory-max, --pids-max as parsed.
struct CgroupOptions {
    std::optional<std::string> parent;  // a cgroup v2 directory cocoon may write
    std::optional<uint64_t> memory_max;  // bytes, memory.max
    std::optional<uint64_t> pids_max;  // pids.max
    bool has_limit() const { return memory_max || pids_max; }
};

// Where cgroup2 is mounted and the caller's own cgroup in it, from
// /proc/self/mountinfo and /proc/self/cgroup; empty strings when there is
// no cgroup2 mount. For --check and for SandboxCgroup::make.
struct OwnCgroup {
    std::string mount;  // e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified
    std::string dir;  // the caller's cgroup as a path under mount
    bool delegated = false;  // user.delegate or trusted.delegate is "1", and it is writable
};
OwnCgroup own_cgroup();

// The mount and dir of own_cgroup() from the texts of /proc/self/mountinfo and
// /proc/self/cgroup (delegated stays false); for tests.
OwnCgroup parse_own_cgroup(const std::string& mountinfo, const std::string& cgroup);

// Whether the cgroup v2 directory dir lists controller in its
// cgroup.controllers (what its children may be given).
bool cgroup_offers(const std::string& dir, const std::string& controller);

// The most cgroups a sandbox may make below its own (cgroup.max.descendants).
constexpr int kMaxDescendants = 64;

// "cocoon-PID" (or "cocoon-PID-N") for a cgroup left by a cocoon that was
// killed, whose PID is gone: removed, with what is below it, when the next
// sandbox is made under the same parent.
bool is_stale_cgroup_name(const std::string& name);

class SandboxCgroup {
public:
    SandboxCgroup() = default;
    SandboxCgroup(SandboxCgroup&&) = default;
    SandboxCgroup& operator=(SandboxCgroup&&) = default;
    ~SandboxCgroup();

    // The cgroup for a sandbox, or none (fd() < 0): none is wanted when
    // there are no limits and no report, none is possible without
    // --cgroup-parent and a delegated own cgroup (resource use is sampled
    // then). Throws UsageError naming the option when --cgroup-parent is
    // unusable or a limit cannot be set; nothing is left behind then.
    // log_prefix starts the warning line of a cgroup that could not be removed.
    static SandboxCgroup make(const CgroupOptions& options, bool report, std::string log_prefix = "");

    int fd() const { return m_dir.get(); }
    const std::string& path() const { return m_path; }

    // After PID 1 was reaped: kills whatever is still in the cgroup or the
    // cgroups below it (processes a sandbox without a PID namespace left)
    // and waits, a second at most, until it is empty, so its figures are
    // final.
    void empty_out();

    // The cgroup's figures replace the sampled ones it has: CPU from
    // cpu.stat, memory.peak and pids.peak where those controllers run here.
    void account(Usage& usage) const;

    // In a child of the monitor: closes the fds, leaving the cgroup to the
    // monitor (the destructor then does nothing).
    void close_in_child()
    {
        m_dir.reset();
        m_parent.reset();
    }

private:
    UniqueFd m_parent, m_dir;
    std::string m_name, m_path, m_log_prefix;
    bool m_emptied = false;
};

}  // namespace cocoon::ns
