// End-to-end checks of the fds a caller hands over by leaving them open without FD_CLOEXEC (as
// Codex hands its proxy sockets to the sandbox): the command gets each at its number, as under
// /usr/bin/bwrap; --close-fds closes them; nothing of cocoon's own crosses; an fd an option names
// reaches the command where bwrap's does. Runs as the test's caller (root or not).
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/fd_support.h"
#include "tests/support/bwrap.h"

namespace cocoon::test {
namespace {

using namespace std::string_literals;

// The command line of Codex's managed network proxy mode, reduced: a whole-host read-only root,
// every namespace but the mount one's neighbours, and the command reading fd 4.
std::vector<std::string> codex_argv(const std::string& bin, const std::vector<std::string>& extra,
                                    const std::string& script)
{
    return args({{bin},
                 extra,
                 {"--as-pid-1",
                  "--new-session",
                  "--die-with-parent",
                  "--ro-bind",
                  "/",
                  "/",
                  "--dev",
                  "/dev",
                  "--unshare-user",
                  "--unshare-pid",
                  "--unshare-ipc",
                  "--unshare-net",
                  "--proc",
                  "/proc",
                  "--cap-drop",
                  "ALL",
                  "--",
                  "sh",
                  "-c",
                  script}});
}

// Reads a line from fd 4 and names what fd 6 is, from the sandbox's /proc.
const std::string kReadFd4 = "read x <&4 && echo \"got $x\"; echo \"fd6 $(readlink /proc/self/fd/6)\"";

// Shell that prints "fd N" for each fd from 3 to 20 open in the command (a dup of it succeeds;
// no /proc needed), in order.
const std::string kListFds = "for f in $(seq 3 20); do (exec 2>&-; true <&$f) && echo fd $f; done; true";

std::vector<std::string> fd_lines(std::initializer_list<int> fds)
{
    std::vector<std::string> out;
    for (int fd : fds)
        out.push_back("fd " + std::to_string(fd));
    return out;
}

UniqueFd open_null()
{
    return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

TEST(FdHandover, CodexProxyFdsReachTheCommand)
{
    UniqueFd four = pipe_holding("hello\n");
    Pipe six;
    Result r =
        BackgroundCommand(codex_argv(cocoon_bin(), {}, kReadFd4), {{4, four.get()}, {6, six.read.get()}}).finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "got hello\nfd6 " + pipe_name(six.read.get()) + "\n") << r.err;
}

TEST(FdHandover, CloseFdsClosesThem)
{
    UniqueFd four = pipe_holding("hello\n");
    Pipe six;
    Result r = BackgroundCommand(codex_argv(cocoon_bin(), {"--close-fds"}, kReadFd4 + "; " + kListFds),
                                 {{4, four.get()}, {6, six.read.get()}})
                   .finish();
    EXPECT_EQ(r.code, 0) << r.err;
    // The read fails (fd 4 is closed), fd 6 is no link in /proc, and no fd above 2 is open.
    EXPECT_EQ(r.out, "fd6 \n") << r.err;
    EXPECT_TRUE(contains(r.err, "Bad file descriptor")) << r.err;
}

// The monitor and the sandbox's PID 1 hold no copy of a handed-over fd: once the command closes
// it, its reader sees EOF while the sandbox still runs (bwrap's monitor and init close theirs too).
void check_only_the_command_holds(const std::vector<std::string>& extra)
{
    TempDir out;
    Pipe six;
    BackgroundCommand b(
        minimal_cocoon_argv(args({extra, {"--bind", out.path(), "/out"}}),
                            sh("exec 6>&-; touch /out/started; while [ ! -e /out/go ]; do sleep 0.02; done")),
        {{6, six.write.get()}});
    six.write.reset();
    ASSERT_TRUE(eventually([&] { return exists(out / "started"); })) << b.finish().err;
    EXPECT_TRUE(eventually([&] { return hung_up(six.read.get()); })) << "fd 6 is held outside the command";
    EXPECT_TRUE(b.running());
    write_file(out / "go", "");
    Result r = b.finish();
    EXPECT_EQ(r.code, 0) << r.err;
}

TEST(FdHandover, OnlyTheCommandHoldsThemWithoutPidNamespace)
{
    check_only_the_command_holds({});
}

TEST(FdHandover, OnlyTheCommandHoldsThemWithPidNamespace)
{
    check_only_the_command_holds({"--unshare-pid"});
}

// --info-fd with a user namespace: PID 1 runs as a fresh image of cocoon (ARCHITECTURE.md).
TEST(FdHandover, OnlyTheCommandHoldsThemWithAFreshPidOne)
{
    check_only_the_command_holds({"--unshare-user", "--unshare-pid", "--info-fd", "2"});
}

TEST(FdHandover, WithCloseFdsTheMonitorHoldsNoneEither)
{
    TempDir out;
    Pipe six;
    BackgroundCommand b(minimal_cocoon_argv({"--close-fds", "--unshare-pid", "--bind", out.path(), "/out"},
                                            sh("touch /out/started; while [ ! -e /out/go ]; do sleep 0.02; done")),
                        {{6, six.write.get()}});
    six.write.reset();
    ASSERT_TRUE(eventually([&] { return exists(out / "started"); })) << b.finish().err;
    EXPECT_TRUE(hung_up(six.read.get())) << "fd 6 is held";
    write_file(out / "go", "");
    EXPECT_EQ(b.finish().code, 0);
}

// What crosses is exactly 0-2 and the caller's inheritable fds: not an fd the caller marked
// FD_CLOEXEC (its exec of cocoon closed it), and nothing of cocoon's own (the setup channel, the
// O_PATH fd of its image, the relay's and the report's fds), in each way the command is started.
TEST(FdHandover, NothingElseCrosses)
{
    const std::vector<std::vector<std::string>> ways = {
        {},
        {"--unshare-pid"},
        {"--unshare-pid", "--as-pid-1"},
        {"--unshare-user", "--unshare-pid", "--json-status-fd", "2"},
        {"--unshare-net", "--unshare-pid", "--egress", "3128", "--json-status-fd", "2"},
        {"--new-session", "--die-with-parent", "--forward-signals", "--unshare-pid"},
    };
    for (const auto& extra : ways) {
        UniqueFd four = open_null(), six = open_null(), seven = open_null();
        Result r = BackgroundCommand(minimal_cocoon_argv(extra, sh(kListFds)),
                                     {{4, four.get()}, {6, six.get()}, {7, seven.get()}}, {7})
                       .finish();
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(lines(r.out), fd_lines({4, 6})) << testing::PrintToString(extra) << r.err;
        Result closed = BackgroundCommand(minimal_cocoon_argv(args({{"--close-fds"}, extra}), sh(kListFds)),
                                          {{4, four.get()}, {6, six.get()}})
                            .finish();
        ASSERT_EQ(closed.code, 0) << closed.err;
        EXPECT_EQ(closed.out, "") << testing::PrintToString(extra);
    }
}

// --- against /usr/bin/bwrap ---

class FdHandoverBwrap : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = bwrap_unusable(); !why.empty())
            GTEST_SKIP() << why;
    }
};

TEST_F(FdHandoverBwrap, CodexProxyFdsTheSame)
{
    auto one = [](const std::string& bin) {
        UniqueFd four = pipe_holding("hello\n");
        UniqueFd six = open_null();
        return BackgroundCommand(codex_argv(bin, {}, kReadFd4), {{4, four.get()}, {6, six.get()}}).finish();
    };
    Result c = one(cocoon_bin()), b = one(kBwrap);
    ASSERT_EQ(c.code, 0) << c.err;
    EXPECT_EQ(c.out, "got hello\nfd6 /dev/null\n");
    EXPECT_EQ(c.code, b.code) << b.err;
    EXPECT_EQ(c.out, b.out);
}

// Each option that names fd 5, with fd 6 handed over beside it: the command sees the same fds
// under both. bwrap closes each such fd before the command runs but --sync-fd with --as-pid-1.
TEST_F(FdHandoverBwrap, OptionFdsTheSame)
{
    struct Case {
        std::vector<std::string> options;
        std::string data;  // what fd 5 holds (a pipe); output options get a pipe's write end
        bool output = false;
        std::vector<std::string> expected;
    };
    const std::string allow_all("\x06\0\0\0\0\0\xff\x7f", 8);
    const std::vector<Case> cases = {
        {{}, "", false, fd_lines({5, 6})},
        {{"--info-fd", "5"}, "", true, fd_lines({6})},
        {{"--json-status-fd", "5"}, "", true, fd_lines({6})},
        {{"--sync-fd", "5"}, "", true, fd_lines({6})},
        {{"--unshare-pid", "--sync-fd", "5"}, "", true, fd_lines({6})},
        {{"--unshare-pid", "--as-pid-1", "--sync-fd", "5"}, "", true, fd_lines({5, 6})},
        {{"--block-fd", "5"}, "x", false, fd_lines({6})},
        {{"--tmpfs", "/tmp", "--file", "5", "/tmp/f"}, "data", false, fd_lines({6})},
        {{"--tmpfs", "/tmp", "--bind-data", "5", "/tmp/f"}, "data", false, fd_lines({6})},
        {{"--tmpfs", "/tmp", "--ro-bind-data", "5", "/tmp/f"}, "data", false, fd_lines({6})},
        {{"--seccomp", "5"}, allow_all, false, fd_lines({6})},
        {{"--add-seccomp-fd", "5"}, allow_all, false, fd_lines({6})},
        {{"--args", "5"}, "--setenv\0A\0b\0"s, false, fd_lines({6})},
    };
    for (const Case& c : cases) {
        auto one = [&](const std::string& bin) {
            Pipe five;
            UniqueFd data = c.output ? UniqueFd() : pipe_holding(c.data);
            UniqueFd six = open_null();
            const int fd5 = c.output ? five.write.get() : data.get();
            return BackgroundCommand(args({{bin}, minimal_root(), c.options, sh(kListFds)}), {{5, fd5}, {6, six.get()}})
                .finish();
        };
        Result mine = one(cocoon_bin()), theirs = one(kBwrap);
        const std::string what = testing::PrintToString(c.options);
        ASSERT_EQ(mine.code, 0) << what << mine.err;
        EXPECT_EQ(lines(mine.out), c.expected) << what;
        EXPECT_EQ(theirs.code, 0) << what << theirs.err;
        EXPECT_EQ(mine.out, theirs.out) << what;
    }
}

// --bind-fd: bwrap closes it too; an O_PATH fd of a directory.
TEST_F(FdHandoverBwrap, BindFdTheSame)
{
    TempDir dir;
    auto one = [&](const std::string& bin) {
        UniqueFd five(::open(dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        UniqueFd six = open_null();
        return BackgroundCommand(args({{bin}, minimal_root(), {"--bind-fd", "5", "/d"}, sh(kListFds)}),
                                 {{5, five.get()}, {6, six.get()}})
            .finish();
    };
    Result mine = one(cocoon_bin()), theirs = one(kBwrap);
    ASSERT_EQ(mine.code, 0) << mine.err;
    EXPECT_EQ(lines(mine.out), fd_lines({6}));
    EXPECT_EQ(mine.out, theirs.out) << theirs.err;
}

}  // namespace
}  // namespace cocoon::test
