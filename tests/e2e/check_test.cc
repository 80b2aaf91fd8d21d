// cocoon --check: the report of what this host allows, and its exit code.
#include <gtest/gtest.h>

#include "tests/e2e/e2e.h"

namespace cocoon::test {
namespace {

TEST(Check, ThisHostRunsADefaultSandbox)
{
    Result r = cocoon({"--check"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    for (const char* line : {"yes  user namespaces\n", "yes  mount, PID, network, IPC, UTS and cgroup namespaces\n",
                             "yes  new mount API\n", "yes  openat2\n", "yes  seccomp filters\n"})
        EXPECT_TRUE(contains(r.out, line)) << line << " in:\n" << r.out;
    EXPECT_TRUE(contains(r.out, "cgroup v2")) << r.out;
    EXPECT_TRUE(r.out.size() > 0 && contains(r.out, "\na default sandbox can run here\n")) << r.out;
}

// A root caller is told that its sandbox acts on the host as root unless --host-user names
// another user, and keeps root's capabilities unless it drops them; an unprivileged one is not.
TEST(Check, ARootCallerIsToldToActAsAnotherUser)
{
    Result r = cocoon({"--check"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    if (is_root()) {
        EXPECT_TRUE(contains(r.out, "no   an unprivileged caller: as root, pass --host-user USER (an unprivileged "
                                    "user made for the agent) and --cap-drop ALL: without --host-user"))
            << r.out;
    } else {
        EXPECT_TRUE(contains(r.out, "yes  an unprivileged caller\n")) << r.out;
    }
}

// Inside a sandbox whose user namespaces are used up (--disable-userns), a
// non-root caller can make no sandbox: --check says which line fails, and why.
TEST(Check, SaysNoWhereUserNamespacesAreRefused)
{
    Result r = in_sandbox({"--unshare-user", "--disable-userns", "--uid", "1000", "--gid", "1000", "--ro-bind",
                           cocoon_bin(), "/cocoon", "--proc", "/proc", "--unshare-pid"},
                          {"/cocoon", "--check"});
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "no   user namespaces: ")) << r.out;
    EXPECT_TRUE(contains(r.out, "\na default sandbox cannot run here\n")) << r.out;
}

}  // namespace
}  // namespace cocoon::test
