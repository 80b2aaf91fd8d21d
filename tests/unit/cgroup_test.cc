// Where cocoon finds the caller's cgroup v2 (ns/monitor/cgroup.cc), from the texts of
// /proc/self/mountinfo and /proc/self/cgroup: a hybrid host (this one), a
// unified host, a container whose mount shows a subtree, no cgroup2 at all; statmount(2)'s
// answer against mountinfo's;
// which names the stale-cgroup sweep may remove; and the parser of flat keyed files (cpu.stat,
// cgroup.events, smaps_rollup, memory.peak).
#include "ns/monitor/cgroup.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "base/sys_error.h"

namespace cocoon::ns {
namespace {

constexpr const char* kHybrid = "25 24 0:22 / /sys/fs/cgroup rw,nosuid shared:9 - tmpfs tmpfs rw,mode=755\n"
                                "26 25 0:23 / /sys/fs/cgroup/memory rw,relatime shared:10 - cgroup cgroup rw,memory\n"
                                "27 25 0:24 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw\n";

TEST(OwnCgroup, AHybridHostHasItBesideV1)
{
    OwnCgroup own = parse_own_cgroup(kHybrid, "4:memory:/x\n0::/\n");
    EXPECT_EQ(own.mount, "/sys/fs/cgroup/unified");
    EXPECT_EQ(own.dir, "/sys/fs/cgroup/unified");
    EXPECT_FALSE(own.writable);
    EXPECT_FALSE(own.nsdelegate);
}

TEST(OwnCgroup, AUnifiedHostNamesTheCallersCgroup)
{
    OwnCgroup own =
        parse_own_cgroup("30 1 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
                         "0::/user.slice/user-1000.slice/user@1000.service/app.slice/run-1.scope\n");
    EXPECT_EQ(own.mount, "/sys/fs/cgroup");
    EXPECT_EQ(own.dir, "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-1.scope");
    EXPECT_TRUE(own.nsdelegate);  // systemd's mount option, read from the superblock's options
}

// A container's cgroup2 mount may show a subtree of the hierarchy (mountinfo's
// root field) while /proc/self/cgroup, read without a cgroup namespace, names
// the whole path: the subtree's part is not repeated.
TEST(OwnCgroup, AMountOfASubtree)
{
    OwnCgroup own = parse_own_cgroup("40 39 0:30 /machine/c1 /sys/fs/cgroup rw shared:5 - cgroup2 cgroup2 rw\n",
                                     "0::/machine/c1/job\n");
    EXPECT_EQ(own.dir, "/sys/fs/cgroup/job");
}

TEST(OwnCgroup, NoCgroup2)
{
    OwnCgroup own = parse_own_cgroup("26 25 0:23 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", "0::/\n");
    EXPECT_EQ(own.mount, "");
    EXPECT_EQ(own.dir, "");
}

// The quick way (statmount(2) on the usual places) finds what the slow way (/proc/self/mountinfo)
// finds, on this host as it is and in a mount namespace where cgroup2's root is mounted on
// /sys/fs/cgroup itself (a unified host's layout). Linux 6.11 or later answers statmount's question.
bool kernel_has_statmount_options()
{
    utsname u{};
    int major = 0, minor = 0;
    return ::uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
           (major > 6 || (major == 6 && minor >= 11));
}

void expect_both_ways_agree()
{
    const std::optional<OwnCgroup> fast = own_cgroup_by_statmount();
    const OwnCgroup slow = own_cgroup_by_mountinfo();
    ASSERT_TRUE(fast.has_value()) << "statmount did not answer";
    EXPECT_EQ(fast->mount, slow.mount);
    EXPECT_EQ(fast->dir, slow.dir);
    EXPECT_EQ(fast->nsdelegate, slow.nsdelegate);
    EXPECT_FALSE(fast->mount.empty());
}

TEST(OwnCgroup, StatmountFindsWhatMountinfoFinds)
{
    if (!kernel_has_statmount_options())
        GTEST_SKIP() << "statmount gives a mount's options from Linux 6.11 on";
    if (own_cgroup_by_mountinfo().mount.empty())
        GTEST_SKIP() << "this host mounts no cgroup2";
    expect_both_ways_agree();
}

TEST(OwnCgroup, StatmountFindsCgroup2MountedOnSysFsCgroup)
{
    const OwnCgroup host = own_cgroup_by_mountinfo();
    if (!kernel_has_statmount_options() || host.mount.empty() || host.mount == "/sys/fs/cgroup")
        GTEST_SKIP() << "needs Linux 6.11 and a cgroup2 mounted somewhere else than /sys/fs/cgroup";
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        // A child of its own: its own user and mount namespaces, cgroup2's mount bound over
        // /sys/fs/cgroup (the host's stays as it is).
        if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0 ||
            ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount(host.mount.c_str(), "/sys/fs/cgroup", nullptr, MS_BIND, nullptr) != 0)
            ::_exit(2);
        // mountinfo's first cgroup2 line is still the host's mount; statmount asks /sys/fs/cgroup
        // first. Both name the caller's cgroup below their mount.
        const std::optional<OwnCgroup> fast = own_cgroup_by_statmount();
        const OwnCgroup slow = own_cgroup_by_mountinfo();
        const bool same = fast && fast->mount == "/sys/fs/cgroup" && slow.mount == host.mount &&
                          fast->dir.substr(fast->mount.size()) == slow.dir.substr(slow.mount.size()) &&
                          fast->nsdelegate == slow.nsdelegate;
        ::_exit(same ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the namespaces or the bind failed; 1: the two ways disagree";
}

// Whether a pid lives is not asked: a container's cocoon names its cgroup after its own pid, 1
// (cgroup.events says whether a sandbox still runs in it: tests/e2e/cgroup_test.cc).
TEST(SandboxCgroupName, OnlyCocoonPidOrCocoonPidN)
{
    EXPECT_TRUE(is_sandbox_cgroup_name("cocoon-4194305"));
    EXPECT_TRUE(is_sandbox_cgroup_name("cocoon-1"));
    EXPECT_TRUE(is_sandbox_cgroup_name("cocoon-" + std::to_string(::getpid())));
    EXPECT_TRUE(is_sandbox_cgroup_name("cocoon-4194305-3"));  // the name a start takes when cocoon-PID is left
    for (const char* other : {"cocoon-", "cocoon-12x", "cocoon-e2e-1-2", "cocoonx-5", "other", "cocoon-99999999999",
                              "cocoon-4194305-", "cocoon-4194305-x", "cocoon-4194305-1-2", "cocoon--1"})
        EXPECT_FALSE(is_sandbox_cgroup_name(other)) << other;
}

TEST(KeyedNumber, TheNumberAfterAWholeKeyAtALinesStart)
{
    const std::string cpu_stat = "usage_usec 30\nuser_usec 20\nsystem_usec 10\n";
    EXPECT_EQ(keyed_number(cpu_stat, "user_usec"), 20u);
    EXPECT_EQ(keyed_number(cpu_stat, "system_usec"), 10u);
    EXPECT_EQ(keyed_number(cpu_stat, "usec"), std::nullopt);  // not at a line's start
    EXPECT_EQ(keyed_number("populated 0\nfrozen 1", "populated"), 0u);
    EXPECT_EQ(keyed_number("populated 0\nfrozen 1", "frozen"), 1u);  // the last line, no newline
    EXPECT_EQ(keyed_number("Rss:    12 kB\nPss:\t 8 kB\nPss_Anon: 4 kB\n", "Pss:"), 8u);
    EXPECT_EQ(keyed_number("Pss_Anon: 4 kB\n", "Pss"), std::nullopt);  // a whole key only
    EXPECT_EQ(keyed_number("user_usec20\n", "user_usec"), std::nullopt);
    EXPECT_EQ(keyed_number("4096\n", ""), 4096u);  // memory.peak
    EXPECT_EQ(keyed_number("max\n", ""), std::nullopt);
    EXPECT_EQ(keyed_number("user_usec -1\n", "user_usec"), std::nullopt);  // no sign
    EXPECT_EQ(keyed_number("user_usec 99999999999999999999\n", "user_usec"), std::nullopt);  // past 64 bits
    EXPECT_EQ(keyed_number("", ""), std::nullopt);  // a file that could not be read
    EXPECT_EQ(keyed_number("user_usec \n", "user_usec"), std::nullopt);
}

// Issue 24, 2: a --cgroup-parent that is not there, or a file where a directory is expected, is
// an error that names the step, the errno and the path; its text is the one users saw before.
TEST(SandboxCgroup, AnUnusableParentIsAnErrorThatNamesIt)
{
    for (const auto& [parent, err] :
         {std::pair<std::string, int>{"/nonexistent-cgroup", ENOENT}, {"/dev/null", ENOTDIR}}) {
        try {
            SandboxCgroup::make(CgroupOptions{parent, std::nullopt, std::nullopt}, false);
            ADD_FAILURE() << parent << " was taken";
        } catch (const SysError& e) {
            EXPECT_EQ(e.step(), "cgroup");
            EXPECT_EQ(e.code(), err) << parent;
            EXPECT_EQ(e.path(), parent);
            EXPECT_EQ(std::string(e.what()), "--cgroup-parent " + parent + ": " + std::strerror(err));
        }
    }
}

}  // namespace
}  // namespace cocoon::ns
