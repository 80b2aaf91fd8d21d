// Unit tests of environment editing, capability resolution and exit codes.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/wait.h>

#include <csignal>

#include "base/sys_error.h"
#include "ns/setup/caps.h"
#include "ns/env.h"
#include "reaper/status.h"

using namespace cocoon;

TEST(BuildEnv, AppliesOpsInOrder)
{
    std::vector<std::string> base{"A=1", "B=2", "PATH=/bin"};
    EXPECT_EQ(ns::build_env(base, {}), base);
    EXPECT_EQ(ns::build_env(base, {ns::SetEnv{"A", "x"}}), (std::vector<std::string>{"B=2", "PATH=/bin", "A=x"}));
    EXPECT_EQ(ns::build_env(base, {ns::UnsetEnv{"B"}}), (std::vector<std::string>{"A=1", "PATH=/bin"}));
    EXPECT_EQ(ns::build_env(base, {ns::SetEnv{"C", "3"}, ns::ClearEnv{}, ns::SetEnv{"D", "4"}}),
              (std::vector<std::string>{"D=4"}));
    EXPECT_EQ(ns::build_env(base, {ns::UnsetEnv{"A"}, ns::SetEnv{"A", "again"}}),
              (std::vector<std::string>{"B=2", "PATH=/bin", "A=again"}));
}

// --keep-env: the caller's value, after --clearenv or over a --setenv; unset where the caller has none.
TEST(BuildEnv, KeepEnvTakesTheCallersValue)
{
    std::vector<std::string> base{"TERM=xterm", "TOKEN=secret"};
    EXPECT_EQ(ns::build_env(base, {ns::ClearEnv{}, ns::KeepEnv{"TERM"}}), (std::vector<std::string>{"TERM=xterm"}));
    EXPECT_EQ(ns::build_env(base, {ns::SetEnv{"TERM", "dumb"}, ns::KeepEnv{"TERM"}}),
              (std::vector<std::string>{"TOKEN=secret", "TERM=xterm"}));
    EXPECT_EQ(ns::build_env(base, {ns::SetEnv{"LANG", "C"}, ns::KeepEnv{"LANG"}}),
              (std::vector<std::string>{"TERM=xterm", "TOKEN=secret"}));
}

TEST(BuildEnv, MatchesWholeNames)
{
    std::vector<std::string> base{"AB=1", "A=2", "A_B=3"};
    EXPECT_EQ(ns::build_env(base, {ns::UnsetEnv{"A"}}), (std::vector<std::string>{"AB=1", "A_B=3"}));
}

TEST(GetEnv, FindsWholeNamesOnly)
{
    std::vector<std::string> env{"HOMEDIR=/x", "HOME=/h", "EMPTY="};
    EXPECT_EQ(ns::get_env(env, "HOME"), "/h");
    EXPECT_EQ(ns::get_env(env, "EMPTY"), "");
    EXPECT_EQ(ns::get_env(env, "HOM"), std::nullopt);
}

TEST(Caps, RootKeepsAllOthersNone)
{
    EXPECT_EQ(ns::apply_cap_ops(ns::kAllCaps, {}), ns::kAllCaps);
    EXPECT_EQ(ns::apply_cap_ops(0, {}), 0u);
}

TEST(Caps, AddDropInOrder)
{
    const ns::CapSet net_admin = ns::CapSet{1} << CAP_NET_ADMIN;
    EXPECT_EQ(ns::apply_cap_ops(0, {{true, "CAP_NET_ADMIN"}}), net_admin);
    EXPECT_EQ(ns::apply_cap_ops(0, {{true, "net_admin"}}), net_admin);
    EXPECT_EQ(ns::apply_cap_ops(ns::kAllCaps, {{false, "ALL"}}), 0u);
    EXPECT_EQ(ns::apply_cap_ops(ns::kAllCaps, {{false, "ALL"}, {true, "CAP_NET_ADMIN"}}), net_admin);
    EXPECT_EQ(ns::apply_cap_ops(ns::kAllCaps, {{false, "CAP_SYS_ADMIN"}}),
              ns::kAllCaps & ~(ns::CapSet{1} << CAP_SYS_ADMIN));
    EXPECT_EQ(ns::apply_cap_ops(0, {{true, "ALL"}, {false, "ALL"}}), 0u);
}

TEST(Caps, UnknownNameIsAnError)
{
    EXPECT_THROW(ns::apply_cap_ops(0, {{true, "CAP_MAKE_COFFEE"}}), UsageError);
    EXPECT_THROW(ns::parse_cap(""), UsageError);
    EXPECT_EQ(ns::parse_cap("CAP_SYS_ADMIN"), CAP_SYS_ADMIN);
    EXPECT_EQ(ns::parse_cap("Sys_Admin"), CAP_SYS_ADMIN);
}

TEST(ExitCode, MapsExitAndSignal)
{
    EXPECT_EQ(reaper::exit_status(0).code, 0);
    EXPECT_EQ(reaper::exit_status(42 << 8).code, 42);
    EXPECT_EQ(reaper::exit_status(255 << 8).code, 255);
    EXPECT_EQ(reaper::exit_status(SIGKILL).code, 137);
    EXPECT_EQ(reaper::exit_status(SIGTERM).code, 143);
    EXPECT_EQ(reaper::exit_status(SIGSEGV | 0x80).code, 128 + SIGSEGV);  // core dumped
}
