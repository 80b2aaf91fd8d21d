// End-to-end checks of the command's capabilities, and that a command without
// them cannot uncover what a --tmpfs hides. Also holds the umount2 helper mode.
#include <sys/mount.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/support/bwrap.h"

namespace cocoon::test {
namespace {

// Helper mode: bound into a sandbox as its command, this binary calls
// umount2() itself, so the kernel answers rather than util-linux's own checks.
[[maybe_unused]] const bool kUmountHelper = helper_mode("COCOON_E2E_UMOUNT", [](const std::string& target) {
    for (int flags : {0, static_cast<int>(MNT_DETACH)}) {
        int rc = ::umount2(target.c_str(), flags);
        std::printf("umount2 %d: %s\n", flags, rc == 0 ? "ok" : std::strerror(errno));
    }
    return 0;
});

const char* const kCapSets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
constexpr const char* kNoCaps = "0000000000000000";

void expect_no_caps(const std::string& status, const std::string& who)
{
    for (const char* set : kCapSets)
        EXPECT_EQ(status_field(status, set), kNoCaps) << who << " " << set << "\n" << status;
}

TEST(Caps, CommandHasNone)
{
    // Without a PID namespace the command is cocoon's first process itself;
    // with one it is a child of the reaper. Check both paths.
    Result host_proc = in_sandbox(args({no_caps(), {"--ro-bind", "/proc", "/proc"}}), {"cat", "/proc/self/status"});
    ASSERT_EQ(host_proc.code, 0) << host_proc.err;
    expect_no_caps(host_proc.out, "command without PID namespace");

    Result own_proc =
        in_sandbox(args({no_caps(), {"--unshare-pid", "--proc", "/proc"}}),
                   sh(std::string(kAwaitPid1Settled) + "cat /proc/self/status; echo ---; cat /proc/1/status"));
    ASSERT_EQ(own_proc.code, 0) << own_proc.err;
    size_t split = own_proc.out.find("---\n");
    ASSERT_NE(split, std::string::npos) << own_proc.out;
    expect_no_caps(own_proc.out.substr(0, split), "command with PID namespace");
    expect_no_caps(own_proc.out.substr(split), "reaper (PID 1)");

    // uid 0 inside a user namespace grants nothing either.
    Result uid0 = in_sandbox(args({no_caps(), {"--unshare-user", "--uid", "0", "--ro-bind", "/proc", "/proc"}}),
                             {"cat", "/proc/self/status"});
    ASSERT_EQ(uid0.code, 0) << uid0.err;
    expect_no_caps(uid0.out, "uid 0 in a user namespace");
}

TEST(Caps, RootKeepsItsCapabilitiesByDefault)
{
    Result r = in_sandbox({"--ro-bind", "/proc", "/proc"}, {"cat", "/proc/self/status"});
    ASSERT_EQ(r.code, 0) << r.err;
    if (is_root()) {
        // bwrap's rule: a root caller that does not ask for changes keeps what it has.
        std::string host_eff = status_field(read_file("/proc/self/status"), "CapEff");
        EXPECT_NE(status_field(r.out, "CapEff"), kNoCaps) << r.out;
        EXPECT_EQ(status_field(r.out, "CapEff"), host_eff) << r.out;
    } else {
        expect_no_caps(r.out, "unprivileged caller, no options");
    }
}

TEST(Caps, CannotUnmountTmpfsOverAHostDirectory)
{
    TempDir host;
    write_file(host / "hidden", "x");
    const std::vector<std::string> layered = {"--bind", host.path(), "/d", "--tmpfs", "/d"};

    // Control: without the tmpfs the file is there.
    Result bare = in_sandbox(args({no_caps(), {"--bind", host.path(), "/d"}}), {"ls", "-A", "/d"});
    ASSERT_EQ(bare.code, 0) << bare.err;
    ASSERT_EQ(bare.out, "hidden\n");

    // util-linux's umount refuses in its own words (which vary with its
    // restricted mode), so only its status and the result are checked here.
    Result tool = in_sandbox(args({no_caps(), layered}), sh("umount /d; echo umount=$?; ls -A /d"));
    EXPECT_TRUE(contains(tool.out, "umount=")) << tool.out << tool.err;
    EXPECT_FALSE(contains(tool.out, "umount=0")) << tool.out << tool.err;
    EXPECT_FALSE(contains(tool.out, "hidden")) << tool.out;

    // The kernel itself refuses, both a plain and a lazy unmount.
    const std::string helper = self_exe();
    ASSERT_FALSE(helper.empty());
    const std::vector<std::string> with_helper = {"--ro-bind",         helper, "/helper", "--setenv",
                                                  "COCOON_E2E_UMOUNT", "/d"};
    Result sys = in_sandbox(args({no_caps(), layered, with_helper}), sh("/helper; ls -A /d"));
    ASSERT_EQ(sys.code, 0) << sys.err;
    EXPECT_EQ(sys.out, "umount2 0: Operation not permitted\numount2 2: Operation not permitted\n");

    // Nor does a nested user namespace help: the mounts it inherits are locked
    // to each other. (A root caller without capabilities cannot map uid 0 into
    // a nested namespace, so there unshare itself fails.)
    Result nested = in_sandbox(args({no_caps(), layered, with_helper, {"--unshare-pid", "--proc", "/proc"}}),
                               sh("unshare -Urm sh -c '/helper; ls -A /d'; ls -A /d"));
    EXPECT_FALSE(contains(nested.out, "hidden")) << nested.out << nested.err;
    EXPECT_FALSE(contains(nested.out, ": ok")) << nested.out << nested.err;
    if (!is_root()) {
        EXPECT_EQ(nested.out, "umount2 0: Invalid argument\numount2 2: Invalid argument\n") << nested.err;
    }
}

// bwrap's rule for --cap-add/--cap-drop, for every uid: the resulting set is
// effective, permitted and inheritable, and raised as ambient (so it survives
// the exec of a non-root uid); without those options nothing is inheritable
// or ambient. Compared set by set with Debian's bwrap on the same lines.
TEST(Caps, SameSetsAsBwrap)
{
    const std::string why = bwrap_unusable({"--ro-bind", "/proc", "/proc"});
    ASSERT_EQ(why, "") << "Debian's bwrap is needed for this comparison";
    std::vector<std::vector<std::string>> lines = {
        {},
        {"--cap-add", "CAP_NET_RAW"},
        {"--cap-add", "CAP_NET_RAW", "--uid", "0", "--unshare-user"},
        {"--cap-add", "CAP_SYS_ADMIN", "--unshare-user", "--uid", "5"},
        {"--cap-add", "ALL", "--cap-drop", "CAP_SYS_ADMIN", "--unshare-user", "--uid", "0"},
        {"--cap-drop", "ALL", "--cap-add", "CAP_CHOWN", "--unshare-pid"},
    };
    if (is_root()) {
        lines.push_back({"--cap-drop", "CAP_NET_RAW"});
        lines.push_back({"--cap-drop", "CAP_NET_RAW", "--unshare-pid"});
        lines.push_back({"--cap-drop", "ALL"});
    }
    for (const auto& line : lines) {
        const auto options = args({{"--ro-bind", "/proc", "/proc"}, line});
        const std::vector<std::string> command = {"cat", "/proc/self/status"};
        Result ours = in_sandbox(options, command);
        Result theirs = run(args({{kBwrap}, minimal_root(), options, command}));
        ASSERT_EQ(ours.code, 0) << ours.err;
        ASSERT_EQ(theirs.code, 0) << theirs.err;
        for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapAmb"})
            EXPECT_EQ(status_field(ours.out, set), status_field(theirs.out, set))
                << set << " for " << testing::PrintToString(line);
        // The one deliberate difference (docs/bwrap-differences.md): cocoon's bounding set is
        // always the command's set; bwrap leaves a root caller's full when it
        // makes no user namespace, so a later exec could regain the rest.
        EXPECT_EQ(status_field(ours.out, "CapBnd"), status_field(ours.out, "CapPrm"))
            << "CapBnd for " << testing::PrintToString(line);
    }
}

}  // namespace
}  // namespace cocoon::test
