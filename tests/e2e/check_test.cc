// cocoon --check: the report of what this host allows, and its exit code.
#include <sys/stat.h>

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

// The controllers line says what this cgroup v2 has, and names only what is missing.
TEST(Check, TheControllersLineSaysWhatIsThereAndWhatIsMissing)
{
    Result r = cocoon({"--check"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const size_t at = r.out.find("cgroup v2 memory and pids controllers (this cgroup v2 has: ");
    if (at == std::string::npos) {
        EXPECT_TRUE(contains(r.out, "no   cgroup v2: not mounted")) << r.out;
        return;
    }
    const std::string line = r.out.substr(at - 5, r.out.find('\n', at) - (at - 5));
    const std::string has = line.substr(line.find("has: ") + 5, line.find(')') - line.find("has: ") - 5);
    const bool memory = contains(" " + has + " ", " memory "), pids = contains(" " + has + " ", " pids ");
    if (memory && pids)
        EXPECT_EQ(line.rfind("yes  ", 0), 0u) << line;
    else
        EXPECT_TRUE(contains(line, std::string("): no ") +
                                       (memory ? "pids"
                                        : pids ? "memory"
                                               : "memory and pids") +
                                       ": memory and tasks are sampled"))
            << line;
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

// The first node on PATH is asked its version: one before 22.21 (or 23) is named as ignoring the
// proxy variables; 22.21 and later, 24 and later, are not; without node on PATH, no line.
TEST(Check, NamesANodeThatIgnoresTheProxyVariables)
{
    TempDir dir;
    const std::string node = dir / "node";
    auto check_with = [&](const std::string& version) {
        write_file(node, "#!/bin/sh\necho " + version + "\n");
        ::chmod(node.c_str(), 0755);
        return run({"/usr/bin/env", "PATH=" + dir.path() + ":/usr/bin:/bin", cocoon_bin(), "--check"});
    };
    for (const char* old : {"v20.19.2", "v22.20.0", "v23.11.1"}) {
        Result r = check_with(old);
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        EXPECT_TRUE(contains(r.out, std::string("no   Node.js ") + old +
                                        " on PATH reads the proxy variables (NODE_USE_ENV_PROXY=1): Node before "
                                        "22.21 (and 23) ignores the proxy variables; transparent egress covers it"))
            << r.out;
    }
    for (const char* recent : {"v22.21.0", "v24.0.0", "v25.2.1"}) {
        Result r = check_with(recent);
        EXPECT_TRUE(contains(r.out, std::string("yes  Node.js ") + recent +
                                        " on PATH reads the proxy variables (NODE_USE_ENV_PROXY=1)\n"))
            << r.out;
    }
    Result none = run({"/usr/bin/env", "PATH=" + dir.path() + "/nothing", cocoon_bin(), "--check"});
    EXPECT_FALSE(contains(none.out, "Node.js")) << none.out;
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
    // The last line says what to change.
    EXPECT_TRUE(contains(r.out, "\na default sandbox cannot run here; to run one, change: user namespaces: ")) << r.out;
}

}  // namespace
}  // namespace cocoon::test
