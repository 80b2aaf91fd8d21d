// Watching the command's process: its pidfd, and its state from /proc/PID/stat.
// Runs in: monitor.
#include "ns/monitor/command_watch.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "base/sys.h"
#include "ns/monitor/stop.h"

namespace cocoon::ns {

std::optional<int> zombie_wait_status(const std::string& stat)
{
    // Field 3 is the state, field 52 exit_code.
    const std::vector<std::string> fields = sys::proc_stat_fields(stat);
    if (fields.size() < 50 || fields[0] != "Z")
        return std::nullopt;
    const std::string& text = fields[49];
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end || value < 0 || value > 0xffff)
        return std::nullopt;
    return static_cast<int>(value);
}

void CommandWatch::watch(UniqueFd pidfd)
{
    m_pidfd = std::move(pidfd);
    m_timer = make_timer();
    m_waiting = true;
}

void CommandWatch::on_exit()
{
    m_waiting = false;
    arm(m_timer.get(), kGraceSeconds);
}

std::optional<int> CommandWatch::on_timer()
{
    uint64_t ticks;
    (void)!::read(m_timer.get(), &ticks, sizeof ticks);
    const pid_t pid = sys::pidfd_pid(m_pidfd.get());
    if (pid <= 0)
        return std::nullopt;
    UniqueFd proc(::open(("/proc/" + std::to_string(pid)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!proc)
        return std::nullopt;  // reaped: PID 1 is at work
    // The directory is the command's: the pidfd still names a process (a zombie until reaped),
    // so its pid was not reused between the two calls.
    if (::syscall(SYS_pidfd_send_signal, m_pidfd.get(), 0, nullptr, 0) != 0)
        return std::nullopt;
    return zombie_wait_status(sys::read_small(proc.get(), "stat", 4096));
}

}  // namespace cocoon::ns
