// The relay worker's seccomp allowlist (relay/worker_seccomp_gen.cc), loaded in a child of the
// test, as the worker loads it: what it lets through on the --egress-log's fd (5), which a worker
// taken over must not make rewrite the log: its flags read or set with O_APPEND kept, and no
// copy; anything on other fds; no exec. No privilege needed: no_new_privs, then the filter.
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <string>

namespace cocoon::relay {
namespace {

#include "worker_seccomp.inc"

constexpr int kLogFd = 5, kOtherFd = 6;
constexpr uint64_t kHigh = uint64_t{1} << 32;  // bits the kernel drops from an int argument

// "allowed" if the call was made (whatever it returned), "refused" if the filter trapped it.
std::string run_confined(const std::function<void()>& call)
{
    char path[] = "/tmp/cocoon-allowlist-XXXXXX";
    const int file = ::mkstemp(path);
    if (file < 0)
        return "mkstemp failed";
    ::unlink(path);
    const pid_t pid = ::fork();
    if (pid == 0) {
        // The log as the worker has it (O_WRONLY | O_APPEND), and another fd.
        const int log = ::open(("/proc/self/fd/" + std::to_string(file)).c_str(), O_WRONLY | O_APPEND);
        if (log < 0 || ::dup2(log, kLogFd) < 0 || ::dup2(file, kOtherFd) < 0)
            ::_exit(2);
        ::signal(SIGSYS, SIG_DFL);
        sock_fprog prog{static_cast<unsigned short>(std::size(kWorkerAllowlist)),
                        const_cast<sock_filter*>(kWorkerAllowlist)};
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))
            ::_exit(3);
        call();
        ::_exit(0);
    }
    ::close(file);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
        return "refused";
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return "allowed";
    return "status " + std::to_string(status);
}

TEST(WorkerAllowlist, TheEgressLogsAppendFlagCanNeitherBeClearedNorCopiedAround)
{
    auto fcntl = [](uint64_t fd, uint64_t cmd, uint64_t arg) { return [=] { ::syscall(SYS_fcntl, fd, cmd, arg); }; };
    // Its flags read, or set with O_APPEND kept.
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_GETFL, 0)), "allowed");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_GETFD, 0)), "allowed");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_SETFD, FD_CLOEXEC)), "allowed");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_SETFL, O_APPEND | O_NONBLOCK)), "allowed");
    // O_APPEND cleared, also with bits above the 32 the kernel reads; a copy by fcntl.
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_SETFL, O_NONBLOCK)), "refused");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_SETFL, 0)), "refused");
    EXPECT_EQ(run_confined(fcntl(kLogFd | kHigh, F_SETFL, 0)), "refused");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_SETFL | kHigh, 0)), "refused");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_DUPFD, 10)), "refused");
    EXPECT_EQ(run_confined(fcntl(kLogFd, F_DUPFD_CLOEXEC, 10)), "refused");
    // A copy by dup or dup3.
    EXPECT_EQ(run_confined([] { ::syscall(SYS_dup, kLogFd); }), "refused");
    EXPECT_EQ(run_confined([] { ::syscall(SYS_dup, kLogFd | kHigh); }), "refused");
    EXPECT_EQ(run_confined([] { ::syscall(SYS_dup3, kLogFd, 9, 0); }), "refused");
    // lseek is allowed: O_APPEND puts every write at the end anyway.
    EXPECT_EQ(run_confined([] { ::syscall(SYS_lseek, kLogFd, 0, SEEK_SET); }), "allowed");
    // Any other fd: as before.
    EXPECT_EQ(run_confined(fcntl(kOtherFd, F_SETFL, O_NONBLOCK)), "allowed");
    EXPECT_EQ(run_confined(fcntl(kOtherFd, F_DUPFD_CLOEXEC, 10)), "allowed");
    EXPECT_EQ(run_confined([] { ::syscall(SYS_dup, kOtherFd); }), "allowed");
    EXPECT_EQ(run_confined([] { ::syscall(SYS_dup3, kOtherFd, 9, 0); }), "allowed");
}

// The worker is exec'd before it loads the allowlist: the allowlist has no exec.
TEST(WorkerAllowlist, HasNoExec)
{
    EXPECT_EQ(run_confined([] { ::syscall(SYS_execve, "/nonexistent", nullptr, nullptr); }), "refused");
    EXPECT_EQ(run_confined([] { ::syscall(SYS_execveat, -1, "", nullptr, nullptr, AT_EMPTY_PATH); }), "refused");
}

}  // namespace
}  // namespace cocoon::relay
