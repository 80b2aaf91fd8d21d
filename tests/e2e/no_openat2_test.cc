// cocoon where openat2 answers ENOSYS (tests/e2e/no_openat2.h): inside another sandbox whose
// seccomp policy cannot read struct open_how, or on a kernel without it. Every mount kind that
// resolves a destination still works, --check says what cocoon does instead, and a cocoon runs
// inside a cocoon. The planted-link attacks under the same filter are in planted_link_test.cc.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>

#include "tests/e2e/e2e.h"
#include "tests/e2e/no_openat2.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Binds, --tmpfs, --dir, --symlink, --file, --ro-bind-data, --login-file and --remount-ro, each
// resolved under the new root by the userspace walk; the login file's renewal reaches SRC.
TEST(NoOpenat2, EveryMountKindIsBuilt)
{
    std::vector<std::vector<std::string>> modes = {{}};
    if (is_root())
        modes.push_back({"--cap-drop", "ALL"});
    for (const auto& mode : modes) {
        TempDir wt, state, data;
        write_file(wt / "f", "work\n");
        write_file(state / "cred", "token\n", 0600);
        write_file(data / "data", "data\n");
        write_file(data / "file", "file\n");
        Result r = without_openat2([&] {
            // Handed to cocoon by number: opened without O_CLOEXEC, in this child only.
            if (::dup2(::open((data / "data").c_str(), O_RDONLY), 7) < 0 ||
                ::dup2(::open((data / "file").c_str(), O_RDONLY), 8) < 0)
                return Result{};
            return in_sandbox(
                args({mode,
                      {"--bind",
                       wt.path(),
                       "/work",
                       "--tmpfs",
                       "/scratch",
                       "--dir",
                       "/scratch/d/e",
                       "--symlink",
                       "/work/f",
                       "/scratch/link",
                       "--file",
                       "8",
                       "/etc/file",
                       "--ro-bind-data",
                       "7",
                       "/etc/data",
                       "--login-file",
                       state / "cred",
                       "/home/agent/.cred",
                       "--remount-ro",
                       "/scratch"}}),
                sh("cat /scratch/link /etc/data /etc/file /home/agent/.cred; test -d /scratch/d/e && echo dir; "
                   "touch /scratch/x 2>&1 | grep -c Read-only; echo made > /work/made; "
                   "printf renewed > /home/agent/.cred"));
        });
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "work\ndata\nfile\ntoken\ndir\n1\n");
        EXPECT_EQ(r.err, "");
        EXPECT_EQ(read_file(wt / "made"), "made\n");
        EXPECT_EQ(read_file(state / "cred"), "renewed");
    }
}

// SRC's directory is opened with openat2 too: a link at SRC, or in its directory under
// --no-follow-sources, is refused as with the kernel's, and the file it names is left alone.
TEST(NoOpenat2, LoginFileLinksAreRefused)
{
    TempDir dir, victim_dir;
    const std::string victim = victim_dir / "authorized_keys";
    write_file(victim, "ssh-ed25519 the-callers-key\n", 0600);
    ASSERT_EQ(::symlink(victim.c_str(), (dir / "cred").c_str()), 0);
    HostSnapshot host("login-link-no-openat2", victim_dir.path());
    Result r = without_openat2([&] {
        return in_sandbox(args({host.mark(), {"--login-file", dir / "cred", "/home/agent/.cred"}}), {"true"});
    });
    expect_refused(r, {"--login-file", dir / "cred", "is a symbolic link; pass the real path"});
    ASSERT_EQ(::symlink(victim_dir.path().c_str(), (dir / "sub").c_str()), 0);
    r = without_openat2([&] {
        return in_sandbox(
            args({host.mark(), {"--no-follow-sources", "--login-file", dir / "sub/authorized_keys", "/home/agent/.k"}}),
            {"true"});
    });
    expect_refused(r, {"--login-file", dir / "sub/authorized_keys", "(refused by --no-follow-sources)"});
    host.expect_unchanged();
}

// --login-file-try's missing directories: the userspace walk finds the nearest existing ancestor
// as openat2 does, and refuses a link in the path under --no-follow-sources before making anything.
TEST(NoOpenat2, LoginFileTryMakesMissingDirectoriesAndRefusesLinks)
{
    TempDir dir, elsewhere;
    Result r = without_openat2([&] {
        return in_sandbox({"--login-file-try", dir / "a/b/cred", "/home/agent/.cred"},
                          sh("printf first > /home/agent/.cred"));
    });
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(read_file(dir / "a/b/cred"), "first");
    ASSERT_EQ(::symlink(elsewhere.path().c_str(), (dir / "link").c_str()), 0);
    r = without_openat2([&] {
        return in_sandbox({"--no-follow-sources", "--login-file-try", dir / "link/new/cred", "/home/agent/.cred"},
                          sh("printf first > /home/agent/.cred"));
    });
    expect_refused(r, {"--login-file-try", dir / "link/new/cred", "(refused by --no-follow-sources)"});
    EXPECT_TRUE(files_under(elsewhere.path()).empty());
}

// --check tells the caller that openat2 is missing and what cocoon does instead; a default
// sandbox can still run.
TEST(NoOpenat2, CheckSaysTheWalkIsDoneInUserspace)
{
    Result r = without_openat2([] { return cocoon({"--check"}); });
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("\nno   openat2: openat2 answered ENOSYS on Linux [0-9.]+, which "
                                                    "has it: this process's seccomp filter refuses it \\(in a "
                                                    "container: its runtime's seccomp profile\\): cocoon resolves "
                                                    "paths in userspace instead")))
        << r.out;
    EXPECT_TRUE(contains(r.out, "yes  new mount API\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "\na default sandbox can run here\n")) << r.out;
}

// A cocoon inside a cocoon, as an agent that sandboxes its own tools runs bwrap: the outer one
// keeps its default policy, which answers openat2 with ENOSYS (it cannot read struct open_how),
// alone and with a filter that says so too (so that the test does not depend on that rule). The
// inner one binds, mounts a tmpfs, makes a directory and a link, all resolved by the userspace
// walk. It mounts no /proc: a new procfs in a user namespace of its own is refused by the kernel
// inside a cocoon as inside a bwrap (the outer sandbox's read-only covers over /proc/sys and the
// like are locked mounts, which make another procfs "too revealing"), with openat2 or without.
TEST(NoOpenat2, CocoonRunsInsideCocoon)
{
    UniqueFd filter = no_openat2_filter();
    TempDir data;
    write_file(data / "data", "inner data\n");
    const std::vector<std::string> inner = args(
        {{cocoon_bin(), "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib"},
         {"--symlink", "usr/lib64", "/lib64", "--tmpfs", "/tmp", "--dir", "/tmp/d"},
         {"--ro-bind", data.path(), "/data", "--symlink", "/data/data", "/tmp/link"},
         sh("cat /tmp/link; test -d /tmp/d && echo inner")});
    const std::vector<std::string> outer = {"--ro-bind", "/",      "/",     "--dev",
                                            "/dev",      "--proc", "/proc", "--unshare-user"};
    for (const std::vector<std::string>& more :
         {std::vector<std::string>{}, std::vector<std::string>{"--add-seccomp-fd", std::to_string(filter.get())}}) {
        Result r = cocoon(args({outer, more, {"--"}, inner}));
        // What a nested cocoon needs of the outer sandbox beyond openat2 is a user namespace of
        // its own (the outer one has no --disable-userns); refused here, this test could not tell.
        ASSERT_FALSE(contains(r.err, "user namespace"))
            << "the outer sandbox refused a nested user namespace: " << r.err;
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "inner data\ninner\n");
        EXPECT_EQ(r.err, "");
    }
    // The inner cocoon met ENOSYS under the default policy alone, and says so.
    Result r = cocoon(args({outer, {"--", cocoon_bin(), "--check"}}));
    EXPECT_TRUE(contains(r.out, "no   openat2: openat2 answered ENOSYS on Linux ")) << r.out << r.err;
}

}  // namespace
}  // namespace cocoon::test
