// Refused --relay and --egress command lines: one line naming the option, and nothing left behind.

#include <gtest/gtest.h>

#include "tests/e2e/relay_e2e.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

// ---- Refused command lines ----------------------------------------------------------------------

class RelayBadInput : public ::testing::Test {
protected:
    void TearDown() override { m_host.expect_unchanged(); }

    // Refused at once (within 5 s), and no process of the sandbox still running (the command would
    // sleep for 10 s).
    void expect_refused_at_once(const std::vector<std::string>& options, const std::vector<std::string>& named)
    {
        const std::string& marker = m_host.marker();
        Background cocoon(args({minimal_root(), options, {"sh", "-c", "sleep 10; :", marker}}), m_dir.path());
        const std::optional<int> code = cocoon.wait(5000);
        const std::vector<pid_t> left = processes_with(marker);
        EXPECT_EQ(left, std::vector<pid_t>{}) << "the sandbox runs on after cocoon exited: " << cocoon.err();
        // Clean up, so that TearDown reports only what this did not see.
        for (pid_t pid : left)
            ::kill(pid, SIGKILL);
        const auto deadline = Clock::now() + std::chrono::seconds(2);
        while (!processes_with(marker).empty() && Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        expect_refused(Result{code.value_or(-1), cocoon.out(), cocoon.err()}, named);
    }

    TempDir m_dir;
    const std::string m_socket = m_dir / "proxy.sock";
    const HostSnapshot m_host{"cocoon-relay-bad-input"};
};

TEST_F(RelayBadInput, MissingSocket)
{
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_socket}, {"--relay", m_socket});
}

TEST_F(RelayBadInput, RelativeSocket)
{
    // Even when it names a socket from the current directory.
    Target target(m_socket);
    const std::string cwd = std::filesystem::current_path();
    std::filesystem::current_path(m_dir.path());
    expect_refused_at_once({"--unshare-all", "--relay", "3128", "proxy.sock"}, {"--relay", "proxy.sock", "absolute"});
    std::filesystem::current_path(cwd);
}

TEST_F(RelayBadInput, NotASocket)
{
    write_file(m_dir / "file", "not a socket");
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_dir / "file"}, {"--relay", m_dir / "file", "socket"});
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_dir.path()}, {"--relay", m_dir.path(), "socket"});
}

TEST_F(RelayBadInput, ALinkUnderNoFollowSources)
{
    // A link at the socket itself, and one in a directory on the way.
    Target target(m_socket);
    ASSERT_EQ(::symlink(m_socket.c_str(), (m_dir / "link.sock").c_str()), 0);
    ASSERT_EQ(::symlink(m_dir.path().c_str(), (m_dir / "dir").c_str()), 0);
    for (const std::string& path : {m_dir / "link.sock", m_dir / "dir/proxy.sock"})
        expect_refused_at_once({"--no-follow-sources", "--unshare-all", "--relay", "3128", path},
                               {"--relay 3128 " + path, "symbolic link", "--no-follow-sources"});
}

TEST_F(RelayBadInput, SamePortTwice)
{
    Target target(m_socket);
    Target other(m_dir / "other.sock");
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_socket, "--relay", "3128", other.path()},
                           {"--relay", "3128"});
}

TEST_F(RelayBadInput, NeedsItsOwnNetwork)
{
    Target target(m_socket);
    expect_refused_at_once({"--unshare-pid", "--relay", "3128", m_socket}, {"--relay", "--unshare-net"});
    expect_refused_at_once({"--unshare-all", "--share-net", "--relay", "3128", m_socket}, {"--relay", "--unshare-net"});
}

TEST_F(RelayBadInput, BadPort)
{
    Target target(m_socket);
    for (const char* port : {"0", "65536", "http", "-1"})
        expect_refused_at_once({"--unshare-all", "--relay", port, m_socket}, {"--relay", port});
    expect_refused_at_once({"--unshare-all", "--proxy-env", "0"}, {"--proxy-env"});
}

// A socket whose absolute path does not fit in sun_path: it is reached all the same, since the
// relay connects through its pinned fd's short /proc path.
TEST_F(Relay, ASocketPathLongerThanSunPath)
{
    const std::string deep = m_dir / std::string(100, 'd');
    ASSERT_EQ(::mkdir(deep.c_str(), 0755), 0);
    UniqueFd dir(::open(deep.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir.valid());
    Target target("/proc/self/fd/" + std::to_string(dir.get()) + "/proxy.sock");
    const std::string long_path = deep + "/proxy.sock";
    ASSERT_GT(long_path.size(), sizeof(sockaddr_un::sun_path));
    ASSERT_TRUE(exists(long_path));
    Result r = run(args({{cocoon_bin()},
                         minimal_root(),
                         {"--unshare-all", "--relay", kPortText, long_path, "--ro-bind", m_helper, "/helper"},
                         {"--setenv", kHelperEnv, client_spec("echo"), "/helper"}}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "echo: ok\n") << r.err;
}

class EgressBadInput : public RelayBadInput {};

TEST_F(EgressBadInput, RefusedWithTheOptionNamed)
{
    expect_refused_at_once({"--unshare-pid", "--egress", "3128"}, {"--egress", "--unshare-net"});
    expect_refused_at_once({"--unshare-all", "--egress", "0"}, {"--egress", "0"});
    expect_refused_at_once({"--unshare-all", "--egress-allow", "a.b"}, {"--egress-allow", "--egress"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress-allow", "a b"}, {"--egress-allow", "a b"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress-allow", "::1"}, {"--egress-allow", "::1"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress", "3129"}, {"--egress", "twice"});
    expect_refused_at_once({"--unshare-all", "--egress-log", "1"}, {"--egress-log", "--egress"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress-log", "97"}, {"--egress-log", "97"});
}

}  // namespace
}  // namespace cocoon::test
