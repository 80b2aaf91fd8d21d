// The sampled path's CPU, per process (ns/monitor/usage_cpu.h). Run by the monitor, which reads
// the sandbox's /proc files with whatever privilege its caller has; a read that fails means the
// process is gone.
// Runs in: monitor.
#include "ns/monitor/usage_cpu.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "base/sys.h"

namespace cocoon::ns {

std::optional<ProcessSample> read_process(int proc_dir, pid_t pid)
{
    // Fields counted from the last ')': the comm is the command's to choose.
    const std::vector<std::string> fields = sys::proc_stat_fields(sys::read_small(proc_dir, "stat", 4096));
    if (fields.size() < 26)
        return std::nullopt;
    auto number = [&](size_t field) { return std::strtoull(fields[field - 3].c_str(), nullptr, 10); };
    ProcessSample p;
    p.pid = pid;
    p.user = number(14);
    p.system = number(15);
    p.reaped_user = number(16);
    p.reaped_system = number(17);
    p.tasks = number(20);
    p.start = number(22);
    p.layout = {number(26), number(27), number(28)};
    // rss (field 24), in pages: the counters statm's resident adds up too (get_mm_rss), without
    // reading statm as well.
    p.rss = number(24) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    return p;
}

void CpuLedger::add(const std::vector<ProcessSample>& sampled, bool complete,
                    const std::function<std::optional<ProcessSample>(pid_t)>& reread)
{
    std::map<pid_t, ProcessSample> now;
    for (const ProcessSample& p : sampled)
        now.emplace(p.pid, p);
    if (complete) {
        // Gone since the last sample: what they had used and reaped. Still there (or new): how
        // much more they have reaped since, which holds the gone ones' time if they were waited
        // for.
        uint64_t gone_user = 0, gone_system = 0, more_user = 0, more_system = 0;
        for (const auto& [pid, last] : m_last) {
            const auto it = now.find(pid);
            if (it != now.end() && it->second.start == last.start)
                continue;  // still there
            // Not in the tree (or its PID is another process's now): left the tree, not the
            // machine, and still the sandbox's; or gone.
            std::optional<ProcessSample> alive = it == now.end() ? reread(pid) : std::nullopt;
            if (alive && alive->start == last.start) {
                now.emplace(pid, *alive);
            } else {
                gone_user += last.user + last.reaped_user;
                gone_system += last.system + last.reaped_system;
            }
        }
        for (const auto& [pid, p] : now) {
            auto it = m_last.find(pid);
            const bool same = it != m_last.end() && it->second.start == p.start;
            more_user += p.reaped_user - (same ? std::min(it->second.reaped_user, p.reaped_user) : 0);
            more_system += p.reaped_system - (same ? std::min(it->second.reaped_system, p.reaped_system) : 0);
        }
        m_lost_user += gone_user - std::min(gone_user, more_user);
        m_lost_system += gone_system - std::min(gone_system, more_system);
        m_last = std::move(now);
    } else {
        // A partial sample judges nobody gone: it only brings those it read up to date, and
        // adds new ones while the table is within its bound (a walk that never completes must
        // not grow it with every PID the sandbox ever used).
        for (auto& [pid, p] : now)
            if (auto it = m_last.find(pid); it != m_last.end())
                it->second = p;
            else if (m_last.size() < kMostKept)
                m_last.emplace(pid, p);
    }
    uint64_t user = m_lost_user, system = m_lost_system;
    // A complete sample's table is what it found and what left the tree alive; a partial one's
    // own processes are all it can vouch for.
    auto add_up = [&](const ProcessSample& p) {
        user += p.user + p.reaped_user;
        system += p.system + p.reaped_system;
    };
    if (complete)
        for (const auto& [pid, p] : m_last)
            add_up(p);
    else
        std::for_each(sampled.begin(), sampled.end(), add_up);
    if (user + system > m_user + m_system) {
        m_user = user;
        m_system = system;
    }
}

}  // namespace cocoon::ns
