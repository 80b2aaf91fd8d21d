// zombie_wait_status: the command's wait status from a zombie's /proc/PID/stat, whose comm field
// (in parentheses) the command chose itself.
#include "ns/monitor/command_watch.h"

#include <gtest/gtest.h>

#include <string>

namespace cocoon::ns {
namespace {

// A stat line with the given comm and state, exit_code (field 52) last.
std::string stat_line(const std::string& comm, const std::string& state, const std::string& exit_code)
{
    std::string line = "4242 (" + comm + ") " + state;
    for (int field = 4; field <= 51; ++field)
        line += " " + std::to_string(field);
    return line + " " + exit_code + "\n";
}

TEST(ZombieWaitStatus, ReadsField52OfAZombie)
{
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "Z", "1792")), 1792);  // exit 7
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "Z", "9")), 9);  // SIGKILL
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "Z", "0")), 0);
}

TEST(ZombieWaitStatus, ACommChosenToMisleadIsSkipped)
{
    // The fields are counted from the last ')': a comm that holds ") Z 1 2 ..." changes nothing.
    EXPECT_EQ(zombie_wait_status(stat_line("a) Z 1 2 3", "Z", "256")), 256);
    EXPECT_EQ(zombie_wait_status(stat_line("x) Z", "S", "0")), std::nullopt);
    EXPECT_EQ(zombie_wait_status(stat_line(") (", "Z", "512")), 512);
}

TEST(ZombieWaitStatus, AnythingElseIsNothing)
{
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "S", "0")), std::nullopt);  // alive
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "Z", "-1")), std::nullopt);
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "Z", "65536")), std::nullopt);
    EXPECT_EQ(zombie_wait_status(stat_line("sh", "Z", "12x")), std::nullopt);
    EXPECT_EQ(zombie_wait_status("4242 (sh) Z 1 2 3\n"), std::nullopt);  // short
    EXPECT_EQ(zombie_wait_status("no parenthesis"), std::nullopt);
    EXPECT_EQ(zombie_wait_status(""), std::nullopt);
}

}  // namespace
}  // namespace cocoon::ns
