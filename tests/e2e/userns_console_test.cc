// End-to-end checks of --disable-userns, --assert-userns-disabled, the
// /dev/console that --dev makes for a caller whose stdout is a terminal, and
// the refused SELinux label options. Real sandboxes, as whoever runs the
// tests; the same command lines under /usr/bin/bwrap where it can run here.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/bwrap.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// program minimal_root() options command: cocoon or bwrap, same arguments.
Result sandbox_with(const std::string& program, const std::vector<std::string>& options,
                    const std::vector<std::string>& command)
{
    return run(args({{program}, minimal_root(), options, command}));
}

// Tries three ways to get a new user namespace; prints one line each.
// (unshare -r writes the id maps: it needs a /proc.)
const std::string kTryUserns = "unshare -U true && echo unshare=ok || echo unshare=refused; "
                               "unshare -Ur --fork true && echo map-root=ok || echo map-root=refused; "
                               "sh -c 'unshare -U true' && echo grandchild=ok || echo grandchild=refused";
const std::string kAllRefused = "unshare=refused\nmap-root=refused\ngrandchild=refused\n";
const std::string kAllOk = "unshare=ok\nmap-root=ok\ngrandchild=ok\n";

// The process layouts a sandbox can have: PID 1 reaper and command, the
// command as PID 1, no PID namespace at all (the host's /proc bound in).
const std::vector<std::vector<std::string>> kLayouts{{"--unshare-pid", "--proc", "/proc"},
                                                     {"--unshare-pid", "--as-pid-1", "--proc", "/proc"},
                                                     {"--unshare-all", "--proc", "/proc"},
                                                     {"--bind", "/proc", "/proc"}};

// --- --disable-userns ---

TEST(DisableUserns, TheCommandCannotCreateUserNamespaces)
{
    const std::string host_limit = read_file("/proc/sys/user/max_user_namespaces");
    for (const auto& layout : kLayouts) {
        SCOPED_TRACE(layout[1]);
        Result r = in_sandbox(args({{"--unshare-user", "--disable-userns"}, layout}), sh(kTryUserns));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, kAllRefused) << r.err;
        // The kernel's answer to a user namespace over the limit.
        EXPECT_TRUE(contains(r.err, "No space left on device")) << r.err;

        // Control: the same command line without the option.
        Result c = in_sandbox(args({{"--unshare-user"}, layout}), sh(kTryUserns));
        EXPECT_EQ(c.code, 0) << c.err;
        EXPECT_EQ(c.out, kAllOk) << c.err;
    }
    // The limit went on the sandbox's namespace, never the host's.
    EXPECT_EQ(read_file("/proc/sys/user/max_user_namespaces"), host_limit);
}

TEST(DisableUserns, CapabilitiesInsideCannotLiftTheLimit)
{
    // The strongest command this allows: uid 0 with every capability over its
    // own namespace, and the host's /proc, whose sysctls it may then write.
    // Raising its own namespace's limit does not help: the one above counts.
    const std::string script = "echo 100 > /proc/sys/user/max_user_namespaces && echo raised; " + kTryUserns;
    Result r = in_sandbox({"--unshare-user", "--disable-userns", "--uid", "0", "--gid", "0", "--cap-add", "ALL",
                           "--bind", "/proc", "/proc"},
                          sh(script));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "raised\n" + kAllRefused) << r.err;

    // Control: the same command line without the option gets its namespaces.
    Result c = in_sandbox(
        {"--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "ALL", "--bind", "/proc", "/proc"}, sh(script));
    EXPECT_EQ(c.out, "raised\n" + kAllOk) << c.err;
}

TEST(DisableUserns, KeepsTheIdsAndTakesAwayCapabilities)
{
    const std::string script = "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map | tr -s ' '; "
                               "grep -E '^Cap(Prm|Eff|Bnd|Amb)' /proc/self/status";
    const std::vector<std::string> options{"--unshare-user", "--disable-userns", "--uid", "5", "--gid", "6",
                                           "--unshare-pid",  "--proc",           "/proc"};
    Result r = in_sandbox(args({options, no_caps()}), sh(script));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "5\n6\n 5 5 1\n 6 6 1\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
                     "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n");

    if (std::string why = bwrap_unusable({"--unshare-user"}); !why.empty())
        GTEST_SKIP() << "differential part skipped: " << why;
    Result b = sandbox_with(kBwrap, args({options, {"--cap-drop", "ALL"}}), sh(script));
    EXPECT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(r.out, b.out);
}

TEST(DisableUserns, SameOutcomeAsBwrap)
{
    if (std::string why = bwrap_unusable({"--unshare-user"}); !why.empty())
        GTEST_SKIP() << why;
    for (bool disable : {true, false}) {
        SCOPED_TRACE(disable ? "--disable-userns" : "control");
        std::vector<std::string> options{"--unshare-user", "--unshare-pid", "--proc", "/proc"};
        if (disable)
            options.push_back("--disable-userns");
        Result c = sandbox_with(cocoon_bin(), options, sh(kTryUserns));
        Result b = sandbox_with(kBwrap, options, sh(kTryUserns));
        EXPECT_EQ(c.code, 0) << c.err;
        EXPECT_EQ(c.code, b.code) << b.err;
        EXPECT_EQ(c.out, b.out);
    }
}

// --- --assert-userns-disabled ---

const std::string kNotDisabled = "creation of new user namespaces was not disabled as requested";

TEST(AssertUsernsDisabled, FailsWhereUserNamespacesCanBeCreated)
{
    TempDir out;
    for (auto options : {std::vector<std::string>{}, {"--unshare-user"}, {"--unshare-user", "--unshare-pid"}}) {
        SCOPED_TRACE(options.empty() ? "no options" : options.back());
        Result r = in_sandbox(args({options, {"--bind", out.path(), "/out", "--assert-userns-disabled"}}),
                              sh("touch /out/ran"));
        EXPECT_EQ(r.code, 1);
        EXPECT_EQ(r.err, "cocoon: " + kNotDisabled + "\n");
        EXPECT_FALSE(exists(out / "ran")) << "the command ran";
    }
}

TEST(AssertUsernsDisabled, PassesWithDisableUserns)
{
    Result r = in_sandbox({"--unshare-user", "--disable-userns", "--assert-userns-disabled"}, sh("echo ran"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "ran\n");
}

// The check does nothing itself: inside a sandbox that disabled user
// namespaces, a second cocoon (uid 0 with every capability over its namespace,
// so it makes no user namespace of its own) passes it with no other option;
// the same inner command line fails when the outer sandbox allows them.
TEST(AssertUsernsDisabled, OnlyLooks)
{
    // /proc for the sanitizer runtime of an ASan build; /tmp is where cocoon
    // builds its new root.
    const std::vector<std::string> outer{
        "--unshare-user", "--uid", "0",       "--gid", "0",         "--cap-add",  "ALL",    "--unshare-pid",
        "--proc",         "/proc", "--tmpfs", "/tmp",  "--ro-bind", cocoon_bin(), "/cocoon"};
    const std::vector<std::string> inner =
        args({{"/cocoon"}, minimal_root(), {"--assert-userns-disabled", "sh", "-c", "echo inner ran"}});
    Result r = in_sandbox(args({outer, {"--disable-userns"}}), inner);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "inner ran\n");

    Result c = in_sandbox(outer, inner);
    EXPECT_EQ(c.code, 1);
    EXPECT_EQ(c.out, "");
    EXPECT_EQ(c.err, "cocoon: " + kNotDisabled + "\n");
}

TEST(AssertUsernsDisabled, SameOutcomeAsBwrap)
{
    if (std::string why = bwrap_unusable({"--unshare-user"}); !why.empty())
        GTEST_SKIP() << why;
    for (auto options : {std::vector<std::string>{"--unshare-user", "--assert-userns-disabled"},
                         {"--unshare-user", "--disable-userns", "--assert-userns-disabled"}}) {
        SCOPED_TRACE(options[1]);
        Result c = sandbox_with(cocoon_bin(), options, sh("echo ran"));
        Result b = sandbox_with(kBwrap, options, sh("echo ran"));
        EXPECT_EQ(c.code, b.code) << c.err << b.err;
        EXPECT_EQ(c.out, b.out);
        EXPECT_EQ(c.err.substr(c.err.find(' ') + 1), b.err.substr(b.err.find(' ') + 1));
    }
}

// --- refused command lines: one line, exit 1, nothing left on the host ---

class Refused : public ::testing::Test {
protected:
    void TearDown() override { m_host.expect_unchanged(); }

    // Runs cocoon and bwrap with the same arguments (a command that would
    // leave a file behind); both must refuse with `message`.
    void expect_both_refuse(const std::vector<std::string>& options, const std::string& message)
    {
        const std::vector<std::string> command{"sh", "-c", "touch /out/ran", m_host.marker()};
        const std::vector<std::string> all = args({{"--bind", m_dir.path(), "/out"}, options});
        Result r = sandbox_with(cocoon_bin(), all, command);
        expect_refused(r, {message});
        EXPECT_EQ(r.err, "cocoon: " + message + "\n");
        if (std::string why = bwrap_unusable({"--unshare-user"}); !why.empty()) {
            std::printf("differential part skipped: %s\n", why.c_str());
            return;
        }
        Result b = sandbox_with(kBwrap, all, command);
        EXPECT_EQ(b.code, 1);
        // cocoon names the label option after bwrap's words.
        EXPECT_EQ(b.err.rfind("bwrap: ", 0), 0u) << b.err;
        EXPECT_TRUE(contains(r.err, b.err.substr(7, b.err.size() - 8))) << "bwrap: " << b.err << "cocoon: " << r.err;
    }

    TempDir m_dir;
    const HostSnapshot m_host{"cocoon-userns-refused", m_dir.path()};
};

TEST_F(Refused, DisableUsernsWithoutUnshareUser)
{
    expect_both_refuse({"--disable-userns"}, "--disable-userns requires --unshare-user");
    expect_both_refuse({"--unshare-all", "--disable-userns"}, "--disable-userns requires --unshare-user");
    expect_both_refuse({"--unshare-user-try", "--disable-userns"}, "--disable-userns requires --unshare-user");
}

TEST_F(Refused, DisableUsernsWithUsernsBlockFd)
{
    expect_both_refuse({"--unshare-user", "--disable-userns", "--info-fd", "1", "--userns-block-fd", "0"},
                       "--disable-userns is not compatible with  --userns-block-fd");
}

TEST_F(Refused, SelinuxLabels)
{
    expect_both_refuse({"--exec-label", "system_u:system_r:container_t:s0"},
                       "labeling not supported on this system (--exec-label)");
    expect_both_refuse({"--file-label", "system_u:object_r:container_file_t:s0"},
                       "labeling not supported on this system (--file-label)");
}

TEST_F(Refused, AssertUsernsDisabledWhereTheyAreNot)
{
    // Refused inside the sandbox, before the command: it must not have run.
    expect_both_refuse({"--unshare-user", "--assert-userns-disabled"}, kNotDisabled);
    expect_both_refuse({"--unshare-user", "--unshare-pid", "--assert-userns-disabled"}, kNotDisabled);
}

// --- /dev/console ---

// A new pseudo-terminal, opened so that it never becomes the test's
// controlling terminal.
class Pty {
public:
    Pty()
    {
        m_master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m_master < 0 || ::grantpt(m_master) < 0 || ::unlockpt(m_master) < 0)
            throw std::runtime_error("posix_openpt failed");
        m_name = ::ptsname(m_master);
        // The test only drains it; nothing must block on a full terminal.
        ::fcntl(m_master, F_SETFL, O_NONBLOCK);
    }
    ~Pty() { ::close(m_master); }
    Pty(const Pty&) = delete;
    Pty& operator=(const Pty&) = delete;

    const std::string& name() const { return m_name; }

    // The terminal's device number as stat -c %t:%T prints it.
    std::string rdev() const
    {
        struct stat st;
        if (::stat(m_name.c_str(), &st) < 0)
            throw std::runtime_error("stat " + m_name);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%x:%x", major(st.st_rdev), minor(st.st_rdev));
        return buf;
    }

    // What was written to the terminal so far.
    std::string drain() const
    {
        std::string out;
        char buf[4096];
        for (ssize_t n; (n = ::read(m_master, buf, sizeof buf)) > 0;)
            out.append(buf, static_cast<size_t>(n));
        return out;
    }

private:
    int m_master = -1;
    std::string m_name;
};

// program minimal_root() --dev /dev command, with `redirect` (e.g. ">/dev/pts/3")
// applied by a shell that is no session leader, so the terminal stays nobody's
// controlling terminal. The command reports on stderr.
Result with_terminal(const std::string& program, const std::string& redirect, const std::string& script)
{
    return run(args(
        {{"/bin/sh", "-c", "exec \"$@\" " + redirect, "sh", program}, minimal_root(), {"--dev", "/dev"}, sh(script)}));
}

const std::string kConsole =
    "if [ -e /dev/console ]; then stat -c %t:%T /dev/console >&2; echo via-console > /dev/console; "
    "else echo absent >&2; fi";

TEST(Console, IsTheTerminalOnStdout)
{
    Pty pty;
    Result r = with_terminal(cocoon_bin(), ">" + pty.name(), kConsole);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, pty.rdev() + "\n");
    // Not just the same numbers: what the command writes there reaches the
    // caller's terminal.
    EXPECT_TRUE(contains(pty.drain(), "via-console")) << "not written to " << pty.name();
}

TEST(Console, AbsentWithoutATerminalOnStdout)
{
    Pty pty;
    // bwrap's rule looks at stdout only: a terminal on stdin or stderr is not enough.
    for (const std::string& redirect : {std::string(), "<" + pty.name(), "2>" + pty.name()}) {
        SCOPED_TRACE(redirect);
        const std::string script = redirect.rfind("2>", 0) == 0
                                       ? "[ -e /dev/console ] && echo present || echo absent"
                                       : "[ -e /dev/console ] && echo present >&2 || echo absent >&2";
        Result r = with_terminal(cocoon_bin(), redirect, script);
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out + r.err, "absent\n");
    }
}

TEST(Console, SameAsBwrap)
{
    if (std::string why = bwrap_unusable({"--unshare-user"}); !why.empty())
        GTEST_SKIP() << why;
    Pty pty;
    for (const std::string& redirect : {">" + pty.name(), "<" + pty.name(), std::string()}) {
        SCOPED_TRACE(redirect);
        Result c = with_terminal(cocoon_bin(), redirect, kConsole);
        Result b = with_terminal(kBwrap, redirect, kConsole);
        EXPECT_EQ(c.code, 0) << c.err;
        EXPECT_EQ(c.code, b.code);
        EXPECT_EQ(c.err, b.err);
    }
}

}  // namespace
}  // namespace cocoon::test
