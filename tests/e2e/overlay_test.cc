// End-to-end checks of --overlay-src with --overlay, --tmp-overlay and
// --ro-overlay, of --argv0 and of --level-prefix. Runs real sandboxes as
// whoever runs the tests; every host directory is the test user's own.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Two lower layers: "a" only in l1, "c" only in l2, "b" in both.
class Overlay : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::filesystem::create_directories(lower1());
        std::filesystem::create_directories(lower2());
        std::filesystem::create_directories(upper());
        std::filesystem::create_directories(work());
        write_file(lower1() + "/a", "a from l1\n");
        write_file(lower1() + "/b", "b from l1\n");
        write_file(lower2() + "/b", "b from l2\n");
        write_file(lower2() + "/c", "c from l2\n");
        m_before = files_under(m_dir.path());
    }
    void TearDown() override
    {
        EXPECT_EQ(mount_table(), m_mounts) << "the host's mount table changed";
        // overlayfs's WORKDIR/work has mode 0: let TempDir remove it.
        ::chmod((work() + "/work").c_str(), 0700);
    }

    std::string lower1() const { return m_dir / "l1"; }
    std::string lower2() const { return m_dir / "l2"; }
    std::string upper() const { return m_dir / "upper"; }
    std::string work() const { return m_dir / "work"; }
    std::vector<std::string> sources() const { return {"--overlay-src", lower1(), "--overlay-src", lower2()}; }

    TempDir m_dir;
    std::map<std::string, std::string> m_before;
    const std::vector<std::string> m_mounts = mount_table();
};

TEST_F(Overlay, LayersAreMergedAndTheLastSourceIsOnTop)
{
    const auto show = sh("cat /m/a /m/b /m/c");
    Result r = in_sandbox(args({sources(), {"--tmp-overlay", "/m"}}), show);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "a from l1\nb from l2\nc from l2\n");

    Result swapped = in_sandbox({"--overlay-src", lower2(), "--overlay-src", lower1(), "--ro-overlay", "/m"}, show);
    ASSERT_EQ(swapped.code, 0) << swapped.err;
    EXPECT_EQ(swapped.out, "a from l1\nb from l1\nc from l2\n");

    Result rw = in_sandbox(args({sources(), {"--overlay", upper(), work(), "/m"}}), show);
    ASSERT_EQ(rw.code, 0) << rw.err;
    EXPECT_EQ(rw.out, r.out);
}

TEST_F(Overlay, TmpOverlayWritesStayInTheSandbox)
{
    Result r = in_sandbox(args({sources(), {"--tmp-overlay", "/m"}}),
                          sh("echo changed > /m/b && echo new > /m/new && rm /m/a && mkdir /m/d && "
                             "cat /m/b /m/new && ls /m"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "changed\nnew\nb\nc\nd\nnew\n");
    EXPECT_EQ(files_under(m_dir.path()), m_before) << "a write reached a host directory";

    // A second sandbox starts from the sources again.
    Result again = in_sandbox(args({sources(), {"--tmp-overlay", "/m"}}), sh("cat /m/b; ls /m"));
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(again.out, "b from l2\na\nb\nc\n");
}

TEST_F(Overlay, TmpOverlayUpperIsReachableOnlyThroughDest)
{
    // Every mount point the sandbox has is one the options asked for (the
    // hidden tmpfs with the upper layer is not among them), and the overlay
    // names its layers only as /proc/self/fd links of the setup process.
    Result r = in_sandbox(args({sources(), {"--tmp-overlay", "/m", "--unshare-pid", "--proc", "/proc"}}),
                          sh("echo secret > /m/s && cut -d' ' -f5 /proc/self/mountinfo; "
                             "grep -c ' /m .*upperdir=/proc/self/fd/' /proc/self/mountinfo"));
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> got = lines(r.out);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.back(), "1") << r.out;
    got.pop_back();
    // (Below /proc: the read-only covers of sys, irq, ... that the kernel has.)
    std::set<std::string> points;
    for (const std::string& point : got)
        if (point.rfind("/proc/", 0) != 0)
            points.insert(point);
    EXPECT_EQ(points, (std::set<std::string>{"/", "/usr", "/m", "/proc"})) << r.out;
}

TEST_F(Overlay, OverlayWritesLandInRwsrc)
{
    Result r = in_sandbox(args({sources(), {"--overlay", upper(), work(), "/m"}}),
                          sh("echo changed > /m/b && echo new > /m/new && cat /m/b"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "changed\n");
    EXPECT_EQ(read_file(upper() + "/b"), "changed\n");
    EXPECT_EQ(read_file(upper() + "/new"), "new\n");
    // The lower layers are untouched; only RWSRC and WORKDIR changed.
    auto after = files_under(m_dir.path());
    for (auto* m : {&after, &m_before})
        std::erase_if(
            *m, [&](const auto& kv) { return kv.first.rfind(upper(), 0) == 0 || kv.first.rfind(work(), 0) == 0; });
    EXPECT_EQ(after, m_before);

    // What RWSRC holds is the top layer of the next sandbox.
    Result next = in_sandbox(args({sources(), {"--overlay", upper(), work(), "/m"}}), sh("cat /m/b /m/new"));
    ASSERT_EQ(next.code, 0) << next.err;
    EXPECT_EQ(next.out, "changed\nnew\n");
}

TEST_F(Overlay, RoOverlayRefusesWrites)
{
    Result r = in_sandbox(args({no_caps(), sources(), {"--ro-overlay", "/m"}}),
                          sh("cat /m/b; echo x > /m/b; echo x > /m/new; mkdir /m/d; exit 0"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "b from l2\n");
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
    for (const std::string& line : lines(r.err))
        EXPECT_TRUE(contains(line, "Read-only file system")) << r.err;
    EXPECT_EQ(files_under(m_dir.path()), m_before);
}

TEST_F(Overlay, OverlaysAreNosuidAndNodev)
{
    Result r = in_sandbox(args({sources(),
                                {"--tmp-overlay", "/t", "--overlay-src", lower1(), "--overlay", upper(), work(), "/w",
                                 "--unshare-pid", "--proc", "/proc"}}),
                          sh("grep -E ' /(t|w) ' /proc/self/mountinfo | cut -d' ' -f5,6"));
    ASSERT_EQ(r.code, 0) << r.err;
    for (const std::string& line : lines(r.out))
        EXPECT_TRUE(contains(line, "nosuid") && contains(line, "nodev")) << line;
    EXPECT_EQ(lines(r.out).size(), 2u) << r.out;
}

// Refused overlays: exit 1, one line naming the option or path, and nothing
// left on the host (mounts, files in the test's directory, processes).
class OverlayRefused : public Overlay {
protected:
    void TearDown() override
    {
        Overlay::TearDown();
        EXPECT_EQ(files_under(m_dir.path()), m_before) << "files appeared on the host";
        EXPECT_EQ(processes_with(m_marker), std::vector<pid_t>{}) << "a process outlived cocoon";
    }
    Result run_marked(const std::vector<std::string>& options)
    {
        return in_sandbox(args({{"--setenv", "COCOON_E2E_MARK", m_marker}, options}), {"true"});
    }
    const std::string m_marker = unique_marker("cocoon-overlay");
};

TEST_F(OverlayRefused, MissingSource)
{
    const std::string missing = m_dir / "missing";
    Result r = run_marked({"--overlay-src", lower1(), "--overlay-src", missing, "--overlay", upper(), work(), "/m"});
    expect_refused(r, {"--overlay-src " + missing + ": No such file or directory"});
    r = run_marked({"--overlay-src", lower1(), "--overlay", missing, work(), "/m"});
    expect_refused(r, {"--overlay RWSRC " + missing});
}

TEST_F(OverlayRefused, NoSourceOrTooFew)
{
    expect_refused(run_marked({"--tmp-overlay", "/m"}), {"--tmp-overlay requires at least one --overlay-src"});
    expect_refused(run_marked({"--overlay", upper(), work(), "/m"}), {"--overlay requires at least one --overlay-src"});
    expect_refused(run_marked({"--overlay-src", lower1(), "--ro-overlay", "/m"}),
                   {"--ro-overlay requires at least two --overlay-src"});
}

TEST_F(OverlayRefused, DanglingSource)
{
    expect_refused(run_marked({"--overlay-src", lower1()}), {"--overlay-src must be followed by"});
    expect_refused(run_marked({"--overlay-src", lower1(), "--tmpfs", "/m"}), {"--overlay-src must be followed by"});
}

TEST_F(OverlayRefused, WorkdirOnAnotherFilesystem)
{
    // The test directory is under /tmp; /dev/shm is a tmpfs of its own.
    Result probe = run({"/usr/bin/stat", "-c", "%d", upper(), "/dev/shm"});
    ASSERT_EQ(probe.code, 0) << probe.err;
    auto devs = lines(probe.out);
    ASSERT_EQ(devs.size(), 2u);
    if (devs[0] == devs[1])
        GTEST_SKIP() << upper() << " and /dev/shm are on one filesystem here: no second filesystem to name";
    expect_refused(run_marked({"--overlay-src", lower1(), "--overlay", upper(), "/dev/shm", "/m"}),
                   {"--overlay " + upper() + " /dev/shm: WORKDIR must be on the same filesystem"});
}

TEST_F(OverlayRefused, LevelPrefixMarksTheError)
{
    expect_refused(run_marked({"--level-prefix", "--overlay-src", m_dir / "missing", "--tmp-overlay", "/m"}),
                   {"--overlay-src " + m_dir / "missing"}, "<3>cocoon: ");
}

TEST(Argv0, IsWhatTheCommandSees)
{
    // $0 of "sh -c" is sh's argv[0]; the program is still found as "sh".
    Result r = in_sandbox({"--argv0", "renamed", "--unshare-pid", "--proc", "/proc"},
                          sh("echo \"$0\"; tr '\\0' '\\n' < /proc/$$/cmdline"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "renamed\nrenamed\n-c\necho \"$0\"; tr '\\0' '\\n' < /proc/$$/cmdline\n");

    Result plain = in_sandbox({}, sh("echo \"$0\""));
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(plain.out, "sh\n");
}

TEST(LevelPrefix, MarksErrorsFromTheSandboxSetup)
{
    const std::string missing = "/nonexistent-" + unique_marker("cocoon");
    Result r = in_sandbox({"--level-prefix", "--ro-bind", missing, "/x"}, {"true"});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "<3>cocoon: Can't find source path " + missing + ": No such file or directory\n");

    Result plain = in_sandbox({"--ro-bind", missing, "/x"}, {"true"});
    EXPECT_EQ(plain.err, "cocoon: Can't find source path " + missing + ": No such file or directory\n");

    // The command's own stderr is left alone.
    Result ok = in_sandbox({"--level-prefix"}, sh("echo mine >&2"));
    EXPECT_EQ(ok.code, 0);
    EXPECT_EQ(ok.err, "mine\n");
}

}  // namespace
}  // namespace cocoon::test
