// End-to-end checks of the options that take data or modes: --file, --bind-data,
// --ro-bind-data, --bind-fd, --ro-bind-fd, --perms, --size, --chmod, --mqueue.
// Runs real sandboxes as whoever runs the tests; compares with /usr/bin/bwrap.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/bwrap.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Runs `program args...` through /bin/sh so that `redirs` (e.g. "3<file 4<dir")
// opens the fds the options name; `prelude` runs in that shell first; stdin is `input`.
Result run_with_fds(const std::string& program, const std::string& redirs, const std::vector<std::string>& options,
                    const std::vector<std::string>& command, const std::string& input, const std::string& prelude)
{
    std::vector<std::string> argv{"/bin/sh", "-c", prelude + "exec \"$@\" " + redirs, "sh", program};
    for (const auto* part : {&options, &command})
        argv.insert(argv.end(), part->begin(), part->end());
    return run(argv, input);
}

// A sandbox with a minimal root, its own PID namespace and /proc.
Result sandbox(const std::string& redirs, const std::vector<std::string>& options,
               const std::vector<std::string>& command, const std::string& input = "",
               const std::string& program = cocoon_bin(), const std::string& prelude = "")
{
    return run_with_fds(program, redirs, args({minimal_root(), {"--unshare-pid", "--proc", "/proc"}, options}), command,
                        input, prelude);
}

std::string stat_modes(const std::vector<std::string>& paths)
{
    std::string script = "stat -c '%n %a' ";
    for (const std::string& p : paths)
        script += p + " ";
    return script;
}

class DataMounts : public ::testing::Test {
protected:
    std::string data_path() const { return m_dir / "data"; }
    TempDir m_dir;
    const std::string m_data = unique_marker("cocoon-data") + "\nsecond line\n";
    void SetUp() override { write_file(data_path(), m_data); }
};

TEST_F(DataMounts, FileAndBindDataCopyTheFdsContents)
{
    // Bigger than one read of the copy loop, and from a pipe (stdin) too.
    std::string big(200000, 'x');
    big += "end\n";
    write_file(m_dir / "big", big);
    Result r = sandbox(
        "3<" + data_path() + " 4<" + m_dir / "big" + " 5<" + data_path(),
        {"--file", "3", "/etc/f", "--bind-data", "4", "/big", "--ro-bind-data", "5", "/rbd", "--file", "0", "/piped"},
        sh("cat /etc/f; wc -c < /big; tail -c 4 /big; cat /rbd /piped"), "from a pipe\n");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, m_data + std::to_string(big.size()) + "\nend\n" + m_data + "from a pipe\n");
}

TEST_F(DataMounts, DefaultModesAndPermsMatchBwrap)
{
    const std::string redirs =
        "3<" + data_path() + " 4<" + data_path() + " 5<" + data_path() + " 6<" + data_path() + " 7<" + data_path();
    const std::vector<std::string> options{
        "--file",  "3",           "/f",      "--bind-data", "4",       "/bd",  "--ro-bind-data", "5",   "/rbd",
        "--dir",   "/d",          "--tmpfs", "/t",          "--perms", "0700", "--file",         "6",   "/x/y/f",
        "--perms", "0750",        "--dir",   "/p/q",        "--perms", "0741", "--tmpfs",        "/tt", "--perms",
        "0640",    "--bind-data", "7",       "/z/bd",       "--perms", "0705", "--dir",          "/o/p"};
    const std::vector<std::string> paths{"/f", "/bd",  "/rbd", "/d", "/t",    "/x", "/x/y", "/x/y/f",
                                         "/p", "/p/q", "/tt",  "/z", "/z/bd", "/o", "/o/p"};
    // The caller's umask changes none of them, and the command still has it.
    const std::string umask = "umask 077; ";
    Result r = sandbox(redirs, options, sh(stat_modes(paths) + "; umask"), "", cocoon_bin(), umask);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "/f 666\n/bd 600\n/rbd 600\n/d 755\n/t 755\n/x 700\n/x/y 700\n/x/y/f 700\n/p 750\n/p/q 750\n"
                     "/tt 741\n/z 750\n/z/bd 640\n/o 705\n/o/p 705\n0077\n");

    if (std::string why = bwrap_unusable({"--unshare-pid", "--proc", "/proc"}); !why.empty())
        GTEST_SKIP() << "differential part skipped: " << why;
    Result b = sandbox(redirs, options, sh(stat_modes(paths) + "; umask"), "", kBwrap, umask);
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(r.out, b.out);
}

TEST_F(DataMounts, RoBindDataRefusesWritesAndBindDataStaysInTheSandbox)
{
    Result r =
        sandbox("3<" + data_path() + " 4<" + data_path(), {"--ro-bind-data", "3", "/ro", "--bind-data", "4", "/rw"},
                sh("echo changed > /rw && cat /rw; echo changed > /ro"));
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(r.out, "changed\n");
    EXPECT_TRUE(contains(r.err, "Read-only file system")) << r.err;
    EXPECT_EQ(read_file(data_path()), m_data) << "the sandbox's writes reached the host's file";
}

TEST_F(DataMounts, BindDataFileIsReachableOnlyAtItsDestination)
{
    auto before = mount_table();
    // The mount at /secret must be the only one of its filesystem; had the
    // data file been made in the root tmpfs (or anywhere in the tree), its
    // device would show up a second time.
    const std::string script =
        "dev=$(grep ' /secret ' /proc/self/mountinfo | cut -d' ' -f3); echo \"dev $dev\"; "
        "grep -c \" $dev \" /proc/self/mountinfo; grep ' /secret ' /proc/self/mountinfo | cut -d' ' -f4; "
        "[ \"$(stat -c %d /secret)\" != \"$(stat -c %d /)\" ] && echo other-device";
    Result r = sandbox("3<" + data_path(), {"--ro-bind-data", "3", "/secret"}, sh(script));
    ASSERT_EQ(r.code, 0) << r.err;
    auto out = lines(r.out);
    ASSERT_EQ(out.size(), 4u) << r.out;
    EXPECT_NE(out[0], "dev ") << r.out;
    EXPECT_EQ(out[1], "1") << r.out;
    EXPECT_TRUE(out[2].size() > 9 && out[2].substr(out[2].size() - 9) == "//deleted") << "still named: " << out[2];
    EXPECT_EQ(out[3], "other-device");
    EXPECT_EQ(mount_table(), before) << "the data tmpfs reached the host's mount table";
}

TEST_F(DataMounts, FdsDoNotReachTheCommand)
{
    const std::string dir = m_dir.path();
    Result r =
        sandbox("3<" + data_path() + " 4<" + data_path() + " 5<" + data_path() + " 6<" + dir + " 7<" + dir,
                {"--file", "3", "/f", "--bind-data", "4", "/bd", "--ro-bind-data", "5", "/rbd", "--bind-fd", "6", "/w",
                 "--ro-bind-fd", "7", "/r", "--file", "0", "/in"},
                sh("for fd in 0 3 4 5 6 7; do [ -e /proc/self/fd/$fd ] && echo open $fd; done; echo done"), "stdin\n");
    ASSERT_EQ(r.code, 0) << r.err;
    // Like bwrap, even fd 0 is closed once its data is read.
    EXPECT_EQ(r.out, "done\n");
}

TEST_F(DataMounts, SizeLimitsTheTmpfs)
{
    const std::vector<std::string> dev{"--dev", "/dev"};
    const auto write = sh("head -c 300000 /dev/zero > /small/x && echo wrote");
    Result limited = sandbox("", args({dev, {"--size", "65536", "--tmpfs", "/small"}}), write);
    EXPECT_NE(limited.code, 0);
    EXPECT_TRUE(contains(limited.err, "No space left on device")) << limited.err;
    // Control: the same write into a tmpfs without --size succeeds.
    Result unlimited = sandbox("", args({dev, {"--tmpfs", "/small"}}), write);
    EXPECT_EQ(unlimited.code, 0) << unlimited.err;
    EXPECT_EQ(unlimited.out, "wrote\n");
    Result options = sandbox("", {"--perms", "0700", "--size", "65536", "--tmpfs", "/small"},
                             sh("grep ' /small ' /proc/self/mountinfo; stat -c %a /small"));
    ASSERT_EQ(options.code, 0) << options.err;
    EXPECT_TRUE(contains(options.out, "size=64k")) << options.out;
    EXPECT_TRUE(contains(options.out, "\n700\n")) << options.out;
}

TEST_F(DataMounts, ChmodInOrderAndInsideTheRoot)
{
    Result r = sandbox("",
                       {"--dir", "/d", "--chmod", "0711", "/d", "--dir", "/target", "--symlink", "/target", "/link",
                        "--chmod", "0701", "/link"},
                       sh(stat_modes({"/d", "/target"})));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "/d 711\n/target 701\n");
    // An absolute link that would lead to the host's /tmp is followed inside
    // the sandbox only: the host directory keeps its mode.
    struct stat before;
    ASSERT_EQ(::stat(m_dir.path().c_str(), &before), 0);
    Result in_root = sandbox("", {"--symlink", m_dir.path(), "/escape", "--chmod", "0777", "/escape"}, {"true"});
    EXPECT_EQ(in_root.code, 1);
    EXPECT_TRUE(contains(in_root.err, "Can't chmod 0777 /escape")) << in_root.err;
    struct stat after;
    ASSERT_EQ(::stat(m_dir.path().c_str(), &after), 0);
    EXPECT_EQ(after.st_mode, before.st_mode);
    // bwrap applies --chmod in order, so it must come after what makes PATH.
    Result early = sandbox("", {"--chmod", "0711", "/d", "--dir", "/d"}, {"true"});
    EXPECT_EQ(early.code, 1);
    EXPECT_EQ(early.err, "cocoon: Can't chmod 0711 /d: No such file or directory\n");
}

TEST_F(DataMounts, BindFdBindsTheOpenDirectory)
{
    const std::string dir = m_dir.path();
    Result rw = sandbox("3<" + dir, {"--bind-fd", "3", "/w"},
                        sh("cat /w/data; echo new > /w/made; grep ' /w ' /proc/self/mountinfo"));
    ASSERT_EQ(rw.code, 0) << rw.err;
    EXPECT_TRUE(contains(rw.out, m_data)) << rw.out;
    EXPECT_TRUE(contains(rw.out, "nosuid,nodev")) << rw.out;
    EXPECT_EQ(read_file(m_dir / "made"), "new\n");

    Result ro = sandbox("3<" + dir, {"--ro-bind-fd", "3", "/r"}, sh("cat /r/data; echo new > /r/ro-made"));
    EXPECT_NE(ro.code, 0);
    EXPECT_EQ(ro.out, m_data);
    EXPECT_TRUE(contains(ro.err, "Read-only file system")) << ro.err;
    EXPECT_FALSE(exists(m_dir / "ro-made"));

    // A file works too.
    Result file = sandbox("3<" + data_path(), {"--ro-bind-fd", "3", "/etc/one"}, {"cat", "/etc/one"});
    ASSERT_EQ(file.code, 0) << file.err;
    EXPECT_EQ(file.out, m_data);
}

TEST_F(DataMounts, MqueueWithIpcNamespace)
{
    Result r =
        sandbox("", {"--unshare-ipc", "--mqueue", "/dev/mqueue"}, sh("grep ' /dev/mqueue ' /proc/self/mountinfo"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, " - mqueue ")) << r.out;
}

// Refused input: exit 1, one line naming the option (and the fd), nothing of
// the sandbox left on the host.
class DataMountsBad : public DataMounts {
protected:
    void SetUp() override
    {
        DataMounts::SetUp();
        m_host.emplace("cocoon-data-bad", m_dir.path());
    }
    void TearDown() override { m_host->expect_unchanged(); }

    // Refused, and the one line is exactly "cocoon: " + message.
    void expect_refused_with(const std::vector<std::string>& options, const std::string& redirs,
                             const std::string& message)
    {
        Result r = sandbox(redirs, args({m_host->mark(), options}), {"true", m_host->marker()});
        expect_refused(r, {message});
        EXPECT_EQ(r.err, "cocoon: " + message + "\n");
    }

    std::optional<HostSnapshot> m_host;  // taken once the data file exists
};

TEST_F(DataMountsBad, ClosedFds)
{
    for (const char* option : {"--file", "--bind-data", "--ro-bind-data", "--bind-fd", "--ro-bind-fd"})
        expect_refused_with({option, "9", m_dir / "out"}, "9<&-",
                            std::string("Invalid ") + option + " 9: Bad file descriptor");
}

TEST_F(DataMountsBad, FdsOfTheWrongKind)
{
    expect_refused_with({"--bind-data", "3", "/x"}, "3<" + m_dir.path(),
                        "Can't read --bind-data 3 for /x: Is a directory");
    expect_refused_with({"--file", "3", "/x"}, "3<" + m_dir.path(), "Can't read --file 3 for /x: Is a directory");
    // A pipe has no place in the mount tree to bind.
    Result r = sandbox("3<&0", {"--bind-fd", "3", "/x"}, {"true"}, "data");
    EXPECT_EQ(r.code, 1);
    EXPECT_TRUE(r.err.rfind("cocoon: Can't bind --bind-fd 3: not a file or directory (pipe:[", 0) == 0) << r.err;
}

// bwrap closes each fd after its first use, so a second use fails there too.
TEST_F(DataMountsBad, FdUsedTwice)
{
    expect_refused_with({"--file", "3", "/a", "--file", "3", "/b"}, "3<" + data_path(),
                        "--file 3: fd 3 is already used by --file");
    expect_refused_with({"--bind-data", "3", "/a", "--ro-bind-fd", "3", "/b"}, "3<" + data_path(),
                        "--ro-bind-fd 3: fd 3 is already used by --bind-data");
}

TEST_F(DataMountsBad, PermsAndSizeMisuse)
{
    expect_refused_with({"--perms", "0700", "--bind", m_dir.path(), "/x"}, "",
                        "--perms must be followed by an option that creates a file");
    expect_refused_with({"--perms", "0700", "--mqueue", "/x"}, "",
                        "--perms must be followed by an option that creates a file");
    expect_refused_with({"--perms", "800", "--dir", "/x"}, "", "--perms takes an octal argument <= 07777");
    expect_refused_with({"--size", "4096", "--dir", "/x"}, "", "--size must be followed by --tmpfs");
    expect_refused_with({"--size", "0", "--tmpfs", "/x"}, "", "--size takes a non-zero number of bytes");
}

TEST_F(DataMountsBad, SameMessagesAsBwrap)
{
    if (std::string why = bwrap_unusable({"--unshare-pid", "--proc", "/proc"}); !why.empty())
        GTEST_SKIP() << why;
    for (std::vector<std::string> options : {std::vector<std::string>{"--perms", "0700", "--symlink", "a", "/b"},
                                             {"--perms", "1", "--perms", "2", "--dir", "/d"},
                                             {"--size", "1", "--perms", "0700", "--dir", "/d"},
                                             {"--size", "0x", "--tmpfs", "/t"},
                                             {"--chmod", "0700", "/nonexistent"}}) {
        Result c = sandbox("", options, {"true"});
        Result b = sandbox("", options, {"true"}, "", kBwrap);
        EXPECT_EQ(c.code, 1);
        EXPECT_EQ(b.code, 1);
        ASSERT_EQ(c.err.rfind("cocoon: ", 0), 0u) << c.err;
        ASSERT_EQ(b.err.rfind("bwrap: ", 0), 0u) << b.err;
        EXPECT_EQ(c.err.substr(8), b.err.substr(7)) << options[0];
    }
}

}  // namespace
}  // namespace cocoon::test
