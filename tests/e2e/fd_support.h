// Helpers of the e2e tests that hand fds to cocoon (fd_options_test.cc, fd_handover_test.cc): pipes,
// a cocoon started in the background with chosen fds at chosen numbers, and waiting. Runs in the
// test process.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"

namespace cocoon::test {

// A pipe whose read end holds `data` and whose write end is closed, so a
// reader gets data then EOF (data must fit in the pipe buffer).
inline UniqueFd pipe_holding(const std::string& data)
{
    int p[2];
    if (::pipe2(p, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe2");
    UniqueFd read_end(p[0]), write_end(p[1]);
    if (::write(write_end.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size()))
        throw std::runtime_error("write to pipe");
    return read_end;
}

struct Pipe {
    UniqueFd read, write;
    Pipe()
    {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) < 0)
            throw std::runtime_error("pipe2");
        read.reset(p[0]);
        write.reset(p[1]);
    }
};

// argv started in the background, stdin /dev/null, output captured. Each
// {target, source} pair puts this process's fd `source` at `target` in the
// child; every other fd above 2 is closed, so an fd number not given is
// certainly closed there.
class BackgroundCommand {
public:
    // `cloexec`: targets opened as above, then marked FD_CLOEXEC (the exec of argv closes them).
    BackgroundCommand(const std::vector<std::string>& argv, const std::vector<std::pair<int, int>>& fds = {},
                      const std::vector<int>& cloexec = {})
    {
        int out[2], err[2];
        if (::pipe2(out, O_CLOEXEC) < 0 || ::pipe2(err, O_CLOEXEC) < 0)
            throw std::runtime_error("pipe2");
        m_pid = ::fork();
        if (m_pid == 0) {
            int null = ::open("/dev/null", O_RDONLY);
            ::dup2(null, 0);
            ::dup2(out[1], 1);
            ::dup2(err[1], 2);
            std::vector<int> high;
            for (auto [target, source] : fds)
                high.push_back(::fcntl(source, F_DUPFD, 500));
            ::close_range(3, 499, 0);
            for (size_t i = 0; i < fds.size(); ++i)
                ::dup2(high[i], fds[i].first);
            ::close_range(500, ~0U, 0);
            for (int fd : cloexec)
                ::fcntl(fd, F_SETFD, FD_CLOEXEC);
            std::vector<char*> args;
            for (const std::string& a : argv)
                args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            ::execv(args[0], args.data());
            ::_exit(127);
        }
        ::close(out[1]);
        ::close(err[1]);
        m_out.reset(out[0]);
        m_err.reset(err[0]);
    }

    ~BackgroundCommand()
    {
        if (!m_reaped) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
    }

    pid_t pid() const { return m_pid; }

    bool running()
    {
        if (!m_reaped && ::waitpid(m_pid, &m_status, WNOHANG) == m_pid)
            m_reaped = true;
        return !m_reaped;
    }

    // Output until both pipes reach EOF, then the exit code.
    Result finish(int timeout_ms = 20000)
    {
        Result r;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        pollfd fds[2] = {{m_out.get(), POLLIN, 0}, {m_err.get(), POLLIN, 0}};
        for (int open = 2; open > 0;) {
            auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                ADD_FAILURE() << "timed out";
                ::kill(m_pid, SIGKILL);
                break;
            }
            if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR)
                break;
            for (int i = 0; i < 2; ++i) {
                if (fds[i].fd < 0 || !fds[i].revents)
                    continue;
                char buf[4096];
                ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
                if (n > 0) {
                    (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
                } else {
                    fds[i].fd = -1;
                    --open;
                }
            }
        }
        if (!m_reaped)
            ::waitpid(m_pid, &m_status, 0);
        m_reaped = true;
        r.code = WIFEXITED(m_status) ? WEXITSTATUS(m_status) : 128 + WTERMSIG(m_status);
        return r;
    }

private:
    pid_t m_pid = -1;
    int m_status = 0;
    bool m_reaped = false;
    UniqueFd m_out, m_err;
};

inline std::vector<std::string> minimal_cocoon_argv(const std::vector<std::string>& options,
                                                    const std::vector<std::string>& command)
{
    return args({{cocoon_bin()}, minimal_root(), options, command});
}

// Waits (up to 10 s) until pred() holds.
template <typename Pred> inline bool eventually(Pred pred)
{
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         std::chrono::steady_clock::now() < deadline;) {
        if (pred())
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred();
}

// Shell that prints "fd-open" if fd is open in the command (for reading with
// '<', writing with '>'); /proc may not be mountable (no PID namespace).
inline std::string fd_open_test(int fd, char direction)
{
    // stderr closed in a subshell: the shell's complaint needs no /dev/null.
    return "(exec 2>&-; true " + std::string(1, direction) + "&" + std::to_string(fd) + ") && echo fd-open; true";
}

inline bool hung_up(int fd)
{
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP);
}

// The pipe inode of fd, as /proc/PID/fd links name it.
inline std::string pipe_name(int fd)
{
    struct stat st;
    ::fstat(fd, &st);
    return "pipe:[" + std::to_string(st.st_ino) + "]";
}

}  // namespace cocoon::test
