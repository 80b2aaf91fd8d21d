// The sampled resource report: /proc walks from PID 1 through each task's
// children file, and getrusage(RUSAGE_CHILDREN) once PID 1 is reaped. A
// sample never throws: a process that exits while it is read is only missing
// from that sample, and accounting must not end a run.
#include "ns/usage.h"

#include <dirent.h>
#include <linux/kcmp.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "base/sys.h"
#include "ns/channel.h"

namespace cocoon::ns {
namespace {

uint64_t micros(const timeval& tv)
{
    return static_cast<uint64_t>(tv.tv_sec) * 1000000 + static_cast<uint64_t>(tv.tv_usec);
}

// The kB value of a "Name:   N kB" line of a /proc file, or nullopt.
std::optional<uint64_t> kb_field(const std::string& path, const std::string& name)
{
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(name, 0) == 0)
            return std::strtoull(line.c_str() + name.size(), nullptr, 10) * 1024;
    return std::nullopt;
}

// Memory a process accounts for: its PSS (shared pages split among their
// users, so a sum over processes counts each page once), else its RSS.
uint64_t memory_of(pid_t pid)
{
    const std::string dir = "/proc/" + std::to_string(pid);
    if (auto pss = kb_field(dir + "/smaps_rollup", "Pss:"))
        return *pss;
    std::ifstream statm(dir + "/statm");
    uint64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

UsageMeter::UsageMeter() : m_start(std::chrono::steady_clock::now())
{
    rusage before{};
    ::getrusage(RUSAGE_CHILDREN, &before);
    m_user_us = micros(before.ru_utime);
    m_system_us = micros(before.ru_stime);
}

namespace {

double thread_cpu_seconds()
{
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

double UsageMeter::next_interval() const
{
    constexpr double kShortest = 0.1, kLongest = 5.0, kBudget = 0.02, kCredit = 0.05;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    // The time at which what was spent is within the budget again.
    const double due = (m_spent - kCredit) / kBudget;
    return std::clamp(due - elapsed, kShortest, kLongest);
}

void UsageMeter::sample(pid_t pid1)
{
    const double started = thread_cpu_seconds();
    uint64_t memory = 0, tasks = 0, user_ticks = 0, system_ticks = 0;
    // Processes that share one address space (clone(CLONE_VM) without CLONE_THREAD: vfork,
    // posix_spawn until the exec) have one PSS between them, each seeing all of it: counted
    // once. Such processes read the same statm, so kcmp(KCMP_VM) compares only those.
    std::map<std::string, std::vector<pid_t>> address_spaces;
    auto counted_already = [&](pid_t pid, const std::string& dir) {
        std::ifstream statm_file(dir + "/statm");
        std::string statm;
        std::getline(statm_file, statm);
        std::vector<pid_t>& same = address_spaces[statm];
        for (pid_t other : same)
            if (::syscall(SYS_kcmp, other, pid, KCMP_VM, 0, 0) == 0)
                return true;
        same.push_back(pid);
        return false;
    };
    std::vector<pid_t> todo{pid1};
    // Bounded: a sandbox that forks faster than this walks is sampled in part.
    for (size_t i = 0; i < todo.size() && i < 100000; ++i) {
        const std::string dir = "/proc/" + std::to_string(todo[i]);
        if (!counted_already(todo[i], dir))
            memory += memory_of(todo[i]);
        // Threads, and CPU: the process's own and what it reaped (cutime, cstime), so the sum
        // over the tree holds every process of it that was reaped inside, also those the end
        // kills (which no wait of the monitor's ever counts).
        // One line, read through the stream (getline): a process that exits meanwhile makes
        // the read fail with ESRCH, which libstdc++'s filebuf throws and only the stream turns
        // into a failed read (an istreambuf_iterator would let it escape the sample).
        std::ifstream stat_file(dir + "/stat");
        std::string stat;
        std::getline(stat_file, stat);
        const std::vector<std::string> fields = sys::proc_stat_fields(stat);
        if (fields.size() >= 18) {
            auto number = [&](size_t field) { return std::strtoull(fields[field - 3].c_str(), nullptr, 10); };
            user_ticks += number(14) + number(16);
            system_ticks += number(15) + number(17);
            tasks += number(20);
        }
        // Children of every thread, not only of the main one.
        if (DIR* threads = ::opendir((dir + "/task").c_str())) {
            while (dirent* tid = ::readdir(threads)) {
                if (tid->d_name[0] == '.')
                    continue;
                std::ifstream children(dir + "/task/" + tid->d_name + "/children");
                for (pid_t child; children >> child;)
                    todo.push_back(child);
            }
            ::closedir(threads);
        }
    }
    m_memory_peak = std::max(m_memory_peak, memory);
    m_tasks_peak = std::max(m_tasks_peak, tasks);
    const uint64_t tick_us = 1000000 / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK));
    if ((user_ticks + system_ticks) * tick_us > m_sampled_user_us + m_sampled_system_us) {
        m_sampled_user_us = user_ticks * tick_us;
        m_sampled_system_us = system_ticks * tick_us;
    }
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
    // A PID 1 killed (--kill-after, a signal) takes its killed processes' CPU with it: the
    // samples' figure is the floor.
    if (m_sampled_user_us + m_sampled_system_us > u.cpu_user_us + u.cpu_system_us) {
        u.cpu_user_us = m_sampled_user_us;
        u.cpu_system_us = m_sampled_system_us;
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
    return out.str();
}

}  // namespace cocoon::ns
