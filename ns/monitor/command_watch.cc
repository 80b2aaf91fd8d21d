#include "ns/monitor/command_watch.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/sys.h"
#include "base/sys_error.h"

namespace cocoon::ns {
namespace {

// The pid a pidfd refers to, in the monitor's PID namespace (its fdinfo's "Pid:" line), or -1.
pid_t pid_of(int pidfd)
{
    int fd = ::open(("/proc/self/fdinfo/" + std::to_string(pidfd)).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    std::string info;
    try {
        info = sys::read_to_end_and_close(fd, 4096, "fdinfo");
    } catch (const std::exception&) {
        return -1;
    }
    const size_t at = info.find("\nPid:\t");
    return at == std::string::npos ? -1 : static_cast<pid_t>(std::strtol(info.c_str() + at + 6, nullptr, 10));
}

}  // namespace

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
    m_timer.reset(static_cast<int>(check(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "timerfd_create")));
    m_waiting = true;
}

void CommandWatch::on_exit()
{
    m_waiting = false;
    itimerspec grace{};
    grace.it_value.tv_sec = static_cast<time_t>(kGraceSeconds);
    grace.it_value.tv_nsec = static_cast<long>((kGraceSeconds - static_cast<double>(grace.it_value.tv_sec)) * 1e9);
    check(::timerfd_settime(m_timer.get(), 0, &grace, nullptr), "timerfd_settime");
}

std::optional<int> CommandWatch::on_timer()
{
    uint64_t ticks;
    (void)!::read(m_timer.get(), &ticks, sizeof ticks);
    const pid_t pid = pid_of(m_pidfd.get());
    if (pid <= 0)
        return std::nullopt;
    int dir = ::open(("/proc/" + std::to_string(pid)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return std::nullopt;  // reaped: PID 1 is at work
    UniqueFd proc(dir);
    // The directory is the command's: the pidfd still names a process (a zombie until reaped),
    // so its pid was not reused between the two calls.
    if (::syscall(SYS_pidfd_send_signal, m_pidfd.get(), 0, nullptr, 0) != 0)
        return std::nullopt;
    int fd = ::openat(proc.get(), "stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return std::nullopt;
    try {
        return zombie_wait_status(sys::read_to_end_and_close(fd, 4096, "stat"));
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace cocoon::ns
