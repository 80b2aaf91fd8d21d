// End-to-end checks of refused command lines: exit 1, one "cocoon: " line on
// stderr naming the culprit, and no mount, process or file left on the host.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Every test starts from a snapshot of the host and checks in TearDown that
// the failed run left it as it was.
class BadInput : public ::testing::Test {
protected:
    void TearDown() override { m_host.expect_unchanged(); }

    TempDir m_dir;
    const HostSnapshot m_host{"cocoon-bad-input", m_dir.path()};
};

TEST_F(BadInput, UnknownOption)
{
    expect_refused(cocoon(args({m_host.mark(), {"--no-such-option", "true"}})), {"--no-such-option"});
}

TEST_F(BadInput, OptionMissingItsArguments)
{
    expect_refused(cocoon(args({m_host.mark(), {"--bind", m_dir.path()}})), {"--bind"});
}

TEST_F(BadInput, MissingBindSource)
{
    const std::string missing = m_dir / "missing";
    expect_refused(in_sandbox(args({m_host.mark(), {"--bind", missing, "/data"}}), {"true"}), {missing});
    EXPECT_FALSE(exists(missing));
}

TEST_F(BadInput, DotDotInDestination)
{
    const std::string dest = m_dir.path() + "/a/../b";
    expect_refused(in_sandbox(args({m_host.mark(), {"--bind", m_dir.path(), dest}}), {"true"}), {dest});
    EXPECT_FALSE(exists(m_dir / "a"));
    EXPECT_FALSE(exists(m_dir / "b"));
}

TEST_F(BadInput, MissingCommand)
{
    expect_refused(in_sandbox(m_host.mark(), {}), {"command"});
}

TEST_F(BadInput, NonexistentCommand)
{
    expect_refused(in_sandbox({}, {"/nonexistent-cmd", m_host.marker()}), {"/nonexistent-cmd"});
}

TEST_F(BadInput, NonexistentCommandWithPidNamespace)
{
    expect_refused(in_sandbox({"--unshare-pid"}, {"/nonexistent-cmd", m_host.marker()}), {"/nonexistent-cmd"});
}

TEST_F(BadInput, CalledAsBwrapSaysBwrap)
{
    TempDir bin;
    const std::string link = bin / "bwrap";
    ASSERT_EQ(::symlink(cocoon_bin().c_str(), link.c_str()), 0);

    expect_refused(run({link, "--setenv", "COCOON_E2E_MARK", m_host.marker(), "--no-such-option", "true"}),
                   {"--no-such-option"}, "bwrap: ");
    expect_refused(run(args({{link}, minimal_root(), {"/nonexistent-cmd", m_host.marker()}})), {"/nonexistent-cmd"},
                   "bwrap: ");
    // Control: the same binary under its own name says cocoon.
    expect_refused(cocoon({"--no-such-option", "true"}), {"--no-such-option"}, "cocoon: ");
}

// A fd number closed here, so closed in the cocoon that run() starts too.
int closed_fd()
{
    int fd = 20;
    while (::fcntl(fd, F_GETFD) >= 0)
        ++fd;
    return fd;
}

TEST_F(BadInput, ClosedFdForAnFdOption)
{
    const std::string fd = std::to_string(closed_fd());
    for (const char* option : {"--args", "--sync-fd", "--block-fd", "--seccomp", "--add-seccomp-fd"}) {
        SCOPED_TRACE(option);
        Result r = in_sandbox(args({m_host.mark(), {option, fd}}), {"true", m_host.marker()});
        expect_refused(r, {option});
        // The fd and the reason; for seccomp in bwrap's words, the option and fd after them.
        EXPECT_TRUE(contains(r.err, fd + ": Bad file descriptor") ||
                    contains(r.err, "Bad file descriptor (" + std::string(option) + " " + fd + ")"))
            << r.err;
    }
    Result r = in_sandbox(args({m_host.mark(), {"--unshare-user", "--info-fd", "1", "--userns-block-fd", fd}}),
                          {"true", m_host.marker()});
    expect_refused(r, {"--userns-block-fd " + fd});
}

TEST_F(BadInput, MissingLockFile)
{
    Result r = in_sandbox(args({m_host.mark(), {"--bind", m_dir.path(), "/data", "--lock-file", "/data/missing"}}),
                          {"true", m_host.marker()});
    expect_refused(r, {"Unable to open lock file /data/missing"});
}

// Security: installed setuid or setgid, cocoon would run with privileges its caller lacks on input
// the caller controls; it refuses at once (SECURITY.md, bwrap's CVE classes).
TEST_F(BadInput, SetuidOrSetgidInstallRefused)
{
    if (!is_root())
        GTEST_SKIP() << "needs root: only root can make a setuid-root copy that another user runs";
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    const std::string copy = dir / "cocoon";
    write_file(copy, read_file(cocoon_bin()), 0755);
    auto as_nobody = [&] {
        return run(args({{"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", copy},
                         m_host.mark(),
                         {"--ro-bind", "/", "/", "true"}}));
    };
    const Result plain = as_nobody();
    EXPECT_EQ(plain.code, 0) << "the same copy without the s bits must run for nobody: " << plain.err;
    for (mode_t mode : {04755, 02755}) {
        ASSERT_EQ(::chmod(copy.c_str(), mode), 0);
        expect_refused(as_nobody(), {"setuid or setgid"});
    }
}

}  // namespace
}  // namespace cocoon::test
