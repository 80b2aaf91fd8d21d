// End-to-end checks of the sandbox's mounts: --bind, --ro-bind (submounts
// included), --tmpfs, relative destinations, and nothing leaking to the host; and the attributes
// every cloned mount gets, whether the kernel makes the clone and sets them in one call
// (open_tree_attr) or refuses that call.
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <sstream>
#include <string>

#include "tests/e2e/e2e.h"
#include "tests/e2e/no_openat2.h"

namespace cocoon::test {
namespace {

TEST(Binds, RoBindIsReadOnly)
{
    TempDir host;
    Result r = in_sandbox({"--ro-bind", host.path(), "/data"}, {"touch", "/data/x"});
    EXPECT_NE(r.code, 0);
    EXPECT_TRUE(contains(r.err, "Read-only file system")) << r.err;
    EXPECT_FALSE(exists(host / "x"));
}

TEST(Binds, RoBindSubmountsAreReadOnly)
{
    // Host /dev/shm is a writable tmpfs mounted below /: prove it, then show
    // that --ro-bind / / makes it read-only as well.
    const std::string name = unique_marker("cocoon-ro");
    const std::string path = "/dev/shm/" + name;
    write_file(path, "host");
    ASSERT_TRUE(exists(path)) << "host /dev/shm is not writable; the check below would prove nothing";
    ::unlink(path.c_str());

    Result r = cocoon(args({{"--ro-bind", "/", "/"}, {"touch", path}}));
    bool leaked = exists(path);
    ::unlink(path.c_str());
    EXPECT_NE(r.code, 0);
    EXPECT_TRUE(contains(r.err, "Read-only file system")) << r.err;
    EXPECT_FALSE(leaked) << path << " was created on the host";
}

TEST(Binds, BindIsWritable)
{
    TempDir host;
    Result r = in_sandbox({"--bind", host.path(), "/data"}, sh("echo from-sandbox > /data/x"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_file(host / "x"), "from-sandbox\n");
}

// Binds of files and symlinks in one directory reuse its fd (mount/new_root.h, ParentDirs); a
// directory mounted over it in between must take the next ones, and a link already at a file's
// destination still takes the usual way.
TEST(Binds, FilesAfterADirectoryMountedOverTheirsGoIntoTheNewOne)
{
    TempDir host;
    write_file(host / "f", "file\n");
    TempDir over;
    Result r = in_sandbox({"--ro-bind", host / "f", "/x/a", "--symlink", "a", "/x/l", "--bind", over.path(), "/x",
                           "--ro-bind", host / "f", "/x/b", "--symlink", "b", "/x/m", "--ro-bind", host / "f", "/x/m"},
                          sh("ls /x; cat /x/b /x/m"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "b\nm\nfile\nfile\n");
    // The new mount points were made in the directory bound over /x, which is the host's.
    EXPECT_TRUE(exists(over / "b"));
}

TEST(Tmpfs, EmptyAndWritable)
{
    Result r = in_sandbox({"--tmpfs", "/scratch"},
                          sh("ls -A /scratch; echo ---; echo written > /scratch/f && cat /scratch/f"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "---\nwritten\n");
}

TEST(Tmpfs, RelativeDestinationIsUnderTheSandboxRoot)
{
    Result r = in_sandbox({"--tmpfs", "scratch"}, sh("touch /scratch/x && ls /scratch"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "x\n");
}

TEST(Mounts, NothingLeaksToTheHostMountTable)
{
    TempDir host;
    auto before = mount_table();
    Result r = in_sandbox(
        {"--bind", host.path(), "/data", "--tmpfs", "/data/t", "--dev", "/dev", "--unshare-pid", "--proc", "/proc"},
        sh("touch /data/t/x && ls /dev/null /proc/1"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(mount_table(), before);
    EXPECT_FALSE(exists(host / "t/x"));
}

// open_tree_attr(2) (Linux 6.15) makes a clone and sets its attributes in one call; where it is
// refused (ENOSYS on older kernels, a container's seccomp profile's EPERM), cocoon makes the two
// calls. Either way every clone has its attributes: --ro-bind's read-only (submounts included),
// --dev's nodes nosuid, the /proc covers read-only, --ro-bind-data's file read-only.
constexpr long kOpenTreeAttr = 467;

std::map<std::string, std::string> mount_options(const Result& r)
{
    std::map<std::string, std::string> out;
    std::istringstream lines(r.out);
    for (std::string mountpoint, options; lines >> mountpoint >> options;)
        out[mountpoint] = options;
    return out;
}

Result clone_attributes_run()
{
    return cocoon(args({{"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind-data",
                         "0", "/tmp/data"},
                        {"awk", "{print $5, $6}", "/proc/self/mountinfo"}}),
                  "data");
}

bool starts_with(const std::string& s, const std::string& prefix)
{
    return s.compare(0, prefix.size(), prefix) == 0;
}

void expect_clone_attributes(const Result& r, const std::string& mode)
{
    ASSERT_EQ(r.code, 0) << mode << ": " << r.out << r.err;
    std::map<std::string, std::string> got = mount_options(r);
    auto has = [&](const std::string& mountpoint, const std::string& option) {
        const std::string options = "," + got[mountpoint] + ",";
        return options.find("," + option + ",") != std::string::npos;
    };
    // --ro-bind / /: the root and every host mount under it (but what --proc, --dev and --tmpfs mount over).
    size_t host_mounts = 0;
    for (const auto& [mountpoint, options] : got) {
        if (starts_with(mountpoint, "/proc") || starts_with(mountpoint, "/dev") || starts_with(mountpoint, "/tmp"))
            continue;
        ++host_mounts;
        EXPECT_TRUE(has(mountpoint, "ro")) << mode << ": " << mountpoint << " in " << r.out;
        EXPECT_TRUE(has(mountpoint, "nosuid")) << mode << ": " << mountpoint << " in " << r.out;
    }
    EXPECT_GE(host_mounts, 1u) << mode << ": " << r.out;
    for (const char* ro : {"/proc/sys", "/proc/keys", "/tmp/data"})
        EXPECT_TRUE(has(ro, "ro")) << mode << ": " << ro << " in " << r.out;
    EXPECT_TRUE(has("/dev/null", "nosuid")) << mode << ": " << r.out;
    EXPECT_TRUE(has("/dev/null", "rw")) << mode << ": " << r.out;
    EXPECT_TRUE(has("/proc/keys", "nosuid")) << mode << ": " << r.out;
    EXPECT_TRUE(has("/tmp/data", "nodev")) << mode << ": " << r.out;
}

TEST(CloneAttributes, SetInOneCallOrTwo)
{
    expect_clone_attributes(clone_attributes_run(), "open_tree_attr");
    for (int err : {ENOSYS, EPERM}) {
        Result r = under_refusal(kOpenTreeAttr, err, [&] {
            // The filter took: the call answers err.
            if (::syscall(kOpenTreeAttr, -1, nullptr, 0, nullptr, 0) >= 0 || errno != err)
                return Result{99, "the filter did not take", ""};
            return clone_attributes_run();
        });
        expect_clone_attributes(r,
                                err == ENOSYS ? "open_tree_attr refused (ENOSYS)" : "open_tree_attr refused (EPERM)");
    }
}

}  // namespace
}  // namespace cocoon::test
