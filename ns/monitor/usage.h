// What a sandbox used, measured by the monitor from outside: wall time, CPU
// of every process of the sandbox, peak memory of the sandbox as a whole, its
// peak number of tasks and the peak of what its tmpfs mounts hold. This host path samples /proc (no cgroup v2 with
// memory and pids controllers here); see ARCHITECTURE.md, "Resource report".
// Runs in: caller, monitor: the caller starts the sampler's clock; the monitor samples.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "ns/monitor/usage_cpu.h"
#include "ns/monitor/usage_vm.h"

namespace cocoon::ns {

// The processes of the cgroup at dir and of the cgroups below it, breadth first. Bounded:
// the sandbox may make kMaxDescendants cgroups below its own (cgroup.max.descendants), and
// this reads no more than twice that many (a cgroup the agent could not have made is not
// there to read). cgroupfs holds no links; O_NOFOLLOW all the same.
// The sampler lists them each tick; SandboxCgroup::empty_out kills them where the kernel has no
// cgroup.kill. False when dir cannot be reopened.
bool cgroup_pids(int dir, std::vector<pid_t>& out);

struct Usage {
    uint64_t wall_us = 0;
    uint64_t cpu_user_us = 0;
    uint64_t cpu_system_us = 0;
    uint64_t memory_peak_bytes = 0;
    uint64_t pids_peak = 0;
    // The peak, over the samples and the end, of the bytes used in the tmpfs
    // mounts set-up made (the root, /dev and /dev/shm, --tmpfs, --fresh-home,
    // the login files' and hidden ones): memory that no process maps need
    // not show in memory_peak_bytes.
    uint64_t tmpfs_peak_bytes = 0;
    // The relay worker's CPU (--relay, --egress), user and system: part of cpu_*_us where the
    // sandbox has a cgroup (the worker runs in it) and where it has none (the monitor reaps it
    // before the report).
    std::optional<uint64_t> relay_worker_cpu_us;
    const char* accounting = "sampled";
};

class UsageMeter {
public:
    // Starts the clock and takes the baseline of the monitor's reaped
    // children (getrusage(RUSAGE_CHILDREN)): call before the sandbox exists.
    UsageMeter();

    // Adds one sample of the processes below (and including) pid1: the sum of
    // their proportional set sizes (resident sizes where /proc refuses PSS)
    // and their task count. A few /proc reads per process and thread, and a
    // walk of each process's mappings (PSS): what the sandbox holds sets the
    // cost, so the next sample waits for next_interval().
    // cgroup: the sandbox's cgroup directory (SandboxCgroup::fd()), whose cgroup.procs files
    // list the processes without a walk of every thread, or -1. Past 20 ms of CPU a call
    // measures no further PSS (those measured longest ago go first; the others count what they
    // had) and stops the thread walk; whole: no such limit (the sample before --kill-after's
    // SIGKILL).
    void sample(pid_t pid1, int cgroup = -1, bool whole = false);
    // Seconds until the next sample: 0.1, or later once the samples so far
    // have cost the monitor more CPU than 2% of the time since the start plus
    // a credit of 50 ms (at most 5 s later), so sampling takes ~2% of a CPU
    // however many processes, threads or mappings the sandbox makes, and a
    // short run is still sampled every 100 ms.
    double next_interval() const;

    // The sandbox's tmpfs mounts (O_PATH fds from set-up, ns/channel.h's
    // TmpfsMsg): each sample adds up their used bytes with fstatfs. At most
    // kMaxTmpfsReported are kept; an fd of any other filesystem is closed.
    void add_tmpfs(std::vector<UniqueFd> fds);

    // After PID 1 was reaped (its PID namespace's leftovers with it): CPU of
    // every reaped process since the baseline, and the peaks (the tmpfs
    // mounts sampled once more, then closed).
    Usage finish();

    // The report's fields as JSON members: , "wall-time-us": N, ...
    static std::string json_members(const Usage& usage);

private:
    std::chrono::steady_clock::time_point m_start;
    uint64_t m_user_us = 0, m_system_us = 0;
    uint64_t m_memory_peak = 0, m_tasks_peak = 0, m_tmpfs_peak = 0;
    double m_spent = 0;  // CPU seconds the samples took, all together
    CpuLedger m_cpu;  // the sampled tree's CPU, per process
    AddressSpaces m_address_spaces;  // a process per address space
    std::vector<UniqueFd> m_tmpfs;
    // The PSS each address space had when last measured (by a process of it), and the tick.
    struct Measured {
        uint64_t pss = 0;
        uint64_t tick = 0;  // 0: not measured yet
    };
    std::map<pid_t, Measured> m_measured;
    uint64_t m_tick = 0;

    void sample_tmpfs();
    // The sample's memory over `distinct` (a process per address space, and its RSS).
    uint64_t measure_memory(std::vector<std::pair<pid_t, uint64_t>>& distinct,
                            const std::function<bool()>& over_budget);
};

}  // namespace cocoon::ns
