// The sampled path's memory (ns/monitor/usage.h), run by the monitor: one process per address
// space, since processes that share one (clone(CLONE_VM) without CLONE_THREAD: vfork,
// posix_spawn until the exec) each show all of its PSS. See ARCHITECTURE.md, "Resource report".
// Runs in: monitor.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "ns/monitor/usage_cpu.h"

namespace cocoon::ns {

class AddressSpaces {
public:
    // A process per address space of `processes`, with its RSS. Processes with the same layout
    // (ProcessSample::layout: the same exec, so an address space's sharers and also its forks)
    // are told apart by kcmp(KCMP_VM), which orders address spaces: each goes into a sorted list
    // of the group's address spaces by binary search, so a group of N costs N log N calls, not
    // N^2. The first 64 processes of a tick are judged whatever its budget; past the budget a
    // process keeps its verdict of the last sample that judged it (a process of its own until
    // judged); the groups take turns at coming first.
    std::vector<std::pair<pid_t, uint64_t>> distinct(const std::vector<ProcessSample>& processes,
                                                     const std::function<bool()>& over_budget);

private:
    // Each process judged (PID, starttime): whether it shares the address space of another.
    std::map<std::pair<pid_t, uint64_t>, bool> m_shares;
    size_t m_turn = 0;
};

}  // namespace cocoon::ns
