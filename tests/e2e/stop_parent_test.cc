// End-to-end checks of --die-with-parent: the sandbox ends with cocoon's parent process (exit or
// SIGKILL), and not when only the thread that started it ends.
#include <gtest/gtest.h>

#include "tests/e2e/stop_fixture.h"

namespace cocoon::test {
namespace {

using namespace stop_e2e;

// Reads exactly `size` bytes from a pipe, or fails after timeout_ms.
bool read_within(int fd, void* buf, size_t size, int timeout_ms)
{
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    size_t done = 0;
    while (done < size) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd pfd{fd, POLLIN, 0};
        if (left <= 0 || (::poll(&pfd, 1, static_cast<int>(left)) < 0 && errno != EINTR))
            return false;
        ssize_t n = ::read(fd, static_cast<char*>(buf) + done, size - done);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            return false;
        if (n > 0)
            done += static_cast<size_t>(n);
    }
    return true;
}

// cocoon started by an intermediate process (the test's child), from its main thread or from a
// thread that lives until end_thread(); the process lives on until end().
class IntermediateParent {
public:
    IntermediateParent(const std::vector<std::string>& args, const std::string& out_path, bool from_thread)
    {
        int json[2], report[2], control[2];
        if (::pipe2(json, O_CLOEXEC) || ::pipe2(report, O_CLOEXEC) || ::pipe2(control, O_CLOEXEC))
            throw std::runtime_error("pipe2 failed");
        UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        const std::vector<std::string> argv = cocoon_argv(args);
        m_pid = ::fork();
        if (m_pid == 0)
            intermediate(argv, json, report, control, out.get(), from_thread);
        ::close(json[1]);
        ::close(report[1]);
        ::close(control[0]);
        m_control.reset(control[1]);
        m_report.reset(report[0]);
        UniqueFd json_r(json[0]);
        pid_t cocoon = -1;
        if (m_pid < 0 || !read_within(m_report.get(), &cocoon, sizeof cocoon, 5000))
            throw std::runtime_error("the intermediate parent did not start cocoon");
        m_sandbox = std::make_unique<Sandbox>(cocoon, std::move(json_r), out_path);
    }

    ~IntermediateParent()
    {
        m_sandbox.reset();
        if (m_pid > 0) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
    }

    IntermediateParent(const IntermediateParent&) = delete;
    IntermediateParent& operator=(const IntermediateParent&) = delete;

    Sandbox& sandbox() { return *m_sandbox; }
    bool running() const { return m_pid > 0 && ::waitpid(m_pid, nullptr, WNOHANG) == 0; }

    // Ends the thread that started cocoon; true once the process has joined it.
    bool end_thread()
    {
        char joined = 0;
        return ::write(m_control.get(), "t", 1) == 1 && read_within(m_report.get(), &joined, 1, 5000) && joined == 'j';
    }

    // Ends the process, a normal exit or SIGKILL, and reaps it; false if it did not exit by itself.
    bool end(bool kill)
    {
        if (kill)
            ::kill(m_pid, SIGKILL);
        else
            m_control.reset();  // EOF: it exits 0
        bool exited = wait_until([&] { return ::waitpid(m_pid, nullptr, WNOHANG) == m_pid; }, 5000, 5);
        if (!exited) {
            ::kill(m_pid, SIGKILL);
            ::waitpid(m_pid, nullptr, 0);
        }
        m_pid = -1;
        return exited;
    }

private:
    [[noreturn]] static void intermediate(const std::vector<std::string>& argv, int json[2], int report_pipe[2],
                                          int control_pipe[2], int out, bool from_thread)
    {
        ::close(json[0]);
        ::close(report_pipe[0]);
        ::close(control_pipe[1]);
        const int report = report_pipe[1], control = control_pipe[0];
        auto read_control = [control] {
            char byte;
            while (::read(control, &byte, 1) < 0 && errno == EINTR) {}
        };
        auto launch = [&] {
            pid_t cocoon = spawn_cocoon(argv, json[1], out);
            (void)!::write(report, &cocoon, sizeof cocoon);
            ::close(json[1]);
        };
        if (from_thread) {
            std::thread([&] {
                launch();
                read_control();  // "t": end this thread
            }).join();
            (void)!::write(report, "j", 1);
        } else {
            launch();
        }
        read_control();  // EOF: exit
        ::_exit(0);
    }

    pid_t m_pid = -1;
    UniqueFd m_control, m_report;
    std::unique_ptr<Sandbox> m_sandbox;
};

class StopParent : public Stop {
protected:
    // cocoon --die-with-parent under an intermediate parent; the parent ends, then nothing of the
    // sandbox (nor cocoon) may remain within a second.
    void parent_death(bool from_thread, bool kill)
    {
        IntermediateParent parent(agent({"--die-with-parent"}, kDaemons + ": > ready\nwhile :; do sleep 0.05; done\n"),
                                  m_dir / "cocoon.out", from_thread);
        Sandbox& sandbox = parent.sandbox();
        ASSERT_TRUE(ready(sandbox));
        // The agent and both sleepers (the agent's short sleeps come and go).
        auto agent_pid = sandbox.find_child_of_pid1("agent.sh");
        ASSERT_TRUE(agent_pid) << "no agent under PID 1";
        std::vector<ProcessId> lasting{ProcessId::of(*agent_pid)};
        for (pid_t pid : processes_in_pid_ns(sandbox.pid_ns())) {
            const std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
            if (cmdline == std::string("sleep\0"
                                       "60\0",
                                       9) ||
                contains(cmdline, "> daemon"))
                lasting.push_back(ProcessId::of(pid));
        }
        ASSERT_EQ(lasting.size(), 3u) << describe(processes_in_pid_ns(sandbox.pid_ns()));

        if (from_thread) {
            // The thread that started cocoon ends, its process does not: that is no parent death.
            ASSERT_TRUE(parent.end_thread());
            sleep_ms(500);
            EXPECT_TRUE(parent.running());
            EXPECT_TRUE(sandbox.running()) << sandbox.output();
            EXPECT_TRUE(sandbox.pid1().running());
            for (const ProcessId& process : lasting)
                EXPECT_TRUE(process.running()) << describe({process.pid});
        }

        ASSERT_TRUE(parent.end(kill)) << "the intermediate parent did not exit";
        EXPECT_TRUE(nothing_left(sandbox));
        EXPECT_TRUE(wait_until([&] { return !sandbox.running(); }, 1000)) << "cocoon outlived its parent";
    }
};

TEST_F(StopParent, ParentExitEndsTheSandbox)
{
    parent_death(false, false);
}

TEST_F(StopParent, ParentKilledEndsTheSandbox)
{
    parent_death(false, true);
}

TEST_F(StopParent, ThreadEndIsNotParentDeath)
{
    parent_death(true, true);
}

}  // namespace
}  // namespace cocoon::test
