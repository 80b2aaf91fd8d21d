// The sandbox's own cgroup v2: PARENT/cocoon-PID, where PARENT is
// --cgroup-parent, else the caller's own cgroup wherever the caller may make
// cgroups in it; the command in a leaf below (PARENT/cocoon-PID/command), the
// relay worker in another (PARENT/cocoon-PID/relay). Where it was asked for (--cgroup-parent, a
// limit, a report) the first process is cloned into it (CLONE_INTO_CGROUP), so every process of
// the sandbox is in it from its first instruction; limits (--memory-max, --pids-max) are set
// before that, and the report reads cpu.stat, memory.peak and pids.peak (ARCHITECTURE.md,
// "Resource report"). Unasked, the monitor makes it while set-up runs and PID 1 stays in the
// caller's cgroup; the command is cloned into its leaf either way.
// Runs in: caller, monitor, setup, pid2: the caller looks up and makes an asked cgroup; the
//  monitor an unasked one; set-up closes its fd; PID 2 joins its leaf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/sys_error.h"
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

// Where cgroup2 is mounted and the caller's own cgroup in it, from statmount(2) or
// /proc/self/mountinfo, and /proc/self/cgroup; empty strings when there is no cgroup2 mount.
// For --check and for SandboxCgroup::make.
struct OwnCgroup {
    std::string mount;  // e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified
    std::string dir;  // the caller's cgroup as a path under mount
    bool writable = false;  // the caller may make cgroups in it and move processes there
    // Mounted with nsdelegate: the kernel then refuses any move between
    // cgroups that a writer's cgroup namespace does not both show.
    bool nsdelegate = false;
};
OwnCgroup own_cgroup();

// The mount and dir of own_cgroup() from the texts of /proc/self/mountinfo and
// /proc/self/cgroup (delegated stays false); for tests.
OwnCgroup parse_own_cgroup(const std::string& mountinfo, const std::string& cgroup);
// own_cgroup()'s mount and dir found its quick way, statmount(2) on /sys/fs/cgroup or
// /sys/fs/cgroup/unified (nullopt where that cannot answer: before Linux 6.11, or cgroup2 mounted
// elsewhere), and its slow way, /proc/self/mountinfo; writable stays false. For tests.
std::optional<OwnCgroup> own_cgroup_by_statmount();
OwnCgroup own_cgroup_by_mountinfo();

// The number after `key` and blanks at the start of a line of a flat keyed file: cgroup v2's
// ("user_usec 5" of cpu.stat, "populated 1" of cgroup.events) or /proc's ("Pss:  8 kB" of
// smaps_rollup: 8); with an empty key, that of a file of one number (memory.peak). nullopt where
// no line has one (a missing file is an empty text). Pure.
std::optional<uint64_t> keyed_number(std::string_view text, std::string_view key);

// Whether the cgroup v2 directory dir lists controller in its
// cgroup.controllers (what its children may be given).
bool cgroup_offers(const std::string& dir, const std::string& controller);

// The most cgroups a sandbox may make below its own (cgroup.max.descendants).
constexpr int kMaxDescendants = 64;
// The leaf below the sandbox's cgroup that holds the command (and all it
// starts) while PID 1 stays in the sandbox's cgroup above it.
constexpr const char* kCommandCgroup = "command";
// The leaf beside it that the relay worker is cloned into (ns/monitor/relay_worker.h), so
// the CPU and memory the sandbox makes it spend count against the sandbox's.
constexpr const char* kWorkerCgroup = "relay";

// "cocoon-PID" (or "cocoon-PID-N"): the name of a sandbox's cgroup, which the
// next sandbox under the same parent removes, with what is below it, once it
// holds no process and is a minute old (its cocoon was killed). Not whether
// PID lives: the PID is the monitor's in its own PID namespace, which a
// container's cocoon does not share (its cgroups are all "cocoon-1").
bool is_sandbox_cgroup_name(const std::string& name);

// In PID 2, before it runs the command, where the sandbox has a cgroup: moves itself into the
// command's leaf through procs_fd (SandboxCgroup::command_procs_fd, inherited) unless it is -1
// (PID 1 cloned it there), then, with new_ns (the sandbox has a cgroup namespace), makes the leaf
// the root of a cgroup namespace of its own.
void enter_command_cgroup(int procs_fd, bool has_cgroup, bool new_ns);

class SandboxCgroup {
public:
    SandboxCgroup() = default;
    SandboxCgroup(SandboxCgroup&&) = default;
    SandboxCgroup& operator=(SandboxCgroup&&) = default;
    ~SandboxCgroup();

    // The cgroup for a sandbox, or none (fd() < 0) where the caller may not
    // make one in its own cgroup and gave no --cgroup-parent (resource use
    // is sampled then). Throws SysError (step "cgroup", the file as path) or
    // UsageError naming the option when --cgroup-parent is unusable or a limit
    // cannot be set; nothing is left behind then.
    // log_prefix starts the warning line of a cgroup that could not be removed.
    // report: a --json-status-fd report was asked for. worker: the relay
    // worker will run (--relay, --egress): its leaf is made too.
    static SandboxCgroup make(const CgroupOptions& options, bool report, std::string log_prefix = "",
                              bool worker = false);
    // Whether the run asked for a cgroup (--cgroup-parent, a limit, a report): it must then hold
    // every process of the sandbox, set-up's included, and ends what is left in it.
    static bool asked(const CgroupOptions& options, bool report)
    {
        return options.parent || options.has_limit() || report;
    }

    // The sandbox's cgroup, which the first process is cloned into when it
    // is PID 1, and the command's leaf below it, which the first process is
    // cloned into when it is the command; -1 without a cgroup.
    int fd() const { return m_dir.get(); }
    int command_fd() const { return m_command.get(); }
    // The relay worker's leaf, which the monitor clones it into; -1 without a
    // cgroup or a worker.
    int worker_fd() const { return m_worker.get(); }
    // The leaf's cgroup.procs (O_WRONLY), for PID 2 to move itself into the
    // leaf before it runs the command where PID 1 could not clone it there: enter_command_cgroup.
    int command_procs_fd() const { return m_command_procs.get(); }
    // Whether an agent may move PID 1 out of the sandbox's cgroup (ns/monitor/command_watch.h): there is
    // one, and cgroup2 is not known to be mounted with nsdelegate (a --cgroup-parent's mount is
    // not looked up: it is watched).
    bool pid1_movable() const { return m_dir.valid() && !m_nsdelegate; }

    // After PID 1 was reaped: kills whatever is still in the cgroup or the
    // cgroups below it (processes a sandbox without a PID namespace left)
    // and waits, a second at most, until it is empty, so its figures are
    // final. A cgroup nobody asked for is left to what runs in it.
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
        m_worker.reset();
        // PID 1's, to clone PID 2 into the leaf, or PID 2's, to move itself there; O_CLOEXEC,
        // and PID 1 closes them after the fork.
        (void)m_command.release();
        (void)m_command_procs.release();
    }

private:
    UniqueFd m_parent, m_dir, m_command, m_command_procs, m_worker;
    std::string m_name, m_path;
    Warnings m_warnings;  // a cgroup that could not be removed
    bool m_emptied = false;
    bool m_kill_leftovers = false;  // asked for: --cgroup-parent, a limit, a report
    bool m_left_running = false;  // processes outlived the sandbox in it: not removed
    bool m_nsdelegate = false;  // cgroup2 is mounted with nsdelegate
};

}  // namespace cocoon::ns
