// End-to-end checks of the sandbox's mounts: --bind, --ro-bind (submounts
// included), --tmpfs, relative destinations, and nothing leaking to the host.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/e2e.h"

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

}  // namespace
}  // namespace cocoon::test
