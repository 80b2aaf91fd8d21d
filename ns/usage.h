// What a sandbox used, measured by the monitor from outside: wall time, CPU
// of every process of the sandbox, peak memory of the sandbox as a whole and
// its peak number of tasks. This host path samples /proc (no cgroup v2 with
// memory and pids controllers here); see ARCHITECTURE.md, "Resource report".
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace cocoon::ns {

struct Usage {
    uint64_t wall_us = 0;
    uint64_t cpu_user_us = 0;
    uint64_t cpu_system_us = 0;
    uint64_t memory_peak_bytes = 0;
    uint64_t pids_peak = 0;
    const char* accounting = "sampled";
};

class UsageMeter {
public:
    // Starts the clock and takes the baseline of the monitor's reaped
    // children (getrusage(RUSAGE_CHILDREN)): call before the sandbox exists.
    UsageMeter();

    // Adds one sample of the processes below (and including) pid1: the sum of
    // their proportional set sizes (resident sizes where /proc refuses PSS)
    // and their task count. Cheap: a few /proc reads per process.
    void sample(pid_t pid1);

    // After PID 1 was reaped (its PID namespace's leftovers with it): CPU of
    // every reaped process since the baseline, and the peaks.
    Usage finish() const;

    // The report's fields as JSON members: , "wall-time-us": N, ...
    static std::string json_members(const Usage& usage);

private:
    std::chrono::steady_clock::time_point m_start;
    uint64_t m_user_us = 0, m_system_us = 0;
    uint64_t m_memory_peak = 0, m_tasks_peak = 0;
};

}  // namespace cocoon::ns
