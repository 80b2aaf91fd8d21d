// --check's words for a refused call name what refused it, never "needs Linux X" on a kernel that
// has X (issue 36).
#include <cerrno>

#include <gtest/gtest.h>

#include <string>

#include "tools/cocoon/check_refusal.h"

namespace cocoon {
namespace {

using tools::KernelVersion;
using tools::Outcome;
using tools::ProcessFacts;

TEST(CheckRefusal, KernelVersions)
{
    EXPECT_EQ(tools::to_string(tools::parse_kernel_version("6.18.44-fc-v1300")), "6.18");
    EXPECT_EQ(tools::to_string(tools::parse_kernel_version("5.4.0")), "5.4");
    EXPECT_EQ(tools::to_string(tools::parse_kernel_version("weird")), "0.0");
    EXPECT_TRUE((KernelVersion{5, 4} < KernelVersion{5, 12}));
    EXPECT_FALSE((KernelVersion{6, 1} < KernelVersion{5, 12}));
}

TEST(CheckRefusal, AnOlderKernelNeedsANewerOne)
{
    const Outcome o{ENOSYS, "mount_setattr", {5, 12}};
    EXPECT_EQ(tools::refusal(o, {{5, 10}, false}), "mount_setattr needs Linux 5.12 or later (this is 5.10)");
    EXPECT_EQ(tools::remedy(o, {{5, 10}, false}), "run on Linux 5.12 or later");
    EXPECT_EQ(tools::refusal({EINVAL, "fsopen", {5, 2}}, {{4, 19}, true}),
              "fsopen needs Linux 5.2 or later (this is 4.19)");
}

// A container's seccomp profile answers EPERM (or ENOSYS) for a call the kernel has: never "needs".
TEST(CheckRefusal, ARefusalOnAKernelThatHasTheCallNamesWhatRefused)
{
    const ProcessFacts filtered{{6, 18}, true}, plain{{6, 18}, false};
    for (int err : {EPERM, EACCES, ENOSYS})
        for (const ProcessFacts& f : {filtered, plain})
            EXPECT_EQ(tools::refusal({err, "fsopen", {5, 2}}, f).find("needs Linux"), std::string::npos) << err;
    EXPECT_EQ(tools::refusal({EPERM, "fsopen", {5, 2}}, filtered),
              "fsopen refused (EPERM) on Linux 6.18, which has it: by this process's seccomp filter or a missing "
              "capability (in a container: its runtime's seccomp profile or capabilities)");
    EXPECT_EQ(tools::refusal({EPERM, "fsopen", {5, 2}}, plain),
              "fsopen refused (EPERM) on Linux 6.18, which has it: by a missing capability or an LSM policy "
              "(AppArmor, SELinux); no seccomp filter is in force");
    EXPECT_EQ(tools::refusal({ENOSYS, "clone3", {5, 3}}, filtered),
              "clone3 answered ENOSYS on Linux 6.18, which has it: this process's seccomp filter refuses it (in a "
              "container: its runtime's seccomp profile)");
    EXPECT_NE(tools::remedy({EPERM, "fsopen", {5, 2}}, filtered).find("--security-opt seccomp="), std::string::npos);
    EXPECT_EQ(tools::refusal({ENOENT, "open", {2, 0}}, plain), "open: No such file or directory (ENOENT)");
}

}  // namespace
}  // namespace cocoon
