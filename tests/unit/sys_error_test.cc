// The one error type of set-up and the monitor (base/sys_error.h): its text with and without a
// path, the step it carries (a set-up step's name comes back from the setup channel with it), and
// the warning line the monitor builds from it.
#include "base/sys_error.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "ns/channel.h"

namespace cocoon {
namespace {

TEST(SysError, SetUpsTextIsUnchanged)
{
    SysError e(ENOENT, "Can't find source path /x");
    EXPECT_STREQ(e.what(), "Can't find source path /x: No such file or directory");
    EXPECT_EQ(e.step(), "");
    EXPECT_EQ(e.path(), "");
    EXPECT_EQ(e.code(), ENOENT);
}

TEST(SysError, AStepAndAPath)
{
    SysError e("cgroup", EBUSY, "can't remove the sandbox's cgroup", "/sys/fs/cgroup/cocoon-7");
    EXPECT_STREQ(e.what(), "can't remove the sandbox's cgroup /sys/fs/cgroup/cocoon-7: Device or resource busy");
    EXPECT_EQ(e.step(), "cgroup");
    EXPECT_EQ(e.path(), "/sys/fs/cgroup/cocoon-7");
    EXPECT_EQ(e.context(), "can't remove the sandbox's cgroup");
    EXPECT_EQ(e.code(), EBUSY);
}

// A set-up failure in the sandbox comes back with its step; its text stays bwrap's.
TEST(SysError, ASetUpStepComesBackFromTheChannel)
{
    try {
        ns::rethrow(ns::error_message(SysError(EACCES, "Can't mkdir /newroot/x"), "8 (mounts)"));
    } catch (const SysError& e) {
        EXPECT_EQ(e.step(), "8 (mounts)");
        EXPECT_EQ(e.code(), EACCES);
        EXPECT_STREQ(e.what(), "Can't mkdir /newroot/x: Permission denied");
    }
}

// The warning line: prefix, "cocoon: ", the step, the text, the outcome; on stderr.
TEST(Warnings, OneLineOfStepTextAndOutcome)
{
    Warnings warnings("<4>");
    testing::internal::CaptureStderr();
    warnings.say(SysError("login sync", EROFS, "--login-file /a/cred /home/agent/.cred: can't write", "/a/.cred.t"),
                 "SRC keeps its last saved version");
    warnings.say("login sync", "--login-file /a/cred /home/agent/.cred: DEST is a FIFO: refused");
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "<4>cocoon: login sync: --login-file /a/cred /home/agent/.cred: can't write /a/.cred.t: Read-only file "
              "system; SRC keeps its last saved version\n"
              "<4>cocoon: login sync: --login-file /a/cred /home/agent/.cred: DEST is a FIFO: refused\n");
    ASSERT_TRUE(warnings.last());
    EXPECT_EQ(warnings.last()->code(), EROFS);
}

}  // namespace
}  // namespace cocoon
