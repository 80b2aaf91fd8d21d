// Unit tests of the command line (tools/cli.cc) and plan building (tools/plan.cc).
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>

#include "base/sys_error.h"
#include "tools/entry.h"
#include "tools/options.h"
#include "tools/plan.h"

using namespace cocoon;
using tools::Options;
using tools::parse_args;

namespace {

tools::HostFacts user_host()
{
    tools::HostFacts h;
    h.uid = 1000;
    h.gid = 1001;
    h.environ = {"HOME=/home/u", "PATH=/usr/bin"};
    h.cwd = "/home/u/work";
    return h;
}

tools::HostFacts root_host()
{
    tools::HostFacts h = user_host();
    h.uid = h.gid = 0;
    return h;
}

int run_main(std::vector<std::string> args)
{
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    return tools::cocoon_main(static_cast<int>(args.size()), argv.data());
}

} // namespace

TEST(ParseArgs, SplitsAtDoubleDash)
{
    Options o = parse_args({"--unshare-net", "--", "--not-an-option", "x"});
    EXPECT_TRUE(o.unshare_net);
    EXPECT_EQ(o.command, (std::vector<std::string>{"--not-an-option", "x"}));
}

TEST(ParseArgs, SplitsAtFirstNonOption)
{
    Options o = parse_args({"--chdir", "/tmp", "sh", "-c", "--bind"});
    EXPECT_EQ(o.chdir, "/tmp");
    EXPECT_EQ(o.command, (std::vector<std::string>{"sh", "-c", "--bind"}));
}

TEST(ParseArgs, OptionArgumentsAreNotTheCommand)
{
    Options o = parse_args({"--setenv", "A", "value", "--hostname", "h", "true"});
    ASSERT_EQ(o.env.size(), 1u);
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[0]).value, "value");
    EXPECT_EQ(o.hostname, "h");
    EXPECT_EQ(o.command, (std::vector<std::string>{"true"}));
}

TEST(ParseArgs, KeepsMountOrderAndRepeats)
{
    Options o = parse_args({"--tmpfs", "/a", "--ro-bind", "/s", "/a/b", "--bind-try", "/t", "/c", "--dev", "/dev",
                            "--symlink", "usr/lib", "/lib", "--remount-ro", "/a", "--dir", "/d", "--proc", "/proc",
                            "--dev-bind", "/x", "/y", "true"});
    ASSERT_EQ(o.mounts.size(), 9u);
    EXPECT_TRUE(std::holds_alternative<mount::Tmpfs>(o.mounts[0]));
    EXPECT_EQ(std::get<mount::Bind>(o.mounts[1]).kind, mount::BindKind::ReadOnly);
    EXPECT_TRUE(std::get<mount::Bind>(o.mounts[2]).optional);
    EXPECT_TRUE(std::holds_alternative<mount::Dev>(o.mounts[3]));
    EXPECT_EQ(std::get<mount::Symlink>(o.mounts[4]).target, "usr/lib");
    EXPECT_TRUE(std::holds_alternative<mount::RemountRo>(o.mounts[5]));
    EXPECT_TRUE(std::holds_alternative<mount::Dir>(o.mounts[6]));
    EXPECT_TRUE(std::holds_alternative<mount::Proc>(o.mounts[7]));
    EXPECT_EQ(std::get<mount::Bind>(o.mounts[8]).kind, mount::BindKind::Dev);
}

TEST(ParseArgs, UnshareAllThenShareNet)
{
    Options o = parse_args({"--unshare-all", "--share-net", "true"});
    EXPECT_TRUE(o.unshare_pid && o.unshare_ipc && o.unshare_uts && o.unshare_user_try && o.unshare_cgroup_try);
    EXPECT_FALSE(o.unshare_net);
    EXPECT_TRUE(parse_args({"--share-net", "--unshare-all", "true"}).unshare_net);
}

TEST(ParseArgs, Errors)
{
    EXPECT_THROW(parse_args({"--no-such-option", "true"}), UsageError);
    EXPECT_THROW(parse_args({"-x", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--bind", "/only-one"}), UsageError);
    EXPECT_THROW(parse_args({"--uid", "12x", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--uid", "-1", "true"}), UsageError);
    // No abbreviations: bwrap has none.
    EXPECT_THROW(parse_args({"--unshare-ne", "true"}), UsageError);
    try {
        parse_args({"--ro-bind", "/a"});
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--ro-bind takes 2 arguments");
    }
}

TEST(MakePlan, UnprivilegedGetsUserNamespace)
{
    ns::LaunchPlan p = tools::make_launch_plan(parse_args({"true"}), user_host());
    EXPECT_EQ(p.clone_flags, static_cast<unsigned long long>(CLONE_NEWNS | CLONE_NEWUSER));
    EXPECT_EQ(p.uid, 1000u);
    EXPECT_EQ(p.gid, 1001u);
    EXPECT_EQ(p.real_uid, 1000u);
    EXPECT_EQ(p.caps, 0u);
    EXPECT_EQ(p.host_cwd, "/home/u/work");
}

TEST(MakePlan, RootNeedsToAskForUserNamespace)
{
    EXPECT_EQ(tools::make_launch_plan(parse_args({"true"}), root_host()).clone_flags,
              static_cast<unsigned long long>(CLONE_NEWNS));
    EXPECT_TRUE(tools::make_launch_plan(parse_args({"--unshare-user", "true"}), root_host()).clone_flags & CLONE_NEWUSER);
    tools::HostFacts no_userns = root_host();
    no_userns.has_user_ns = false;
    EXPECT_FALSE(tools::make_launch_plan(parse_args({"--unshare-user-try", "true"}), no_userns).clone_flags &
                 CLONE_NEWUSER);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"true"}), root_host()).caps, ns::kAllCaps);
}

TEST(MakePlan, RootKeepsOnlyTheCapabilitiesItHas)
{
    tools::HostFacts h = root_host();
    h.permitted_caps = ns::kAllCaps & ~(ns::CapSet{1} << 24);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"true"}), h).caps, h.permitted_caps);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"--unshare-user", "true"}), h).caps, ns::kAllCaps);
}

TEST(MakePlan, UnshareAllFlags)
{
    ns::LaunchPlan p = tools::make_launch_plan(parse_args({"--unshare-all", "true"}), user_host());
    EXPECT_EQ(p.clone_flags, static_cast<unsigned long long>(CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
                                                             CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP));
    tools::HostFacts no_cgroupns = user_host();
    no_cgroupns.has_cgroup_ns = false;
    EXPECT_FALSE(tools::make_launch_plan(parse_args({"--unshare-all", "true"}), no_cgroupns).clone_flags &
                 CLONE_NEWCGROUP);
}

TEST(MakePlan, RulesBetweenOptions)
{
    EXPECT_THROW(tools::make_launch_plan(parse_args({"--uid", "0", "true"}), root_host()), UsageError);
    EXPECT_NO_THROW(tools::make_launch_plan(parse_args({"--uid", "0", "true"}), user_host()));
    EXPECT_THROW(tools::make_launch_plan(parse_args({"--hostname", "x", "true"}), user_host()), UsageError);
    EXPECT_THROW(tools::make_launch_plan(parse_args({"--as-pid-1", "true"}), user_host()), UsageError);
    EXPECT_THROW(tools::make_launch_plan(parse_args({"--unshare-net"}), user_host()), UsageError);
}

TEST(MakePlan, AmbientOnlyForAddedCapsOfNonRootUid)
{
    auto plan = [](std::vector<std::string> args, const tools::HostFacts& h) {
        return tools::make_launch_plan(parse_args(args), h);
    };
    EXPECT_TRUE(plan({"--cap-add", "CAP_NET_ADMIN", "true"}, user_host()).ambient_caps);
    EXPECT_FALSE(plan({"--uid", "0", "--cap-add", "CAP_NET_ADMIN", "true"}, user_host()).ambient_caps);
    EXPECT_FALSE(plan({"--unshare-user", "--uid", "5", "true"}, root_host()).ambient_caps);
    EXPECT_FALSE(plan({"--cap-drop", "ALL", "true"}, root_host()).ambient_caps);
}

TEST(MakePlan, EnvironmentIsEdited)
{
    ns::LaunchPlan p = tools::make_launch_plan(parse_args({"--unsetenv", "HOME", "--setenv", "X", "y", "true"}), user_host());
    EXPECT_EQ(p.env, (std::vector<std::string>{"PATH=/usr/bin", "X=y"}));
}

TEST(CocoonMain, BadInputExitsOneWithOneLine)
{
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--frobnicate"})), testing::ExitedWithCode(1),
                "^cocoon: Unknown option --frobnicate\n$");
    ASSERT_EXIT(std::exit(run_main({"/usr/local/bin/bwrap", "--frobnicate"})), testing::ExitedWithCode(1),
                "^bwrap: Unknown option --frobnicate\n$");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--unshare-net"})), testing::ExitedWithCode(1),
                "^cocoon: No command specified");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--bind", "/a", "/b/../c", "true"})), testing::ExitedWithCode(1),
                "^cocoon: Invalid destination /b/../c");
}

TEST(CocoonMain, HelpListsEveryOption)
{
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_main({"cocoon", "--help"}), 0);
    std::string help = testing::internal::GetCapturedStdout();
    for (const char* opt : {"--bind SRC DEST", "--ro-bind-try SRC DEST", "--unshare-all", "--cap-drop CAP", "--proc DEST"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(ParseArgs, RelayAndProxyEnv)
{
    Options o = parse_args({"--unshare-net", "--relay", "3128", "/run/proxy.sock", "--proxy-env", "3128", "true"});
    ASSERT_EQ(o.relays.size(), 1u);
    EXPECT_EQ(o.relays[0].port, 3128);
    EXPECT_EQ(o.relays[0].socket, "/run/proxy.sock");
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    for (const char* entry : {"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
                              "http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
                              "ALL_PROXY=http://127.0.0.1:3128", "NO_PROXY=127.0.0.1,localhost,::1",
                              "no_proxy=127.0.0.1,localhost,::1", "NODE_USE_ENV_PROXY=1"})
        EXPECT_NE(std::find(p.env.begin(), p.env.end(), entry), p.env.end()) << entry;
    // Order with other environment edits holds: a later --unsetenv wins.
    EXPECT_EQ(std::count(p.env.begin(), p.env.end(), "NODE_USE_ENV_PROXY=1"), 1);
    ns::LaunchPlan q =
        tools::make_launch_plan(parse_args({"--proxy-env", "8080", "--unsetenv", "ALL_PROXY", "true"}), user_host());
    for (const std::string& e : q.env)
        EXPECT_NE(e.rfind("ALL_PROXY=", 0), 0u) << e;
}

TEST(ParseArgs, RelayErrors)
{
    EXPECT_THROW(parse_args({"--relay", "0", "/s", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--relay", "65536", "/s", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--proxy-env", "http", "true"}), UsageError);
    auto plan = [](std::vector<std::string> args) { return tools::make_launch_plan(parse_args(args), user_host()); };
    EXPECT_THROW(plan({"--relay", "80", "/s", "true"}), UsageError);  // no --unshare-net
    EXPECT_THROW(plan({"--unshare-net", "--relay", "80", "s.sock", "true"}), UsageError);
    EXPECT_THROW(plan({"--unshare-net", "--relay", "80", "/a", "--relay", "80", "/b", "true"}), UsageError);
    EXPECT_NO_THROW(plan({"--unshare-all", "--relay", "80", "/a", "--relay", "81", "/a", "true"}));
    EXPECT_THROW(plan({"--unshare-all", "--share-net", "--relay", "80", "/a", "true"}), UsageError);
}

TEST(ParseArgs, StopOptions)
{
    Options o = parse_args({"--unshare-pid", "--forward-signals", "--kill-after", "2.5", "true"});
    EXPECT_TRUE(o.forward_signals);
    EXPECT_EQ(o.kill_after, 2.5);
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    EXPECT_TRUE(p.forward_signals);
    EXPECT_EQ(p.kill_after, 2.5);
    EXPECT_THROW(parse_args({"--kill-after", "-1", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--kill-after", "soon", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--kill-after", "nan", "true"}), UsageError);
    auto plan = [](std::vector<std::string> args) { return tools::make_launch_plan(parse_args(args), user_host()); };
    EXPECT_THROW(plan({"--forward-signals", "true"}), UsageError);
    EXPECT_THROW(plan({"--kill-after", "1", "true"}), UsageError);
    EXPECT_EQ(parse_args({"--json-status-fd", "3", "--info-fd", "4", "true"}).json_status_fd, 3);
    EXPECT_THROW(parse_args({"--info-fd", "x", "true"}), UsageError);
}

namespace {

// The message of the UsageError that parse_args throws, or "" if none.
std::string parse_error(std::vector<std::string> args)
{
    try {
        parse_args(args);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

template <typename T>
const T& op(const Options& o, size_t i)
{
    return std::get<T>(o.mounts.at(i));
}

} // namespace

TEST(ParseArgs, DataOptionsHaveBwrapsDefaultModes)
{
    Options o = parse_args({"--file", "3", "/f", "--bind-data", "4", "/bd", "--ro-bind-data", "5", "/rbd", "--dir", "/d",
                            "--tmpfs", "/t", "true"});
    ASSERT_EQ(o.mounts.size(), 5u);
    EXPECT_EQ(op<mount::Data>(o, 0).kind, mount::DataKind::File);
    EXPECT_EQ(op<mount::Data>(o, 0).fd, 3);
    EXPECT_EQ(op<mount::Data>(o, 0).dest, "/f");
    EXPECT_EQ(op<mount::Data>(o, 0).mode, 0666u);
    EXPECT_EQ(op<mount::Data>(o, 1).kind, mount::DataKind::Bind);
    EXPECT_EQ(op<mount::Data>(o, 1).mode, 0600u);
    EXPECT_EQ(op<mount::Data>(o, 2).kind, mount::DataKind::RoBind);
    EXPECT_EQ(op<mount::Data>(o, 2).mode, 0600u);
    EXPECT_EQ(op<mount::Dir>(o, 3).mode, 0755u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).mode, 0755u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).size, 0u);
    for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(op<mount::Data>(o, i).parent_mode, 0755u);
}

TEST(ParseArgs, PermsAndSizeModifyOnlyTheNextOption)
{
    Options o = parse_args({"--perms", "0700", "--tmpfs", "/a", "--tmpfs", "/b", "--perms", "640", "--file", "3", "/c/f",
                            "--size", "0x10", "--perms", "0750", "--tmpfs", "/s", "--perms", "0711", "--size", "010",
                            "--tmpfs", "/u", "--dir", "/d", "true"});
    ASSERT_EQ(o.mounts.size(), 6u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 0).mode, 0700u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 0).parent_mode, 0700u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).mode, 0755u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).parent_mode, 0755u);
    EXPECT_EQ(op<mount::Data>(o, 2).mode, 0640u);
    EXPECT_EQ(op<mount::Data>(o, 2).parent_mode, 0750u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 3).mode, 0750u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 3).size, 16u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).mode, 0711u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).size, 8u);
    EXPECT_EQ(op<mount::Dir>(o, 5).mode, 0755u);
    EXPECT_FALSE(o.next_perms);
    EXPECT_FALSE(o.next_size);
    // Nothing after them: they do nothing, as in bwrap.
    Options trailing = parse_args({"--perms", "0700", "--size", "5", "--", "true"});
    EXPECT_TRUE(trailing.mounts.empty());
    EXPECT_FALSE(trailing.next_perms);
    EXPECT_EQ(parse_args({"--size", "9223372036854775807", "--tmpfs", "/t", "true"}).mounts.size(), 1u);
}

TEST(ParseArgs, PermsAndSizeMisuseUsesBwrapsMessages)
{
    const std::string not_creating = "--perms must be followed by an option that creates a file";
    EXPECT_EQ(parse_error({"--perms", "0700", "--bind", "/a", "/b", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--symlink", "a", "/b", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--setenv", "A", "B", "--dir", "/d", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--chmod", "0700", "/d", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--mqueue", "/m", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--bind-fd", "3", "/m", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--perms", "0600", "--dir", "/d", "true"}),
              "--perms given twice for the same action");
    EXPECT_EQ(parse_error({"--size", "1", "--size", "2", "--tmpfs", "/t", "true"}),
              "--size given twice for the same action");
    EXPECT_EQ(parse_error({"--size", "100", "--dir", "/d", "true"}), "--size must be followed by --tmpfs");
    EXPECT_EQ(parse_error({"--size", "100", "--perms", "0700", "--dir", "/d", "true"}),
              "--size must be followed by --tmpfs");
    EXPECT_EQ(parse_error({"--perms", "0700", "--size", "100", "--file", "3", "/f", "true"}),
              "--size must be followed by --tmpfs");
    for (const char* bad : {"999", "10000", "0o700", "0x1", "", "-1", "+7", "7 "})
        EXPECT_EQ(parse_error({"--perms", bad, "--dir", "/d", "true"}), "--perms takes an octal argument <= 07777")
            << bad;
    EXPECT_EQ(parse_error({"--chmod", "8", "/d", "true"}), "--chmod takes an octal argument <= 07777");
    for (const char* bad : {"0", "-1", "abc", "1k", "", "0x", "18446744073709551616"})
        EXPECT_EQ(parse_error({"--size", bad, "--tmpfs", "/t", "true"}), "--size takes a non-zero number of bytes")
            << bad;
    EXPECT_EQ(parse_error({"--size", "9223372036854775808", "--tmpfs", "/t", "true"}),
              "--size (for tmpfs) is limited to 9223372036854775807");
}

TEST(ParseArgs, ChmodMqueueAndBindFdKeepTheirPlace)
{
    Options o = parse_args({"--dir", "/d", "--chmod", "0711", "/d", "--mqueue", "/dev/mqueue", "--bind-fd", "3", "/w",
                            "--ro-bind-fd", "4", "/r", "true"});
    ASSERT_EQ(o.mounts.size(), 5u);
    EXPECT_EQ(op<mount::Chmod>(o, 1).dest, "/d");
    EXPECT_EQ(op<mount::Chmod>(o, 1).mode, 0711u);
    EXPECT_EQ(op<mount::Mqueue>(o, 2).dest, "/dev/mqueue");
    EXPECT_EQ(op<mount::Bind>(o, 3).fd, 3);
    EXPECT_EQ(op<mount::Bind>(o, 3).kind, mount::BindKind::ReadWrite);
    EXPECT_FALSE(op<mount::Bind>(o, 3).optional);
    EXPECT_EQ(op<mount::Bind>(o, 4).fd, 4);
    EXPECT_EQ(op<mount::Bind>(o, 4).kind, mount::BindKind::ReadOnly);
    EXPECT_EQ(parse_error({"--file", "abc", "/f", "true"}), "Invalid --file argument: abc");
    EXPECT_EQ(parse_error({"--ro-bind-fd", "-1", "/f", "true"}), "Invalid --ro-bind-fd argument: -1");
    EXPECT_EQ(parse_error({"--bind-data", "3"}), "--bind-data takes 2 arguments");
}

TEST(CocoonMain, ClosedFdIsRefusedNamingOptionAndFd)
{
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--file", "987", "/f", "true"})), testing::ExitedWithCode(1),
                "^cocoon: Invalid --file 987: Bad file descriptor\n$");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--ro-bind-fd", "987", "/f", "true"})), testing::ExitedWithCode(1),
                "^cocoon: Invalid --ro-bind-fd 987: Bad file descriptor\n$");
}

TEST(CocoonMain, HelpListsTheFilesystemOptions)
{
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_main({"cocoon", "--help"}), 0);
    std::string help = testing::internal::GetCapturedStdout();
    for (const char* opt : {"--perms OCTAL", "--size BYTES", "--chmod OCTAL PATH", "--file FD DEST", "--bind-data FD DEST",
                            "--ro-bind-data FD DEST", "--bind-fd FD DEST", "--ro-bind-fd FD DEST", "--mqueue DEST"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}
