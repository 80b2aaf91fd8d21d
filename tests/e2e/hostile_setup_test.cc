// A sandbox set-up taken over, or PID 1 once the command runs, may send the monitor anything on the
// setup channel: the monitor (the caller's rights) checks each datagram against the run's table
// (ns/monitor/setup_rules.h) and ends the sandbox at the first it refuses. The set-up misbehaves
// through a test-only hook (ns/setup/test_hook.h, built with -DCOCOON_TEST_HOOKS=ON: tools/test's
// ASan pass); each test then checks that cocoon exits 1 with one line naming the setup channel, that
// the monitor's fds did not change, and that nothing of the sandbox is left.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tests/e2e/stop_fixture.h"

namespace cocoon::test::stop_e2e {
namespace {

// The targets of `pid`'s open fds, sorted, but /proc and /sys files: the usage sampler opens those
// for a moment, and what a set-up could hand over is a socket or a directory. A path is "a path":
// the tmpfs roots the monitor holds (for the report) read as "/" once the sandbox's mount
// namespace is gone.
std::vector<std::string> fd_targets_but_paths(pid_t pid)
{
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        std::error_code link_ec;
        const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
        if (target.rfind("/proc/", 0) == 0 || target.rfind("/sys/", 0) == 0)
            continue;
        out.push_back(entry.path().filename().string() + " -> " + (target.rfind("/", 0) == 0 ? "a path" : target));
    }
    std::sort(out.begin(), out.end());
    return out;
}

// cocoon's lines but the hook's own.
std::vector<std::string> cocoon_lines(const std::string& output)
{
    std::vector<std::string> out;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);)
        if (!contains(line, "setup test hook"))
            out.push_back(line);
    return out;
}

// The hook fires this long after the first process (or PID 1) got to it: the monitor's fds are
// taken before (once the command runs, for late-*).
constexpr int kSetupHookDelayMs = 2500, kLateHookDelayMs = 5000;

class HostileSetup : public Stop {
protected:
    void SetUp() override
    {
        if (!cocoon_has_setup_hook())
            GTEST_SKIP() << cocoon_bin()
                         << " was built without -DCOCOON_TEST_HOOKS=ON (tools/test's ASan pass builds it with the "
                            "hooks): these tests need a set-up that misbehaves";
    }

    // Runs a sandbox whose set-up (or PID 1, for late-*) misbehaves as `mode` says, and checks what
    // must hold whatever it sent: the monitor's fds as before, cocoon's exit status 1 with one
    // line, the sandbox gone. Returns that line.
    std::string run(const std::string& mode)
    {
        const bool late = mode.rfind("late-", 0) == 0;
        const int delay = late ? kLateHookDelayMs : kSetupHookDelayMs;
        ::setenv("COCOON_TEST_SETUP_HOOK", (mode + ":" + std::to_string(delay)).c_str(), 1);
        // --tmpfs: set-up sends a tmpfs message for --json-status-fd (the Sandbox's report).
        Sandbox sandbox(agent({"--tmpfs", m_dir / "scratch"}, ": > ready\nexec sleep 30\n"), m_dir / "cocoon.out");
        ::unsetenv("COCOON_TEST_SETUP_HOOK");
        if (!sandbox.wait_started()) {
            ADD_FAILURE() << "no report: " << sandbox.output();
            return {};
        }
        if (late && !ready(sandbox)) {
            ADD_FAILURE() << "the command did not start: " << sandbox.output();
            return {};
        }
        const pid_t cocoon = sandbox.pid();
        // The monitor's fds once they settle, before the hook.
        std::vector<std::string> before = fd_targets_but_paths(cocoon);
        for (int same = 0, tries = 0; same < 2 && tries < 20; ++tries) {
            sleep_ms(100);
            std::vector<std::string> now = fd_targets_but_paths(cocoon);
            same = now == before ? same + 1 : 0;
            before = std::move(now);
        }
        const bool early = contains(sandbox.output(), "setup test hook");
        EXPECT_FALSE(early) << "the hook fired before the monitor's fds were taken: raise kSetupHookDelayMs";
        // The monitor holds on 1.5 s once it refused (test hook): its fds then.
        EXPECT_TRUE(wait_until([&] { return contains(sandbox.output(), "the monitor refused"); }, delay + 10000))
            << "the monitor did not refuse the setup channel: " << sandbox.output();
        // Security: no fd the set-up sent is kept (nor is one lost).
        if (!early) {
            const std::vector<std::string> after = fd_targets_but_paths(cocoon);
            EXPECT_EQ(after, before) << "before:" << listed(before) << "\nafter:" << listed(after);
        }
        auto status = sandbox.wait_status(10000);
        EXPECT_TRUE(exited_with(status, 1)) << show(status) << sandbox.output();
        const std::vector<std::string> lines = cocoon_lines(sandbox.output());
        EXPECT_EQ(lines.size(), 1U) << sandbox.output();
        // Nothing left: PID 1 (and with it the PID namespace) is gone. A set-up hook waits 30 s
        // after it misbehaved: cocoon's end within 10 s is the monitor's doing.
        EXPECT_FALSE(sandbox.pid1().running()) << "PID 1 outlived cocoon";
        if (late)
            EXPECT_TRUE(nothing_left(sandbox));
        else
            EXPECT_FALSE(exists(m_dir / "ready")) << "the command ran";
        return lines.empty() ? std::string() : lines.front();
    }
};

constexpr const char* kLine = "cocoon: the setup channel: ";

TEST_F(HostileSetup, ARepeatOfAOnceOnlyMessage)
{
    EXPECT_EQ(run("repeat"), std::string(kLine) + "a tmpfs message past its 1 time: ended the sandbox");
}

TEST_F(HostileSetup, AnUnknownKind)
{
    EXPECT_EQ(run("bad-kind"), std::string(kLine) + "a setup message of unknown type 127: ended the sandbox");
}

TEST_F(HostileSetup, AnExtraFd)
{
    EXPECT_EQ(run("extra-fd"), std::string(kLine) + "a setup message of type 'S' carried fds: ended the sandbox");
}

TEST_F(HostileSetup, AListenerKindThatWasNotPlanned)
{
    EXPECT_EQ(run("unplanned-listener"),
              std::string(kLine) +
                  "a --egress proxy listener message, which this run does not expect: ended the sandbox");
}

// Tmpfs messages of 64 fds each until the channel is full: the first is refused, the rest are
// never read (the kernel drops them, and their fds, with the channel).
TEST_F(HostileSetup, AFlood)
{
    EXPECT_EQ(run("flood"), std::string(kLine) + "a tmpfs message past its 1 time: ended the sandbox");
}

// PID 1, once the command runs: the monitor ends the running sandbox the same way.
TEST_F(HostileSetup, AListenerFromPid1OnceTheCommandRuns)
{
    EXPECT_EQ(run("late-listener"),
              std::string(kLine) +
                  "a --egress proxy listener message, which this run does not expect: ended the sandbox");
}

}  // namespace
}  // namespace cocoon::test::stop_e2e
