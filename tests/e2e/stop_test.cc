// End-to-end checks of how a sandbox stops: PID 1's exit status and reaping, signals from a
// supervisor (group walk, --forward-signals), --kill-after, and the sandbox dying with cocoon's parent.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/stop_support.h"

namespace cocoon::test {
namespace {

// No core files from the signals the agents get.
const std::string kPrologue = "ulimit -c 0\n";

// Appends one line per delivery of each named signal to `file`.
std::string log_traps(const std::vector<std::string>& names, const std::string& file = "log")
{
    std::string out;
    for (const std::string& name : names)
        out += "trap 'echo " + name + " >> " + file + "' " + name + "\n";
    return out;
}

// TERM is logged too, and ends the wait loop kWaitForTerm.
const std::string kTermTrap = "trap 'echo TERM >> log; : > term' TERM\n";
// dash runs a trap only once the foreground command is done: poll with short sleeps.
const std::string kWaitForTerm = "while [ ! -e term ]; do sleep 0.05; done\n";

// Two sleepers that leave the agent's care: one in a new session (setsid), one double-forked and
// so orphaned to PID 1. Both ignore INT, TERM and HUP: only the end of the sandbox ends them.
const std::string kDaemons = "setsid sh -c 'trap \"\" INT TERM HUP; echo $$ > daemon1; exec sleep 60' &\n"
                             "(sh -c 'trap \"\" INT TERM HUP; echo $$ > daemon2; exec sleep 60' &) &\n"
                             "while [ ! -s daemon1 ] || [ ! -s daemon2 ]; do sleep 0.02; done\n";

std::string describe(const std::vector<pid_t>& pids)
{
    std::string out;
    for (pid_t pid : pids) {
        std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
        std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
        out += "\n  " + std::to_string(pid) + ": " + cmdline;
    }
    return out;
}

::testing::AssertionResult nothing_left(const Sandbox& sandbox, int timeout_ms = 1000)
{
    if (sandbox.gone_within(timeout_ms))
        return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "still running in the sandbox after " << timeout_ms
                                         << " ms:" << describe(sandbox.remaining());
}

bool exited_with(const std::optional<int>& status, int code)
{
    return status && WIFEXITED(*status) && WEXITSTATUS(*status) == code;
}

bool killed_by(const std::optional<int>& status, int sig)
{
    return status && WIFSIGNALED(*status) && WTERMSIG(*status) == sig;
}

std::string show(const std::optional<int>& status)
{
    return status ? "wait status code " + std::to_string(code_of(*status)) : "still running";
}

// Each test runs a /bin/sh agent from a fresh directory, bound read-write at the same path and
// used as the working directory: the agent leaves its markers and logs there.
class Stop : public ::testing::Test {
protected:
    std::vector<std::string> options(const std::vector<std::string>& extra) const
    {
        return args({minimal_root(),
                     {"--unshare-pid", "--proc", "/proc", "--dev", "/dev", "--bind", m_dir.path(), m_dir.path(),
                      "--chdir", m_dir.path()},
                     extra});
    }

    std::vector<std::string> agent(const std::vector<std::string>& extra, const std::string& script) const
    {
        write_file(m_dir / "agent.sh", kPrologue + script, 0755);
        return args({options(extra), {"sh", m_dir / "agent.sh"}});
    }

    std::unique_ptr<Sandbox> start(const std::vector<std::string>& extra, const std::string& script) const
    {
        return std::make_unique<Sandbox>(agent(extra, script), m_dir / "cocoon.out");
    }

    bool appears(const std::string& name, int timeout_ms = 5000) const
    {
        return wait_until([&] { return exists(m_dir / name); }, timeout_ms);
    }

    std::string log(const std::string& name = "log") const { return read_file(m_dir / name); }

    bool log_becomes(const std::string& text, const std::string& name = "log") const
    {
        return wait_until([&] { return log(name) == text; }, 5000);
    }

    // The sandbox reported itself, the agent wrote ./ready, and its PID namespace is known: the
    // one the agent is in, which must be the one the report names (StatusReportNamesThePidNamespace
    // checks that the report names it).
    ::testing::AssertionResult ready(Sandbox& sandbox) const
    {
        if (!sandbox.wait_started())
            return ::testing::AssertionFailure() << "no report on --json-status-fd: " << sandbox.output();
        if (!appears("ready"))
            return ::testing::AssertionFailure() << "the agent never got ready: " << sandbox.output();
        if (!sandbox.locate_pid_ns())
            return ::testing::AssertionFailure() << "no readable child of PID 1 " << sandbox.pid1().pid;
        if (sandbox.reported_pid_ns() && *sandbox.reported_pid_ns() != sandbox.pid_ns())
            return ::testing::AssertionFailure() << "the report names PID namespace " << *sandbox.reported_pid_ns()
                                                 << ", the command runs in " << sandbox.pid_ns();
        return ::testing::AssertionSuccess();
    }

    // A supervisor that knows only cocoon's pid: it walks the process tree, then sends SIGINT and,
    // after a pause, SIGTERM to every process group it found. cocoon keeps bwrap's dispositions and
    // PID 1 forwards nothing, so the agent gets each signal exactly once.
    void group_walk_stop(const std::vector<std::string>& extra, bool agent_has_own_group)
    {
        auto sandbox = start(extra, log_traps({"INT"}) + kTermTrap + kDaemons + ": > ready\n" + kWaitForTerm +
                                        "sleep 0.3\necho done > cleanup\nexit 0\n");
        ASSERT_TRUE(ready(*sandbox));
        auto agent_pid = sandbox->find_child_of_pid1("agent.sh");
        ASSERT_TRUE(agent_pid) << "no agent under PID 1";
        const ProcessId agent = ProcessId::of(*agent_pid);

        // Collected before the first signal: cocoon dies of SIGINT, and the tree loses its root.
        const std::set<pid_t> groups = process_groups_under(sandbox->pid());
        ASSERT_EQ(groups.count(::getpgrp()), 0u) << "the walk would signal the test runner";
        EXPECT_EQ(groups.count(sandbox->pid()), 1u) << "cocoon leads its own group";
        auto agent_stat = proc_stat(agent.pid);
        ASSERT_TRUE(agent_stat);
        const pid_t agent_group = agent_stat->pgid;
        EXPECT_EQ(groups.count(agent_group), 1u);
        EXPECT_EQ(agent_group != sandbox->pid(), agent_has_own_group);
        EXPECT_GE(groups.size(), 2u) << "the setsid sleeper has a group of its own";

        // The agent's group last: with its own group, the agent must hear nothing through cocoon or
        // PID 1 (a duplicate sent a moment after the walk's own signal could merge with it unseen).
        for (pid_t group : groups)
            if (group != agent_group)
                ::kill(-group, SIGINT);
        sleep_ms(200);
        EXPECT_EQ(log(), "");
        ::kill(-agent_group, SIGINT);
        ASSERT_TRUE(log_becomes("INT\n")) << log();
        auto status = sandbox->wait_status(5000);
        EXPECT_TRUE(killed_by(status, SIGINT)) << "cocoon keeps SIGINT's default action; " << show(status);
        sleep_ms(300);  // a second INT, forwarded by PID 1 or cocoon, would be there by now
        EXPECT_EQ(log(), "INT\n");
        EXPECT_TRUE(agent.running()) << "the agent outlives cocoon until it chooses to exit";
        EXPECT_FALSE(exists(m_dir / "cleanup"));

        for (pid_t group : groups)
            ::kill(-group, SIGTERM);
        ASSERT_TRUE(appears("cleanup")) << log();
        EXPECT_TRUE(nothing_left(*sandbox));
        EXPECT_EQ(log(), "INT\nTERM\n");
    }

    // cocoon SIGKILLed: with `flag`, the whole sandbox goes with it.
    void sigkill_to_cocoon(const std::string& flag)
    {
        auto sandbox = start({flag}, kDaemons + ": > ready\nwhile :; do sleep 0.05; done\n");
        ASSERT_TRUE(ready(*sandbox));
        // Positive control: the scan sees the agent and both sleepers.
        ASSERT_GE(processes_in_pid_ns(sandbox->pid_ns()).size(), 3u)
            << describe(processes_in_pid_ns(sandbox->pid_ns()));

        ::kill(sandbox->pid(), SIGKILL);
        auto status = sandbox->wait_status(5000);
        EXPECT_TRUE(killed_by(status, SIGKILL)) << show(status);
        EXPECT_TRUE(nothing_left(*sandbox));
    }

    TempDir m_dir;
};

const std::string kWaitForGo = ": > ready\nwhile [ ! -e go ]; do sleep 0.02; done\n";

TEST_F(Stop, NormalExitGivesTheCommandsCode)
{
    auto sandbox = start({}, kWaitForGo + "exit 7\n");
    ASSERT_TRUE(ready(*sandbox));
    write_file(m_dir / "go", "");
    auto status = sandbox->wait_status(5000);
    EXPECT_TRUE(exited_with(status, 7)) << show(status) << sandbox->output();
    std::vector<std::string> report = sandbox->status_lines();
    ASSERT_EQ(report.size(), 2u);
    EXPECT_EQ(report[0].rfind("{ \"child-pid\": " + std::to_string(sandbox->pid1().pid), 0), 0u) << report[0];
    EXPECT_EQ(exit_status_only(report[1]), "{ \"exit-code\": 7 }");
    EXPECT_TRUE(nothing_left(*sandbox));
}

TEST_F(Stop, CrashReportsTheSignal)
{
    auto sandbox = start({}, kWaitForGo + "kill -SEGV $$\n");
    ASSERT_TRUE(ready(*sandbox));
    write_file(m_dir / "go", "");
    auto status = sandbox->wait_status(5000);
    EXPECT_TRUE(exited_with(status, 139)) << show(status) << sandbox->output();
    std::vector<std::string> report = sandbox->status_lines();
    ASSERT_EQ(report.size(), 2u);
    EXPECT_EQ(exit_status_only(report[1]), "{ \"exit-code\": 139, \"exit-signal\": 11 }");
    EXPECT_TRUE(nothing_left(*sandbox));
}

// --json-status-fd's first line names the sandbox's PID namespace, as bwrap's does. Checked on
// many sandboxes started at once on busy CPUs, as a loaded supervisor would.
TEST_F(Stop, StatusReportNamesThePidNamespace)
{
    // Busy CPUs: the race between the monitor's report and the sandbox's start shows more often.
    std::vector<std::jthread> spinners;
    for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); ++i)
        spinners.emplace_back([](std::stop_token stop) {
            while (!stop.stop_requested()) {}
        });

    int runs = 0;
    std::vector<std::string> unnamed;
    for (int round = 0; round < 12; ++round) {
        std::vector<std::unique_ptr<Sandbox>> sandboxes;
        for (int i = 0; i < 16; ++i)
            sandboxes.push_back(std::make_unique<Sandbox>(
                args({minimal_root(),
                      {"--unshare-pid", "--ro-bind", "/proc", "/proc", "readlink", "/proc/self/ns/pid"}}),
                m_dir / ("out" + std::to_string(i))));
        for (auto& sandbox : sandboxes) {
            auto status = sandbox->wait_status(5000);
            ASSERT_TRUE(exited_with(status, 0)) << show(status) << sandbox->output();
            std::vector<std::string> report = sandbox->status_lines();
            ASSERT_EQ(report.size(), 2u);
            ++runs;
            if (auto ns = Sandbox::json_number(report[0], "pid-namespace"))
                EXPECT_EQ(sandbox->output(), "pid:[" + std::to_string(*ns) + "]\n") << report[0];
            else
                unnamed.push_back(report[0]);
        }
    }
    EXPECT_TRUE(unnamed.empty()) << unnamed.size() << " of " << runs << " reports lack \"pid-namespace\", e.g. "
                                 << unnamed.front();
}

// The same with a slow --info-fd reader: cocoon blocks on the full info pipe meanwhile. Whether the
// sandbox starts in that time or waits for the reports (bwrap's order), the status report must
// still name the PID namespace.
TEST_F(Stop, StatusReportNamesThePidNamespaceBehindASlowInfoFd)
{
    int info[2];
    ASSERT_EQ(::pipe2(info, O_CLOEXEC), 0);
    UniqueFd info_r(info[0]), info_w(info[1]);
    // Full, and blocking again for cocoon, which shares the write end's file description.
    ::fcntl(info_w.get(), F_SETPIPE_SZ, 4096);
    ::fcntl(info_w.get(), F_SETFL, O_NONBLOCK);
    const std::string chunk(4096, 'x');
    while (::write(info_w.get(), chunk.data(), chunk.size()) > 0) {}
    ::fcntl(info_w.get(), F_SETFL, 0);

    Sandbox sandbox(agent({}, kWaitForGo + "exit 0\n"), m_dir / "cocoon.out", info_w.get());
    info_w.reset();
    sleep_ms(300);  // the sandbox starts now, unless cocoon holds it until the reports are out
    ::fcntl(info_r.get(), F_SETFL, O_NONBLOCK);
    char buf[4096];
    while (::read(info_r.get(), buf, sizeof buf) > 0) {}

    ASSERT_TRUE(ready(sandbox));
    EXPECT_TRUE(sandbox.reported_pid_ns()) << sandbox.status_lines().front();
    write_file(m_dir / "go", "");
    auto status = sandbox.wait_status(5000);
    EXPECT_TRUE(exited_with(status, 0)) << show(status) << sandbox.output();
    EXPECT_TRUE(nothing_left(sandbox));
}

// PID 1 ends with the agent: daemons it left behind neither delay cocoon nor survive it.
TEST_F(Stop, DaemonsDoNotOutliveTheAgent)
{
    auto sandbox = start({}, kDaemons + ": > ready\nwhile [ ! -e go ]; do sleep 0.02; done\nexit 0\n");
    ASSERT_TRUE(ready(*sandbox));
    // Positive control: the scan sees the agent and both sleepers.
    ASSERT_GE(processes_in_pid_ns(sandbox->pid_ns()).size(), 3u) << describe(processes_in_pid_ns(sandbox->pid_ns()));

    write_file(m_dir / "go", "");
    const auto go = Clock::now();
    auto status = sandbox->wait_status(5000);  // the sleepers would keep it for 60 s
    EXPECT_TRUE(exited_with(status, 0)) << show(status) << sandbox->output();
    EXPECT_LT(seconds_since(go), 5.0);
    EXPECT_EQ(exit_status_only(sandbox->last_status_line()), "{ \"exit-code\": 0 }");
    EXPECT_TRUE(nothing_left(*sandbox));
}

TEST_F(Stop, GroupWalkReachesTheAgentOnce)
{
    group_walk_stop({}, false);
}

TEST_F(Stop, GroupWalkReachesTheAgentOnceWithNewSession)
{
    group_walk_stop({"--new-session"}, true);
}

// Without --forward-signals, signals sent to PID 1 itself go nowhere: it neither passes them on
// nor dies of them.
TEST_F(Stop, Pid1ForwardsNothingByDefault)
{
    auto sandbox = start({}, log_traps({"INT", "TERM", "HUP", "QUIT", "USR1", "USR2"}) +
                                 ": > ready\nwhile [ ! -e stop ]; do sleep 0.05; done\nexit 0\n");
    ASSERT_TRUE(ready(*sandbox));
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH})
        ::kill(sandbox->pid1().pid, sig);
    sleep_ms(300);
    EXPECT_EQ(log(), "");
    EXPECT_TRUE(sandbox->pid1().running());
    EXPECT_TRUE(sandbox->running());

    write_file(m_dir / "stop", "");
    auto status = sandbox->wait_status(5000);
    EXPECT_TRUE(exited_with(status, 0)) << show(status) << sandbox->output();
    EXPECT_TRUE(nothing_left(*sandbox));
}

TEST_F(Stop, ForwardSignalsKeepsCocoonUntilTheAgentIsDone)
{
    auto sandbox = start({"--forward-signals"}, log_traps({"INT"}) + kTermTrap + ": > ready\n" + kWaitForTerm +
                                                    "sleep 0.3\necho done > cleanup\nexit 42\n");
    ASSERT_TRUE(ready(*sandbox));

    ::kill(sandbox->pid(), SIGINT);
    ASSERT_TRUE(log_becomes("INT\n")) << log();
    sleep_ms(200);
    EXPECT_TRUE(sandbox->running()) << "cocoon died of SIGINT";
    EXPECT_EQ(log(), "INT\n");

    ::kill(sandbox->pid(), SIGTERM);
    auto status = sandbox->wait_status(5000);
    EXPECT_TRUE(exited_with(status, 42)) << show(status) << sandbox->output();
    EXPECT_TRUE(exists(m_dir / "cleanup")) << "cocoon left before the agent's 0.3 s of cleanup";
    EXPECT_EQ(log(), "INT\nTERM\n");
    EXPECT_EQ(exit_status_only(sandbox->last_status_line()), "{ \"exit-code\": 42 }");
    EXPECT_TRUE(nothing_left(*sandbox));
}

// Every forwarded signal reaches the command's whole process group, once. The helper is a
// background job: dash ignores INT and QUIT there, so it logs the others.
TEST_F(Stop, ForwardSignalsReachTheCommandsGroup)
{
    write_file(m_dir / "helper.sh", log_traps({"USR1", "USR2", "WINCH", "HUP"}, "helper.log") +
                                        "trap 'echo TERM >> helper.log; exit 0' TERM\n"
                                        ": > helper-ready\nwhile :; do sleep 0.05; done\n");
    auto sandbox = start({"--forward-signals"}, log_traps({"USR1", "USR2", "WINCH", "HUP", "QUIT"}) + kTermTrap +
                                                    "sh helper.sh & helper=$!\n"
                                                    "while [ ! -e helper-ready ]; do sleep 0.02; done\n"
                                                    ": > ready\n" +
                                                    kWaitForTerm + "wait $helper\necho done > cleanup\nexit 5\n");
    ASSERT_TRUE(ready(*sandbox));

    std::string expected, helper_expected;
    for (auto [sig, name] :
         {std::pair{SIGUSR1, "USR1"}, {SIGUSR2, "USR2"}, {SIGWINCH, "WINCH"}, {SIGHUP, "HUP"}, {SIGQUIT, "QUIT"}}) {
        SCOPED_TRACE(name);
        ::kill(sandbox->pid(), sig);
        expected += std::string(name) + "\n";
        if (sig != SIGQUIT)
            helper_expected += std::string(name) + "\n";
        ASSERT_TRUE(log_becomes(expected)) << log();
        ASSERT_TRUE(log_becomes(helper_expected, "helper.log")) << log("helper.log");
        EXPECT_TRUE(sandbox->running());
    }

    ::kill(sandbox->pid(), SIGTERM);
    auto status = sandbox->wait_status(5000);
    EXPECT_TRUE(exited_with(status, 5)) << show(status) << sandbox->output();
    EXPECT_EQ(log(), expected + "TERM\n");
    EXPECT_EQ(log("helper.log"), helper_expected + "TERM\n");
    EXPECT_TRUE(nothing_left(*sandbox));
}

// --kill-after 1, SIGTERM to cocoon alone: the agent never hears of it (nothing forwards) and keeps
// running; one second later everything is SIGKILLed and cocoon exits 137.
TEST_F(Stop, KillAfterEndsAnAgentThatIgnoresTerm)
{
    auto sandbox = start({"--kill-after", "1"},
                         log_traps({"INT", "TERM", "HUP"}) + kDaemons + ": > ready\nwhile :; do sleep 0.05; done\n");
    ASSERT_TRUE(ready(*sandbox));

    const auto sent = Clock::now();
    ::kill(sandbox->pid(), SIGTERM);
    auto status = sandbox->wait_status(4000);
    const double elapsed = seconds_since(sent);
    EXPECT_TRUE(exited_with(status, 137)) << show(status) << sandbox->output();
    EXPECT_GE(elapsed, 0.95);
    EXPECT_LE(elapsed, 2.0);
    EXPECT_EQ(log(), "");
    EXPECT_EQ(exit_status_only(sandbox->last_status_line()), "{ \"exit-code\": 137, \"exit-signal\": 9 }");
    EXPECT_TRUE(nothing_left(*sandbox));
}

TEST_F(Stop, KillAfterEndsAForwardedAgentThatIgnoresTerm)
{
    auto sandbox = start({"--forward-signals", "--kill-after", "1"},
                         log_traps({"TERM"}) + kDaemons + ": > ready\nwhile :; do sleep 0.05; done\n");
    ASSERT_TRUE(ready(*sandbox));

    const auto sent = Clock::now();
    ::kill(sandbox->pid(), SIGTERM);
    auto status = sandbox->wait_status(4000);
    const double elapsed = seconds_since(sent);
    EXPECT_TRUE(exited_with(status, 137)) << show(status) << sandbox->output();
    EXPECT_GE(elapsed, 0.95);
    EXPECT_LE(elapsed, 2.0);
    EXPECT_EQ(log(), "TERM\n");
    EXPECT_TRUE(nothing_left(*sandbox));
}

// The timer is a deadline, not a delay: an agent that stops at once gives its own status.
TEST_F(Stop, KillAfterLetsAPromptAgentFinish)
{
    auto sandbox = start({"--forward-signals", "--kill-after", "5"},
                         "trap 'exit 3' TERM\n: > ready\nwhile :; do sleep 0.05; done\n");
    ASSERT_TRUE(ready(*sandbox));

    const auto sent = Clock::now();
    ::kill(sandbox->pid(), SIGTERM);
    auto status = sandbox->wait_status(6000);
    EXPECT_TRUE(exited_with(status, 3)) << show(status) << sandbox->output();
    EXPECT_LT(seconds_since(sent), 2.5);
    EXPECT_EQ(exit_status_only(sandbox->last_status_line()), "{ \"exit-code\": 3 }");
    EXPECT_TRUE(nothing_left(*sandbox));
}

TEST_F(Stop, SigkillToCocoonWithForwardSignalsEndsTheSandbox)
{
    sigkill_to_cocoon("--forward-signals");
}

TEST_F(Stop, SigkillToCocoonWithDieWithParentEndsTheSandbox)
{
    sigkill_to_cocoon("--die-with-parent");
}

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

TEST(StopOptions, ForwardSignalsAndKillAfterNeedAPidNamespace)
{
    TempDir dir;
    const std::vector<std::string> touch = {"touch", dir / "ran"};
    for (const std::vector<std::string>& option :
         {std::vector<std::string>{"--forward-signals"}, std::vector<std::string>{"--kill-after", "1"}}) {
        SCOPED_TRACE(option[0]);
        Result r = cocoon(args({minimal_root(), {"--bind", dir.path(), dir.path()}, option, touch}));
        EXPECT_EQ(r.code, 1);
        EXPECT_EQ(r.out, "");
        EXPECT_EQ(r.err.rfind("cocoon: ", 0), 0u) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << r.err;
        EXPECT_TRUE(contains(r.err, option[0])) << r.err;
        EXPECT_TRUE(contains(r.err, "--unshare-pid")) << r.err;
        EXPECT_FALSE(exists(dir / "ran"));
    }
    // Positive control: with a PID namespace the same command runs.
    Result r =
        cocoon(args({minimal_root(),
                     {"--bind", dir.path(), dir.path(), "--unshare-pid", "--forward-signals", "--kill-after", "1"},
                     touch}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(exists(dir / "ran"));
}

}  // namespace
}  // namespace cocoon::test
