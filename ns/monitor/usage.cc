// The sampled resource report: /proc walks from PID 1 through each task's
// children file, and getrusage(RUSAGE_CHILDREN) once PID 1 is reaped. A
// sample never throws: a process that exits while it is read is only missing
// from that sample, and accounting must not end a run.
// Runs in: caller, monitor: the caller starts the sampler's clock; the monitor samples.
#include "ns/monitor/usage.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "base/sys.h"
#include "ns/monitor/cgroup.h"
#include "ns/monitor/usage_cpu.h"
#include "ns/monitor/usage_vm.h"
#include "ns/channel.h"

namespace cocoon::ns {
namespace {

uint64_t micros(const timeval& tv)
{
    return static_cast<uint64_t>(tv.tv_sec) * 1000000 + static_cast<uint64_t>(tv.tv_usec);
}

// Appends the PIDs a cgroup.procs text lists.
void add_pids(const std::string& text, std::vector<pid_t>& out)
{
    const char* p = text.c_str();
    for (char* end = nullptr;; p = end) {
        const long pid = std::strtol(p, &end, 10);
        if (end == p)
            return;
        if (pid > 0)
            out.push_back(static_cast<pid_t>(pid));
    }
}

// Appends the children of every thread of the process at proc_dir, not only of its main one.
void add_children(int proc_dir, std::vector<pid_t>& todo)
{
    UniqueFd task(::openat(proc_dir, "task", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!task)
        return;
    for (const sys::DirEntry& tid : sys::list_dir(task.get()))
        add_pids(sys::read_small(task.get(), (tid.name + "/children").c_str(), 1 << 20), todo);
}

UniqueFd open_proc(pid_t pid)
{
    return UniqueFd(::open(("/proc/" + std::to_string(pid)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}

double thread_cpu_seconds()
{
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

bool cgroup_pids(int dir, std::vector<pid_t>& out)
{
    std::vector<UniqueFd> dirs;
    dirs.emplace_back(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dirs[0].valid())
        return false;
    for (size_t i = 0; i < dirs.size(); ++i) {
        add_pids(sys::read_small(dirs[i].get(), "cgroup.procs", 1 << 20), out);
        for (const sys::DirEntry& e : sys::list_dir(dirs[i].get()))
            if (e.type == DT_DIR && dirs.size() < 2 * kMaxDescendants + 2)
                dirs.emplace_back(
                    ::openat(dirs[i].get(), e.name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
        dirs[i].reset();
    }
    return true;
}

UsageMeter::UsageMeter() : m_start(std::chrono::steady_clock::now())
{
    rusage before{};
    ::getrusage(RUSAGE_CHILDREN, &before);
    m_user_us = micros(before.ru_utime);
    m_system_us = micros(before.ru_stime);
}

double UsageMeter::next_interval() const
{
    constexpr double kShortest = 0.1, kLongest = 5.0, kBudget = 0.02, kCredit = 0.05;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    // The time at which what was spent is within the budget again.
    const double due = (m_spent - kCredit) / kBudget;
    return std::clamp(due - elapsed, kShortest, kLongest);
}

// Memory: each address space's PSS (shared pages split among their users, so the sum counts
// each page once), measured again for those measured longest ago while the tick's budget lasts,
// at least one; the others count what they had, or their RSS until measured.
uint64_t UsageMeter::measure_memory(std::vector<std::pair<pid_t, uint64_t>>& distinct,
                                    const std::function<bool()>& over_budget)
{
    std::map<pid_t, Measured> measured;
    for (const auto& [pid, rss] : distinct)
        if (auto known = m_measured.find(pid); known != m_measured.end())
            measured[pid] = known->second;
    std::stable_sort(distinct.begin(), distinct.end(),
                     [&](const auto& a, const auto& b) { return measured[a.first].tick < measured[b.first].tick; });
    uint64_t memory = 0;
    for (size_t i = 0; i < distinct.size(); ++i) {
        const auto [pid, rss] = distinct[i];
        Measured& m = measured[pid];
        if (i == 0 || !over_budget()) {
            const std::string rollup =
                sys::read_small(AT_FDCWD, ("/proc/" + std::to_string(pid) + "/smaps_rollup").c_str(), 4096);
            if (auto pss = keyed_number(rollup, "Pss:"))
                m = {*pss * 1024, m_tick};  // kB
        }
        memory += m.tick ? m.pss : rss;
    }
    m_measured = std::move(measured);
    return memory;
}

void UsageMeter::sample(pid_t pid1, int cgroup, bool whole)
{
    // Past this much CPU a tick measures no further PSS (a walk of every mapping of a
    // process), compares no further address spaces and the thread walk stops: a sandbox of
    // many processes, threads or mappings cannot make one tick long, however slow the host.
    constexpr double kTickBudget = 0.02;
    // Bounded: a sandbox that forks faster than this walks is sampled in part.
    constexpr size_t kMostProcesses = 100000;
    const double started = thread_cpu_seconds();
    const std::function<bool()> over_budget = [&] { return !whole && thread_cpu_seconds() - started > kTickBudget; };
    ++m_tick;
    // With a cgroup, its cgroup.procs files list every process (no thread is read); without,
    // the walk goes from PID 1 through each thread's children file.
    std::vector<pid_t> todo;
    const bool listed = cgroup >= 0 && cgroup_pids(cgroup, todo);
    if (!listed)
        todo = {pid1};
    bool complete = todo.size() <= kMostProcesses;
    std::vector<ProcessSample> seen;
    for (size_t i = 0; i < todo.size() && i < kMostProcesses; ++i) {
        const UniqueFd proc = open_proc(todo[i]);
        std::optional<ProcessSample> p = proc.valid() ? read_process(proc.get(), todo[i]) : std::nullopt;
        if (!p)
            continue;  // gone meanwhile
        seen.push_back(*p);
        if (listed)
            continue;
        if (over_budget())
            complete = false;  // its children are not read
        else
            add_children(proc.get(), todo);
        complete = complete && todo.size() <= kMostProcesses;
    }
    // CPU: each process's own and what it reaped, and what left the tree uncounted.
    m_cpu.add(seen, complete, [](pid_t pid) {
        const UniqueFd proc = open_proc(pid);
        return proc.valid() ? read_process(proc.get(), pid) : std::nullopt;
    });
    uint64_t tasks = 0;
    for (const ProcessSample& p : seen)
        tasks += p.tasks;
    std::vector<std::pair<pid_t, uint64_t>> distinct = m_address_spaces.distinct(seen, over_budget);
    m_memory_peak = std::max(m_memory_peak, measure_memory(distinct, over_budget));
    m_tasks_peak = std::max(m_tasks_peak, tasks);
    sample_tmpfs();
    m_spent += thread_cpu_seconds() - started;
}

void UsageMeter::add_tmpfs(std::vector<UniqueFd> fds)
{
    for (UniqueFd& fd : fds) {
        struct statfs st {};
        // Security: the fds come from the sandbox's set-up; only tmpfs
        // mounts are kept, and no more than the bound (the monitor's fds
        // are also the relay's).
        if (m_tmpfs.size() < kMaxTmpfsReported && ::fstatfs(fd.get(), &st) == 0 && st.f_type == TMPFS_MAGIC)
            m_tmpfs.push_back(std::move(fd));
    }
    sample_tmpfs();
}

// fstatfs on each fd: no path in the sandbox is walked, so nothing the
// command plants (a symlink, a mount) changes what is measured.
void UsageMeter::sample_tmpfs()
{
    uint64_t bytes = 0;
    for (const UniqueFd& fd : m_tmpfs) {
        struct statfs st {};
        if (::fstatfs(fd.get(), &st) == 0)
            bytes += (st.f_blocks - st.f_bfree) * static_cast<uint64_t>(st.f_bsize);
    }
    m_tmpfs_peak = std::max(m_tmpfs_peak, bytes);
}

Usage UsageMeter::finish()
{
    sample_tmpfs();
    m_tmpfs.clear();
    Usage u;
    u.wall_us = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - m_start).count());
    rusage after{};
    ::getrusage(RUSAGE_CHILDREN, &after);
    u.cpu_user_us = micros(after.ru_utime) - std::min(m_user_us, micros(after.ru_utime));
    u.cpu_system_us = micros(after.ru_stime) - std::min(m_system_us, micros(after.ru_stime));
    // What the monitor reaped holds what reached PID 1's waits; what left the tree uncounted
    // (ns/monitor/usage_cpu.h) comes on top. A PID 1 killed (--kill-after, a signal) takes its
    // killed processes' CPU with it: the samples' figure is the floor.
    const uint64_t tick_us = 1000000 / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK));
    u.cpu_user_us += m_cpu.lost_user() * tick_us;
    u.cpu_system_us += m_cpu.lost_system() * tick_us;
    if ((m_cpu.user() + m_cpu.system()) * tick_us > u.cpu_user_us + u.cpu_system_us) {
        u.cpu_user_us = m_cpu.user() * tick_us;
        u.cpu_system_us = m_cpu.system() * tick_us;
    }
    // The largest single process's peak is a floor the samples may have missed.
    u.memory_peak_bytes = std::max(m_memory_peak, static_cast<uint64_t>(after.ru_maxrss) * 1024);
    u.pids_peak = std::max<uint64_t>(m_tasks_peak, 1);
    u.tmpfs_peak_bytes = m_tmpfs_peak;
    return u;
}

std::string UsageMeter::json_members(const Usage& u)
{
    std::ostringstream out;
    out << ", \"wall-time-us\": " << u.wall_us << ", \"cpu-user-us\": " << u.cpu_user_us
        << ", \"cpu-system-us\": " << u.cpu_system_us << ", \"memory-peak-bytes\": " << u.memory_peak_bytes
        << ", \"pids-peak\": " << u.pids_peak << ", \"tmpfs-peak-bytes\": " << u.tmpfs_peak_bytes
        << ", \"accounting\": \"" << u.accounting << "\"";
    if (u.relay_worker_cpu_us)
        out << ", \"relay-worker-cpu-us\": " << *u.relay_worker_cpu_us;
    return out.str();
}

}  // namespace cocoon::ns
