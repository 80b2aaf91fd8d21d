// ns tests of mount::apply: real user and mount namespaces, no cocoon binary.
// Each check runs in a forked child that owns a new user+mount namespace.
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <linux/magic.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <functional>

#include "base/sys.h"
#include "base/sys_error.h"
#include "mount/apply.h"
#include "tests/support/process.h"

using namespace cocoon;

namespace {

// Runs body in a child inside new user and mount namespaces (uid 0 inside).
// The child reports a failed expectation by its exit code and a line on stderr.
int in_new_namespaces(const std::function<void()>& body)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = fork();
    if (pid == 0) {
        try {
            if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                throw SysError(errno, "unshare");
            sys::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n");
            sys::write_file("/proc/self/setgroups", "deny");
            sys::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n");
            body();
        } catch (const std::exception& e) {
            fprintf(stderr, "exception: %s\n", e.what());
            _exit(100);
        }
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define CHILD_CHECK(cond)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                                   \
            _exit(__LINE__ % 100 + 1);                                                                                 \
        }                                                                                                              \
    } while (0)

bool is_dir(const char* path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> sorted_entries(const std::string& dir)
{
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
}

long fs_type(const char* path)
{
    struct statfs st;
    return statfs(path, &st) == 0 ? static_cast<long>(st.f_type) : -1;
}

mount::Plan usr_root(std::vector<mount::InputOp> more = {})
{
    std::vector<mount::InputOp> ops{mount::Bind{"/usr", "/usr", mount::BindKind::ReadOnly, false},
                                    mount::Symlink{"usr/lib", "/lib"}};
    ops.insert(ops.end(), more.begin(), more.end());
    return mount::make_plan(ops);
}

}  // namespace

TEST(MountApply, BuildsNewRootAndHidesTheHost)
{
    test::TempDir host;
    test::write_file(host / "secret", "s");
    int rc = in_new_namespaces([&] {
        mount::apply(usr_root({mount::Tmpfs{"/scratch"}, mount::Dir{"/a/b/c", 0700}}), {});
        CHILD_CHECK(access("/usr/bin/sh", X_OK) == 0);
        CHILD_CHECK(is_dir("/lib/x86_64-linux-gnu") || is_dir("/lib"));
        CHILD_CHECK(is_dir("/a/b/c"));
        struct stat st;
        CHILD_CHECK(stat("/a/b/c", &st) == 0 && (st.st_mode & 07777) == 0700);
        CHILD_CHECK(access((host / "secret").c_str(), F_OK) != 0);
        CHILD_CHECK(access("/etc/passwd", F_OK) != 0);
        CHILD_CHECK(fs_type("/") == TMPFS_MAGIC);
        CHILD_CHECK(fs_type("/scratch") == TMPFS_MAGIC);
        int fd = open("/scratch/f", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        CHILD_CHECK(fd >= 0);
        close(fd);
        // ".." of the new root is the new root.
        CHILD_CHECK(access("/../../usr/bin/sh", X_OK) == 0);
        CHILD_CHECK(access("/../../etc/passwd", F_OK) != 0);
    });
    EXPECT_EQ(rc, 0);
}

TEST(MountApply, ReadOnlyBindIsReadOnlyAndRwBindWrites)
{
    test::TempDir host;
    int rc = in_new_namespaces([&] {
        mount::apply(usr_root({mount::Bind{host.path(), "/ro", mount::BindKind::ReadOnly, false},
                               mount::Bind{host.path(), "/rw", mount::BindKind::ReadWrite, false}}),
                     {});
        CHILD_CHECK(open("/ro/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0600) < 0 && errno == EROFS);
        int fd = open("/rw/y", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        CHILD_CHECK(fd >= 0);
        close(fd);
    });
    EXPECT_EQ(rc, 0);
    EXPECT_FALSE(test::exists(host / "x"));
    EXPECT_TRUE(test::exists(host / "y"));
}

// A symlink inside a bound directory that points at "/etc" must lead to the
// sandbox's /etc, never to the host's.
TEST(MountApply, DestinationSymlinksStayInsideTheNewRoot)
{
    test::TempDir host;
    ASSERT_EQ(symlink("/etc", (host / "link").c_str()), 0);
    ASSERT_EQ(symlink("../../../../../../etc", (host / "rel").c_str()), 0);
    int rc = in_new_namespaces([&] {
        mount::apply(usr_root({mount::Dir{"/etc"}, mount::Bind{host.path(), "/w", mount::BindKind::ReadWrite, false},
                               mount::Tmpfs{"/w/link/through-abs"}, mount::Tmpfs{"/w/rel/through-rel"}}),
                     {});
        CHILD_CHECK(fs_type("/etc/through-abs") == TMPFS_MAGIC);
        CHILD_CHECK(fs_type("/etc/through-rel") == TMPFS_MAGIC);
        CHILD_CHECK(access("/etc/passwd", F_OK) != 0);
    });
    EXPECT_EQ(rc, 0);
    EXPECT_FALSE(test::exists("/etc/through-abs"));
    EXPECT_FALSE(test::exists("/etc/through-rel"));
}

TEST(MountApply, OptionalBindSkipsMissingSourceAndRequiredOneFails)
{
    test::TempDir host;
    int rc = in_new_namespaces([&] {
        mount::apply(usr_root({mount::Bind{host / "missing", "/m", mount::BindKind::ReadOnly, true}}), {});
        CHILD_CHECK(access("/m", F_OK) != 0);
    });
    EXPECT_EQ(rc, 0);
    rc = in_new_namespaces([&] {
        try {
            mount::apply(usr_root({mount::Bind{host / "missing", "/m", mount::BindKind::ReadOnly, false}}), {});
        } catch (const SysError& e) {
            CHILD_CHECK(e.code() == ENOENT);
            CHILD_CHECK(std::string(e.what()).find(host / "missing") != std::string::npos);
            return;
        }
        CHILD_CHECK(!"missing source accepted");
    });
    EXPECT_EQ(rc, 0);
}

TEST(MountApply, RemountRoAndFileBinds)
{
    test::TempDir host;
    test::write_file(host / "file", "content");
    int rc = in_new_namespaces([&] {
        mount::apply(usr_root({mount::Tmpfs{"/t"}, mount::RemountRo{"/t"},
                               mount::Bind{host / "file", "/deep/er/file", mount::BindKind::ReadOnly, false}}),
                     {});
        CHILD_CHECK(open("/t/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0600) < 0 && errno == EROFS);
        CHILD_CHECK(test::read_file("/deep/er/file") == "content");
        CHILD_CHECK(open("/deep/er/file", O_WRONLY | O_CLOEXEC) < 0 && errno == EROFS);
    });
    EXPECT_EQ(rc, 0);
}

// Destinations an earlier run could have planted, in a directory the sandbox writes: each fails
// with one error that names it (and its errno, where a call failed), and the host's copy of the
// directory is as it was.
TEST(MountApply, HostileDestinationsFailNamingThemAndLeaveTheHostAlone)
{
    test::TempDir host;
    ASSERT_EQ(symlink("loop2", (host / "loop1").c_str()), 0);
    ASSERT_EQ(symlink("loop1", (host / "loop2").c_str()), 0);
    ASSERT_EQ(symlink("/", (host / "root").c_str()), 0);
    ASSERT_EQ(symlink("..", (host / "dotdot").c_str()), 0);
    const std::string long_name(NAME_MAX + 1, 'n');
    std::string long_path = "/w";
    while (long_path.size() <= PATH_MAX)
        long_path += "/" + std::string(200, 'p');
    struct Case {
        mount::InputOp op;
        std::string dest;
        int err;  // 0: refused by cocoon's own check (UsageError)
    };
    const std::vector<Case> cases{
        {mount::Tmpfs{"/w/loop1/x"}, "/w/loop1/x", ELOOP},
        {mount::Tmpfs{"/w/" + long_name}, "/w/" + long_name, ENAMETOOLONG},
        {mount::Dir{long_path}, long_path.substr(0, 100), ENAMETOOLONG},
        {mount::Tmpfs{"/w/root"}, "/w/root", 0},
        {mount::Tmpfs{"/w/dotdot"}, "/w/dotdot", 0},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.dest.substr(0, 40));
        int rc = in_new_namespaces([&] {
            try {
                mount::apply(usr_root({mount::Bind{host.path(), "/w", mount::BindKind::ReadWrite, false}, c.op}), {});
            } catch (const SysError& e) {
                fprintf(stderr, "%.200s\n", e.what());
                CHILD_CHECK(c.err != 0 && e.code() == c.err);
                CHILD_CHECK(std::string(e.what()).find(c.dest) != std::string::npos);
                return;
            } catch (const UsageError& e) {
                fprintf(stderr, "%.200s\n", e.what());
                CHILD_CHECK(c.err == 0);
                CHILD_CHECK(std::string(e.what()).find(c.dest) != std::string::npos);
                return;
            }
            CHILD_CHECK(!"a hostile destination was accepted");
        });
        EXPECT_EQ(rc, 0);
        EXPECT_EQ(sorted_entries(host.path()), (std::vector<std::string>{"dotdot", "loop1", "loop2", "root"}));
    }
}
