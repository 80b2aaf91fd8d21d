// The scheduling policy of every process a run makes is the caller's. The monitor runs as
// SCHED_BATCH from just before it clones the first process until it has moved to its other CPU
// (ns/launch_context.h, CpuPin::batch_for_clone), and the first process starts with it; neither
// keeps it: once the command runs, the command, PID 1 and the monitor have the caller's policy,
// for a caller with SCHED_OTHER (the one cocoon switches from), SCHED_BATCH and SCHED_IDLE (which
// it leaves alone). As root and unprivileged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/process.h"

namespace cocoon::test {
namespace {

struct Policy {
    const char* chrt;  // chrt(1)'s option for it
    const char* number;  // /proc/PID/stat's 41st field for it
};

// The monitor's policy (read on the host while the command sleeps), then the command's and PID 1's
// (read in the sandbox), one per line.
std::vector<std::string> policies_under(const Policy& policy)
{
    const std::string inner = "cut -d' ' -f41 /proc/$$/stat /proc/1/stat; sleep 5";
    std::vector<std::string> command = args({{"/usr/bin/chrt", policy.chrt, "0", cocoon_bin()},
                                             minimal_root(),
                                             {"--proc", "/proc", "--unshare-pid", "--die-with-parent"},
                                             sh(inner)});
    std::string quoted;
    for (const std::string& word : command) {
        quoted += "'";
        for (char c : word)
            quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        quoted += "' ";
    }
    // The monitor is chrt's process (chrt execs cocoon); its policy is read once the command has
    // written both lines, then the run is ended.
    const std::string outer =
        "f=$(mktemp); " + quoted + "> \"$f\" & n=0; " +
        "until [ \"$(wc -l < \"$f\")\" -ge 2 ] || [ $n -ge 1000 ]; do n=$((n+1)); sleep 0.01; done; " +
        "cut -d' ' -f41 /proc/$!/stat; cat \"$f\"; kill $!; wait; rm -f \"$f\"";
    Result r = run({"/bin/sh", "-c", outer}, "", 30'000);
    return lines(r.out);
}

TEST(SandboxScheduling, EveryProcessKeepsTheCallersPolicy)
{
    for (const Policy& policy : {Policy{"-o", "0"}, Policy{"-b", "3"}, Policy{"-i", "5"}}) {
        const std::vector<std::string> got = policies_under(policy);
        ASSERT_EQ(got.size(), 3u) << "chrt " << policy.chrt << ": " << listed(got);
        EXPECT_EQ(got[0], policy.number) << "chrt " << policy.chrt << ": the monitor's policy";
        EXPECT_EQ(got[1], policy.number) << "chrt " << policy.chrt << ": the command's policy";
        EXPECT_EQ(got[2], policy.number) << "chrt " << policy.chrt << ": PID 1's policy";
    }
}

}  // namespace
}  // namespace cocoon::test
