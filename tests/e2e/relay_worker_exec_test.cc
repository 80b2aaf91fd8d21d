// Issue 32, 1(a) and 1(d): the relay worker starts as a fresh image of cocoon's binary (as sshd
// re-executes itself), so it holds nothing of the monitor's memory (the caller's environment
// among it), and no file description of the caller's: its stderr is a pipe the monitor forwards,
// a regular-file --egress-log is a description of cocoon's own, O_APPEND, and a root caller's
// worker has a uid and gid of its own run's (relay/worker.h).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "relay/worker_config.h"
#include "tests/e2e/stop_fixture.h"

namespace cocoon::test::stop_e2e {
namespace {

using relay::kWorkerIdBase;

std::string slurp(const std::string& path, bool* readable = nullptr)
{
    std::ifstream in(path, std::ios::binary);
    if (readable)
        *readable = static_cast<bool>(in);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class WorkerExec : public Stop {
protected:
    void SetUp() override
    {
        ASSERT_EQ(::chmod(m_dir.path().c_str(), 0755), 0);
        m_target.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, (m_dir / "proxy.sock").c_str(), sizeof addr.sun_path - 1);
        ASSERT_EQ(::bind(m_target.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        ASSERT_EQ(::listen(m_target.get(), 8), 0);
    }

    // A sandbox with --relay and --egress whose --egress-log is `log` (given to cocoon as kInfoFd,
    // which --info-fd writes first), and the worker's pid once it has confined itself.
    std::unique_ptr<Sandbox> start_with_log(int log, pid_t& worker, const std::string& out = "cocoon.out")
    {
        auto sandbox = std::make_unique<Sandbox>(
            agent({"--unshare-net", "--relay", "3128", m_dir / "proxy.sock", "--egress", "3129", "--egress-allow",
                   "example.test", "--egress-log", std::to_string(kInfoFd)},
                  ": > ready\nwhile [ ! -e stop ]; do sleep 0.05; done\n"),
            m_dir / out, log);
        worker = -1;
        if (!sandbox->wait_started()) {
            ADD_FAILURE() << "no report: " << sandbox->output();
            return sandbox;
        }
        worker = relay_worker(sandbox->pid());
        std::string status;
        for (int i = 0; worker > 0 && i < 250 && status_field(status, "Seccomp") != "2"; ++i) {
            sleep_ms(20);
            status = slurp("/proc/" + std::to_string(worker) + "/status");
        }
        EXPECT_EQ(status_field(status, "Seccomp"), "2") << "the worker did not confine itself: " << sandbox->output();
        return sandbox;
    }

    // Ends the runs: each agent exits once ./stop exists, and the monitor then stops the worker and
    // removes the sandbox's cgroup (which a killed cocoon, SIGTERM included, leaves to the next
    // run).
    void end(std::initializer_list<Sandbox*> sandboxes)
    {
        write_file(m_dir / "stop", "");
        for (Sandbox* sandbox : sandboxes) {
            auto status = sandbox->wait_status(5000);
            EXPECT_TRUE(exited_with(status, 0)) << show(status) << sandbox->output();
        }
    }

    UniqueFd m_target;
};

// The worker's memory is a fresh image's: its environment is empty though the caller's holds a
// secret (which --clearenv would keep from the sandbox, and which the monitor's memory holds); its
// argv is the internal marker; its fds are exactly the ones it needs, at their numbers.
TEST_F(WorkerExec, AFreshImageWithAnEmptyEnvironmentAndOnlyItsFds)
{
    const std::string secret = unique_marker("cocoon-e2e-secret");
    UniqueFd log(::open((m_dir / "egress.log").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ::setenv("COCOON_E2E_WORKER_SECRET", secret.c_str(), 1);
    pid_t worker = -1;
    auto sandbox = start_with_log(log.get(), worker);
    ::unsetenv("COCOON_E2E_WORKER_SECRET");
    ASSERT_GT(worker, 0) << sandbox->output();
    const std::string proc = "/proc/" + std::to_string(worker);
    // The monitor has the secret (the test's check that it was there to leak).
    EXPECT_NE(slurp("/proc/" + std::to_string(sandbox->pid()) + "/environ").find(secret), std::string::npos);
    EXPECT_EQ(slurp(proc + "/cmdline"), std::string("cocoon-relay\0--internal-relay-worker\0", 37));

    // The worker is not dumpable, and its memory is its own user namespace's for a caller that is
    // not root (the exec made it there), which that caller owns: both root and the unprivileged
    // caller may look. Where a kernel or LSM says no (Yama), what can be asserted is the argv.
    bool readable = false;
    const std::string environ = slurp(proc + "/environ", &readable);
    std::error_code ec;
    std::map<int, std::string> fds;
    for (const auto& entry : std::filesystem::directory_iterator(proc + "/fd", ec)) {
        std::error_code link_ec;
        fds[std::stoi(entry.path().filename().string())] = std::filesystem::read_symlink(entry.path(), link_ec);
    }
    if (!readable || ec) {
        end({sandbox.get()});
        ASSERT_FALSE(is_root()) << "root could not read " << proc << "/environ or /fd";
        GTEST_SKIP() << "the worker's /proc/PID/environ and fd are not readable by this user here (not dumpable)";
    }
    EXPECT_EQ(environ, "") << "the worker's environment";

    auto starts = [](const std::string& text, const std::string& with) { return text.rfind(with, 0) == 0; };
    EXPECT_EQ(fds[0], "/dev/null");
    EXPECT_EQ(fds[1], "/dev/null");
    EXPECT_TRUE(starts(fds[2], "pipe:")) << "stderr: " << fds[2];
    EXPECT_TRUE(starts(fds[3], "socket:")) << fds[3];
    EXPECT_TRUE(starts(fds[4], "socket:")) << fds[4];
    EXPECT_EQ(fds[5], std::filesystem::canonical(m_dir / "egress.log").string());
    EXPECT_TRUE(starts(fds[6], "pipe:")) << fds[6];
    // Every other fd is one the worker made itself: sockets (the listeners handed over, its own),
    // epoll, timerfd, eventfd, the relay's pipes; nothing of the caller's (no file, no terminal),
    // and the options' memfd (fd 7) closed, its number free for the worker's own.
    for (const auto& [fd, target] : fds) {
        if (fd > 6) {
            EXPECT_TRUE(starts(target, "socket:") || starts(target, "anon_inode:") || starts(target, "pipe:"))
                << fd << " -> " << target;
        }
    }
    // The log is a description of cocoon's own: O_WRONLY | O_APPEND, though the test's is O_RDWR.
    const std::string info = slurp(proc + "/fdinfo/5");
    const size_t at = info.find("flags:");
    ASSERT_NE(at, std::string::npos) << info;
    const long flags = std::strtol(info.c_str() + at + 6, nullptr, 8);
    EXPECT_EQ(flags & O_ACCMODE, O_WRONLY) << info;
    EXPECT_EQ(flags & O_APPEND, O_APPEND) << info;
    end({sandbox.get()});
}

// A root caller's worker runs as kWorkerIdBase + the monitor's pid: two runs' workers do not
// share a uid (nor 65534 with every other run's).
TEST_F(WorkerExec, TwoRootRunsWorkersHaveIdsOfTheirOwn)
{
    if (!is_root())
        GTEST_SKIP() << "a worker's ids are the run's own for a root caller; others' have a user namespace";
    UniqueFd log1(::open((m_dir / "one.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    UniqueFd log2(::open((m_dir / "two.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    pid_t w1 = -1, w2 = -1;
    auto one = start_with_log(log1.get(), w1, "one.out");
    auto two = start_with_log(log2.get(), w2, "two.out");
    ASSERT_GT(w1, 0) << one->output();
    ASSERT_GT(w2, 0) << two->output();
    const std::string s1 = slurp("/proc/" + std::to_string(w1) + "/status");
    const std::string s2 = slurp("/proc/" + std::to_string(w2) + "/status");
    auto ids = [](uint32_t id) {
        const std::string n = std::to_string(id);
        return n + "\t" + n + "\t" + n + "\t" + n;
    };
    EXPECT_EQ(status_field(s1, "Uid"), ids(kWorkerIdBase + static_cast<uint32_t>(one->pid()))) << s1;
    EXPECT_EQ(status_field(s1, "Gid"), ids(kWorkerIdBase + static_cast<uint32_t>(one->pid()))) << s1;
    EXPECT_EQ(status_field(s2, "Uid"), ids(kWorkerIdBase + static_cast<uint32_t>(two->pid()))) << s2;
    EXPECT_NE(status_field(s1, "Uid"), status_field(s2, "Uid"));
    EXPECT_EQ(status_field(s1, "Groups"), "") << s1;
    end({one.get(), two.get()});
}

// A regular file the caller's uid cannot open for writing (handed down open by someone who
// could): cocoon cannot give the worker a description of its own, and refuses to start rather
// than share the caller's, through which the worker could rewrite the file.
TEST_F(WorkerExec, AnEgressLogThatCannotBeReopenedIsRefused)
{
    if (is_root())
        GTEST_SKIP() << "root opens any file for writing";
    const std::string path = m_dir / "locked.log";
    UniqueFd log(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    ASSERT_EQ(::chmod(path.c_str(), 0400), 0);
    Sandbox sandbox(agent({"--unshare-net", "--egress", "3129", "--egress-log", std::to_string(kInfoFd)}, "true\n"),
                    m_dir / "cocoon.out", log.get());
    auto status = sandbox.wait_status(10000);
    EXPECT_TRUE(exited_with(status, 1)) << show(status) << sandbox.output();
    EXPECT_EQ(sandbox.output(),
              "cocoon: Can't reopen --egress-log " + std::to_string(kInfoFd) + " for appending: Permission denied\n");
    EXPECT_FALSE(exists(m_dir / "ready"));
}

}  // namespace
}  // namespace cocoon::test::stop_e2e
