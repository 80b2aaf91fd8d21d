// One process per address space for the sampled memory (ns/monitor/usage_vm.h). Run by the
// monitor: kcmp needs ptrace-read access to both processes, which its caller has over the
// sandbox's (its own uid, or root; the owner of the sandbox's user namespace); where it is
// refused, the process counts as one of its own.
// Runs in: monitor.
#include "ns/monitor/usage_vm.h"

#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

namespace cocoon::ns {
namespace {

// Whether p shares an address space with one of `spaces` (sorted by compare_vm, one process
// each); if not, p joins them. nullopt: kcmp failed, p is left out.
std::optional<bool> shares(pid_t p, std::vector<pid_t>& spaces)
{
    size_t low = 0, high = spaces.size();
    while (low < high) {
        const size_t mid = low + (high - low) / 2;
        // kcmp(KCMP_VM): 0 the same address space, 1 p's before the other's, 2 after; -1 an
        // error (gone, refused).
        const long order = ::syscall(SYS_kcmp, p, spaces[mid], KCMP_VM, 0, 0);
        if (order == 0)
            return true;
        if (order == 1)
            high = mid;
        else if (order == 2)
            low = mid + 1;
        else
            return std::nullopt;
    }
    spaces.insert(spaces.begin() + static_cast<std::ptrdiff_t>(low), p);
    return false;
}

}  // namespace

std::vector<std::pair<pid_t, uint64_t>> AddressSpaces::distinct(const std::vector<ProcessSample>& processes,
                                                                const std::function<bool()>& over_budget)
{
    std::vector<size_t> order(processes.size());
    for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return std::pair(processes[a].layout, processes[a].pid) < std::pair(processes[b].layout, processes[b].pid);
    });
    // The groups of one layout, as [begin, end) in `order`.
    std::vector<std::pair<size_t, size_t>> groups;
    for (size_t i = 0; i < order.size(); ++i)
        if (i == 0 || processes[order[i]].layout != processes[order[i - 1]].layout)
            groups.emplace_back(i, i + 1);
        else
            groups.back().second = i + 1;
    std::map<std::pair<pid_t, uint64_t>, bool> judged;
    std::vector<std::pair<pid_t, uint64_t>> out;
    const size_t first = groups.empty() ? 0 : m_turn++ % groups.size();
    // The first kAlwaysJudged processes of a tick are judged whatever the budget: a process not
    // yet judged counts as an address space of its own, so a CLONE_VM child first seen in a tick
    // already over its budget (a sharer's mmap lock held, a loaded host) would count its
    // parent's memory again. A sandbox of a few processes is then always judged in full.
    constexpr size_t kAlwaysJudged = 64;
    size_t judged_now = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
        const auto [begin, end] = groups[(first + g) % groups.size()];
        std::vector<pid_t> spaces;
        for (size_t i = begin; i < end; ++i) {
            const ProcessSample& p = processes[order[i]];
            const std::pair key(p.pid, p.start);
            std::optional<bool> shared;
            if (end - begin == 1)
                shared = false;
            else if (judged_now++ < kAlwaysJudged || !over_budget())
                shared = shares(p.pid, spaces);
            else if (auto last = m_shares.find(key); last != m_shares.end())
                shared = last->second;
            if (shared)
                judged[key] = *shared;
            if (!shared.value_or(false))
                out.emplace_back(p.pid, p.rss);
        }
    }
    m_shares = std::move(judged);
    return out;
}

}  // namespace cocoon::ns
