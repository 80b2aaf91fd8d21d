// The sampled path's CPU (ns/monitor/usage.h), run by the monitor: what each process of the
// sandbox has used by /proc/PID/stat, kept per process, so that CPU that no wait ever counts (a
// child reaped by a parent that ignores SIGCHLD, what dies with a killed PID 1) stays in the
// report. See ARCHITECTURE.md, "Resource report".
// Runs in: monitor.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace cocoon::ns {

// One process as a sample reads it: /proc/PID/stat.
struct ProcessSample {
    pid_t pid = 0;
    uint64_t start = 0;  // starttime (field 22): with the PID, which process this is
    // Clock ticks: its own (utime, stime; its dead threads included) and those of the children
    // it waited for (cutime, cstime; theirs included).
    uint64_t user = 0, system = 0, reaped_user = 0, reaped_system = 0;
    uint64_t tasks = 0;  // num_threads (field 20)
    // start_code, end_code, start_stack (fields 26-28): the same for every process of one
    // address space, and set by exec, so processes that share one have the same; 0s where the
    // kernel hides them (a process the monitor may not ptrace-read).
    std::array<uint64_t, 3> layout{};
    uint64_t rss = 0;  // bytes (rss, field 24)
};

// The process whose /proc/PID directory is proc_dir, or nullopt if it is gone.
std::optional<ProcessSample> read_process(int proc_dir, pid_t pid);

// The CPU of the sampled tree: at each sample, the sum over the processes it finds of their own
// and reaped CPU, plus what left the tree with its time reaching no process in it (reaped by a
// parent that ignores SIGCHLD, which adds nothing to its cutime; or by a parent that left the same
// way). What left is measured per process: between two complete samples, the last figures of the
// processes gone, less the growth of the reaped CPU of those still there (the gone ones' time
// must be in it if they were waited for), is lost; never more than the gone ones' last figures,
// so nothing is counted twice. A process that left the tree alive (an orphan of a sandbox
// without a PID namespace, reparented outside) is still read by its PID while it lives.
class CpuLedger {
public:
    // One sample's processes. complete: the walk found every process of the tree (a walk
    // stopped by the tick's budget is not: a process it missed is not gone). reread: the process
    // at a PID, to tell one that left the tree alive from one that is gone.
    void add(const std::vector<ProcessSample>& now, bool complete,
             const std::function<std::optional<ProcessSample>(pid_t)>& reread);

    // The figure of the sample that saw most (live, reaped and lost), in clock ticks.
    uint64_t user() const { return m_user; }
    uint64_t system() const { return m_system; }
    // What left the tree uncounted so far (in no cutime that a wait will report).
    uint64_t lost_user() const { return m_lost_user; }
    uint64_t lost_system() const { return m_lost_system; }

    // Processes kept between samples, at most (a complete sample keeps what it read, itself
    // bounded by the walk's 100,000).
    static constexpr size_t kMostKept = 100000;

private:
    std::map<pid_t, ProcessSample> m_last;
    uint64_t m_lost_user = 0, m_lost_system = 0;
    uint64_t m_user = 0, m_system = 0;
};

}  // namespace cocoon::ns
