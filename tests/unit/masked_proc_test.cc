// A masked /proc (a container's) found in a mount table, and the advice said for it (issue 36).
#include <gtest/gtest.h>

#include <string>

#include "mount/masked_proc.h"

namespace cocoon {
namespace {

// Docker's /proc: masks over files and directories, parts bound read-only on themselves.
constexpr const char* kDockerProc = "700 600 0:60 / / rw,relatime - overlay overlay rw\n"
                                    "701 700 0:63 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
                                    "702 701 0:63 /bus /proc/bus ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
                                    "703 701 0:63 /sys /proc/sys ro,nosuid,nodev,noexec,relatime - proc proc rw\n"
                                    "704 701 0:65 / /proc/acpi ro,relatime - tmpfs tmpfs ro\n"
                                    "705 701 0:5 /null /proc/kcore rw,nosuid shared:2 - devtmpfs udev rw,size=4k\n"
                                    "706 700 0:64 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n";

TEST(MaskedProcTable, NamesAMaskFirst)
{
    EXPECT_EQ(mount::masked_proc_path(kDockerProc), "/proc/acpi");
    EXPECT_EQ(mount::masked_proc_path("1 0 0:1 / / rw - ext4 /dev/vda rw\n"
                                      "2 1 0:2 / /proc rw - proc proc rw\n"
                                      "3 2 0:2 /sys /proc/sys ro - proc proc rw\n"),
              "/proc/sys");
}

TEST(MaskedProcTable, NoneOnAHost)
{
    EXPECT_EQ(mount::masked_proc_path("1 0 0:1 / / rw - ext4 /dev/vda rw\n"
                                      "2 1 0:2 / /proc rw - proc proc rw\n"
                                      "3 2 0:40 / /proc/sys/fs/binfmt_misc rw - autofs systemd-1 rw\n"
                                      "4 3 0:41 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw\n"
                                      "5 1 0:3 / /process rw - tmpfs tmpfs rw\n"),
              "");
    EXPECT_EQ(mount::masked_proc_path(""), "");
    EXPECT_EQ(mount::masked_proc_path("garbage\n1 2 3\n"), "");
}

TEST(MaskedProcTable, UndoesEscapesAndSeesAnyProcMount)
{
    EXPECT_EQ(mount::masked_proc_path("1 0 0:1 / / rw - ext4 /dev/vda rw\n"
                                      "2 1 0:2 / /new\\040root/proc rw shared:5 master:1 - proc proc rw\n"
                                      "3 2 0:5 /null /new\\040root/proc/keys rw - devtmpfs udev rw\n"),
              "/new root/proc/keys");
    EXPECT_NE(mount::masked_proc_advice("/proc/kcore").find("(/proc/kcore)"), std::string::npos);
    for (const char* option : {"--security-opt unmask=ALL", "--security-opt systempaths=unconfined",
                               "procMount: Unmasked", "leave out --proc"})
        EXPECT_NE(mount::masked_proc_advice("/proc/kcore").find(option), std::string::npos) << option;
}

}  // namespace
}  // namespace cocoon
