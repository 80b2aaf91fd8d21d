// --fresh-home PATH: an empty tmpfs at PATH, mode 0700, owned by the command's
// uid, HOME=PATH; new for every run, and nothing of it reaches the host.
#include <gtest/gtest.h>

#include "tests/e2e/e2e.h"

namespace cocoon::test {
namespace {

const char* kDescribe = "echo HOME=$HOME; stat -c '%a %u %g' \"$HOME\"; id -u; id -g; ls -A \"$HOME\"; "
                        "grep \" $HOME \" /proc/self/mountinfo | grep -c ' - tmpfs '";

TEST(FreshHome, EmptyPrivateAndTheCommands)
{
    for (const auto& ids : std::vector<std::vector<std::string>>{
             {}, {"--unshare-user", "--uid", "0", "--gid", "0"}, {"--unshare-user", "--uid", "4321", "--gid", "99"}}) {
        Result r = in_sandbox(args({{"--proc", "/proc", "--fresh-home", "/home/agent"}, ids}), sh(kDescribe));
        ASSERT_EQ(r.code, 0) << r.err;
        auto l = lines(r.out);
        ASSERT_EQ(l.size(), 5u) << r.out;
        EXPECT_EQ(l[0], "HOME=/home/agent");
        EXPECT_EQ(l[1], "700 " + l[2] + " " + l[3]) << "mode and owner of the home";
        EXPECT_EQ(l[4], "1") << "one tmpfs mounted at the home";
    }
}

TEST(FreshHome, NewForEveryRunAndNeverOnTheHost)
{
    TempDir host;
    // The home sits where a host directory is bound: the tmpfs covers it.
    const std::vector<std::string> options = {"--bind", host.path(), "/home", "--fresh-home", "/home/agent"};
    Result first = in_sandbox(options, sh("echo memory > $HOME/.agent-memory && ls -A $HOME"));
    ASSERT_EQ(first.code, 0) << first.err;
    EXPECT_EQ(first.out, ".agent-memory\n");
    Result second = in_sandbox(options, sh("ls -A $HOME; echo end"));
    ASSERT_EQ(second.code, 0) << second.err;
    EXPECT_EQ(second.out, "end\n") << "the second run saw the first run's home";
    EXPECT_FALSE(exists(host / "agent/.agent-memory"));
}

TEST(FreshHome, AHomeSetLaterWins)
{
    Result r =
        in_sandbox({"--fresh-home", "/h", "--setenv", "HOME", "/elsewhere"}, sh("echo $HOME; ls -ld /h | cut -c1-10"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "/elsewhere\ndrwx------\n");
}

// --size bounds the home as it bounds a --tmpfs: a hostile agent cannot fill
// the host's memory through it. The home holds 64 KiB, not one byte more.
TEST(FreshHome, SizeBoundsIt)
{
    Result r =
        in_sandbox({"--dev", "/dev", "--size", "65536", "--fresh-home", "/h"},
                   sh("head -c 65536 /dev/zero > /h/a && echo fits; head -c 4096 /dev/zero > /h/b || echo full"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "fits\nfull\n");
    EXPECT_TRUE(contains(r.err, "No space left on device")) << r.err;
    // Unbounded without --size: the same writes both fit.
    Result control = in_sandbox({"--dev", "/dev", "--fresh-home", "/h"},
                                sh("head -c 65536 /dev/zero > /h/a && head -c 4096 /dev/zero > /h/b && echo both"));
    EXPECT_EQ(control.out, "both\n") << control.err;
}

TEST(FreshHome, RefusedWithoutAPath)
{
    Result r = cocoon({"--fresh-home"});
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(contains(r.err, "--fresh-home")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace cocoon::test
