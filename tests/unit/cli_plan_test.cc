// Unit tests of the command line (tools/cli.cc) and plan building (tools/plan.cc).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sched.h>

#include <algorithm>
#include <map>

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

}  // namespace

TEST(ParseArgs, SplitsAtDoubleDash)
{
    Options o = parse_args({"--unshare-net", "--", "--not-an-option", "x"});
    EXPECT_TRUE(o.unshare_net);
    EXPECT_EQ(o.command, (std::vector<std::string>{"--not-an-option", "x"}));
}

TEST(ParseArgs, SplitsAtFirstNonOption)
{
    Options o = parse_args({"--chdir", "/tmp", "sh", "-c", "--bind"});
    EXPECT_EQ(o.process.chdir, "/tmp");
    EXPECT_EQ(o.command, (std::vector<std::string>{"sh", "-c", "--bind"}));
}

TEST(ParseArgs, OptionArgumentsAreNotTheCommand)
{
    Options o = parse_args({"--setenv", "A", "value", "--hostname", "h", "true"});
    ASSERT_EQ(o.env.size(), 1u);
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[0]).value, "value");
    EXPECT_EQ(o.process.hostname, "h");
    EXPECT_EQ(o.command, (std::vector<std::string>{"true"}));
}

TEST(ParseArgs, KeepsMountOrderAndRepeats)
{
    Options o = parse_args({"--tmpfs", "/a",     "--ro-bind", "/s",         "/a/b", "--bind-try",   "/t",  "/c",
                            "--dev",   "/dev",   "--symlink", "usr/lib",    "/lib", "--remount-ro", "/a",  "--dir",
                            "/d",      "--proc", "/proc",     "--dev-bind", "/x",   "/y",           "true"});
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

// The limits' values reach the plan as bytes and tasks; the cgroup writes them as they are.
TEST(ParseArgs, CgroupLimits)
{
    Options o = parse_args({"--cgroup-parent", "/sys/fs/cgroup/x", "--memory-max", "3G", "--pids-max", "64", "true"});
    EXPECT_EQ(o.process.cgroup.parent, "/sys/fs/cgroup/x");
    EXPECT_EQ(o.process.cgroup.memory_max, 3ULL << 30);
    EXPECT_EQ(o.process.cgroup.pids_max, 64U);
    for (auto [text, bytes] : {std::pair{"4096", 4096ULL}, std::pair{"8K", 8ULL << 10}, std::pair{"512M", 512ULL << 20},
                               std::pair{"2T", 2ULL << 40}})
        EXPECT_EQ(parse_args({"--memory-max", text, "true"}).process.cgroup.memory_max, bytes) << text;
    for (const char* bad : {"", "0", "1k", "1MB", "M", "-1", "0x10", "99999999999T"})
        EXPECT_THROW(parse_args({"--memory-max", bad, "true"}), UsageError) << bad;
    for (const char* bad : {"", "0", "-1", "1.5", "3000000000"})
        EXPECT_THROW(parse_args({"--pids-max", bad, "true"}), UsageError) << bad;
    EXPECT_FALSE(parse_args({"true"}).process.cgroup.has_limit());
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
    EXPECT_TRUE(tools::make_launch_plan(parse_args({"--unshare-user", "true"}), root_host()).clone_flags &
                CLONE_NEWUSER);
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
    // bwrap's rule: in a user namespace too, root starts from what it holds;
    // only --cap-add grants more there (and without one, it cannot).
    EXPECT_EQ(tools::make_launch_plan(parse_args({"--unshare-user", "true"}), h).caps, h.permitted_caps);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"--unshare-user", "--cap-add", "ALL", "true"}), h).caps,
              ns::kAllCaps);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"--cap-add", "ALL", "true"}), h).caps, h.permitted_caps);
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

TEST(MakePlan, AmbientWheneverCapabilityOptionsAreGiven)
{
    auto plan = [](std::vector<std::string> args, const tools::HostFacts& h) {
        return tools::make_launch_plan(parse_args(args), h);
    };
    // bwrap's rule, for every uid: --cap-add or --cap-drop makes the result
    // inheritable and ambient; nothing to raise, nothing raised.
    EXPECT_TRUE(plan({"--cap-add", "CAP_NET_ADMIN", "true"}, user_host()).ambient_caps);
    EXPECT_TRUE(plan({"--uid", "0", "--cap-add", "CAP_NET_ADMIN", "true"}, user_host()).ambient_caps);
    EXPECT_TRUE(plan({"--cap-drop", "CAP_NET_RAW", "true"}, root_host()).ambient_caps);
    EXPECT_FALSE(plan({"--unshare-user", "--uid", "5", "true"}, root_host()).ambient_caps);
    EXPECT_FALSE(plan({"true"}, root_host()).ambient_caps);
    EXPECT_FALSE(plan({"--cap-drop", "ALL", "true"}, root_host()).ambient_caps);
    EXPECT_FALSE(plan({"--uid", "0", "true"}, user_host()).ambient_caps);
}

TEST(MakePlan, EnvironmentIsEdited)
{
    ns::LaunchPlan p =
        tools::make_launch_plan(parse_args({"--unsetenv", "HOME", "--setenv", "X", "y", "true"}), user_host());
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
    for (const char* opt :
         {"--bind SRC DEST", "--ro-bind-try SRC DEST", "--unshare-all", "--cap-drop CAP", "--proc DEST"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(CocoonMain, HelpNamesThePathItWasRunBy)
{
    // bwrap's first line, with argv[0] as given (scripts match it).
    for (const char* argv0 : {"cocoon", "/usr/local/bin/bwrap", "./build/tools/cocoon"}) {
        testing::internal::CaptureStdout();
        EXPECT_EQ(run_main({argv0, "--help"}), 0);
        std::string help = testing::internal::GetCapturedStdout();
        EXPECT_EQ(help.substr(0, help.find('\n')),
                  std::string("usage: ") + argv0 + " [OPTIONS...] [--] COMMAND [ARGS...]");
    }
}

TEST(ParseArgs, RelayAndProxyEnv)
{
    Options o = parse_args({"--unshare-net", "--relay", "3128", "/run/proxy.sock", "--proxy-env", "3128", "true"});
    ASSERT_EQ(o.process.relays.size(), 1u);
    EXPECT_EQ(o.process.relays[0].port, 3128);
    EXPECT_EQ(o.process.relays[0].socket, "/run/proxy.sock");
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    for (const char* entry :
         {"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
          "https_proxy=http://127.0.0.1:3128", "ALL_PROXY=http://127.0.0.1:3128", "NO_PROXY=127.0.0.1,localhost,::1",
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
    EXPECT_TRUE(o.process.forward_signals);
    EXPECT_EQ(o.process.kill_after, 2.5);
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    EXPECT_TRUE(p.process.forward_signals);
    EXPECT_EQ(p.process.kill_after, 2.5);
    EXPECT_THROW(parse_args({"--kill-after", "-1", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--kill-after", "soon", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--kill-after", "nan", "true"}), UsageError);
    auto plan = [](std::vector<std::string> args) { return tools::make_launch_plan(parse_args(args), user_host()); };
    EXPECT_THROW(plan({"--forward-signals", "true"}), UsageError);
    EXPECT_THROW(plan({"--kill-after", "1", "true"}), UsageError);
    EXPECT_EQ(parse_args({"--json-status-fd", "3", "--info-fd", "4", "true"}).fds.json_status, 3);
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

template <typename T> const T& op(const Options& o, size_t i)
{
    return std::get<T>(o.mounts.at(i));
}

using namespace std::string_literals;

// An FdReader over canned contents; records which fds were read, in order.
struct FakeFds {
    std::map<int, std::string> contents;
    std::vector<int> read;
    tools::FdReader reader()
    {
        return [this](int fd, const std::string& context) {
            read.push_back(fd);
            auto it = contents.find(fd);
            if (it == contents.end())
                throw SysError(EBADF, context);
            return it->second;
        };
    }
};

ns::LaunchPlan plan_for(std::vector<std::string> args, const tools::HostFacts& host, FakeFds* fds = nullptr)
{
    FakeFds none;
    return tools::make_launch_plan(parse_args(args, (fds ? fds : &none)->reader()), host);
}

}  // namespace

TEST(MakePlan, ProcKnowsWhetherThePidNamespaceIsOwn)
{
    // bwrap's rule: a new procfs with a new or joined PID namespace, the
    // host's /proc bound otherwise; mount::apply reads the fact.
    for (const auto& host : {user_host(), root_host()}) {
        EXPECT_FALSE(plan_for({"--proc", "/proc", "true"}, host).mounts.own_pid_ns);
        EXPECT_FALSE(plan_for({"--unshare-user", "--proc", "/proc", "true"}, host).mounts.own_pid_ns);
        EXPECT_TRUE(plan_for({"--unshare-pid", "--proc", "/proc", "true"}, host).mounts.own_pid_ns);
        EXPECT_TRUE(plan_for({"--unshare-all", "--proc", "/proc", "true"}, host).mounts.own_pid_ns);
    }
    EXPECT_TRUE(plan_for({"--userns", "5", "--pidns", "6", "--proc", "/proc", "true"}, root_host()).mounts.own_pid_ns);
}

TEST(ParseArgs, DataOptionsHaveBwrapsDefaultModes)
{
    Options o = parse_args({"--file", "3", "/f", "--bind-data", "4", "/bd", "--ro-bind-data", "5", "/rbd", "--dir",
                            "/d", "--tmpfs", "/t", "true"});
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

// cocoon's tmpfs bounds (SECURITY.md, "memory the bound does not cover"): --size also sizes
// --dev's shm, the login file's directory and --tmp-overlay's upper layer; each has a default.
TEST(ParseArgs, SizeBoundsShmTheLoginDirAndTheTmpOverlay)
{
    Options defaults = parse_args(
        {"--dev", "/dev", "--login-file", "/c", "/h/c", "--overlay-src", "/l", "--tmp-overlay", "/o", "true"});
    ASSERT_EQ(defaults.mounts.size(), 3u);
    EXPECT_EQ(op<mount::Dev>(defaults, 0).shm_size, mount::kShmSize);
    EXPECT_EQ(op<mount::Tmpfs>(defaults, 1).dest, "/h");
    EXPECT_EQ(op<mount::Tmpfs>(defaults, 1).size, mount::kLoginDirSize);
    EXPECT_EQ(op<mount::Overlay>(defaults, 2).size, 0u);
    Options sized =
        parse_args({"--size", "100", "--dev", "/dev", "--size", "200", "--login-file", "/c", "/h/c", "--size", "300",
                    "--overlay-src", "/l", "--tmp-overlay", "/o", "--tmpfs", "/t", "true"});
    ASSERT_EQ(sized.mounts.size(), 4u);
    EXPECT_EQ(op<mount::Dev>(sized, 0).shm_size, 100u);
    EXPECT_EQ(op<mount::Tmpfs>(sized, 1).size, 200u);
    EXPECT_EQ(op<mount::Overlay>(sized, 2).size, 300u);
    EXPECT_EQ(op<mount::Tmpfs>(sized, 3).size, 0u);
    // An earlier tmpfs at the login file's directory keeps its size; a --size for it is refused.
    EXPECT_EQ(parse_error({"--fresh-home", "/h", "--size", "1", "--login-file", "/c", "/h/c", "true"}),
              "--size before --login-file /c /h/c: /h is a tmpfs given earlier, which keeps its own size");
    Options shared = parse_args({"--size", "5", "--tmpfs", "/h", "--login-file", "/c", "/h/c", "true"});
    ASSERT_EQ(shared.mounts.size(), 1u);
    EXPECT_EQ(op<mount::Tmpfs>(shared, 0).size, 5u);
    // The other overlays have no tmpfs to size: bwrap's words, as for any other option.
    EXPECT_EQ(parse_error({"--size", "1", "--overlay-src", "/l", "--overlay-src", "/m", "--ro-overlay", "/o", "true"}),
              "--size must be followed by --tmpfs");
    EXPECT_EQ(parse_error({"--size", "1", "--proc", "/proc", "true"}), "--size must be followed by --tmpfs");
}

TEST(ParseArgs, PermsAndSizeModifyOnlyTheNextOption)
{
    Options o = parse_args({"--perms", "0700",   "--tmpfs", "/a",      "--tmpfs", "/b",    "--perms", "640", "--file",
                            "3",       "/c/f",   "--size",  "0x10",    "--perms", "0750",  "--tmpfs", "/s",  "--perms",
                            "0711",    "--size", "010",     "--tmpfs", "/u",      "--dir", "/d",      "true"});
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
    EXPECT_EQ(parse_error({"--file", "abc", "/f", "true"}), "Invalid fd: abc");
    EXPECT_EQ(parse_error({"--ro-bind-fd", "-1", "/f", "true"}), "Invalid fd: -1");
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
    for (const char* opt :
         {"--perms OCTAL", "--size BYTES", "--chmod OCTAL PATH", "--file FD DEST", "--bind-data FD DEST",
          "--ro-bind-data FD DEST", "--bind-fd FD DEST", "--ro-bind-fd FD DEST", "--mqueue DEST"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(ParseArgs, ArgsFileIsSplicedWhereItStands)
{
    FakeFds fds{{{3, "--setenv\0A\0from-file\0--chdir\0/usr\0"s}, {4, "--unshare-net"s}}, {}};
    Options o = parse_args(
        {"--setenv", "A", "before", "--args", "3", "--args", "4", "--setenv", "B", "after", "sh", "--args", "5"},
        fds.reader());
    EXPECT_EQ(fds.read, (std::vector<int>{3, 4}));
    ASSERT_EQ(o.env.size(), 3u);
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[0]).value, "before");
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[1]).value, "from-file");  // a later option wins over it
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[2]).name, "B");
    EXPECT_EQ(o.process.chdir, "/usr");
    EXPECT_TRUE(o.unshare_net);  // the last word had no NUL after it
    EXPECT_EQ(o.command, (std::vector<std::string>{"sh", "--args", "5"}));
    // An empty file adds nothing; an --args after "--" is the command's.
    FakeFds empty{{{3, ""}}, {}};
    EXPECT_EQ(parse_args({"--args", "3", "--", "--args", "3"}, empty.reader()).command,
              (std::vector<std::string>{"--args", "3"}));
    EXPECT_EQ(empty.read, std::vector<int>{3});
}

TEST(ParseArgs, ArgsFileErrors)
{
    auto message = [](std::map<int, std::string> contents, std::vector<std::string> args) {
        FakeFds fds{std::move(contents), {}};
        try {
            parse_args(args, fds.reader());
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message({{3, "--args\0004\0"s}, {4, "--unshare-net"s}}, {"--args", "3", "true"}),
              "--args not supported in arguments file");
    EXPECT_EQ(message({{3, "--unshare-net\0sh\0"s}}, {"--args", "3", "true"}),
              "--args 3: only options may come from an arguments file, not 'sh'");
    EXPECT_EQ(message({{3, "--\0--unshare-net\0"s}}, {"--args", "3", "true"}),
              "--args 3: only options may come from an arguments file, not '--'");
    EXPECT_EQ(message({{3, "--unshare-net\0\0"s}}, {"--args", "3", "true"}),
              "--args 3: only options may come from an arguments file, not ''");
    // An option's arguments must be in the same file.
    EXPECT_EQ(message({{3, "--setenv\0A\0"s}}, {"--args", "3", "B", "true"}), "--setenv takes 2 arguments");
    EXPECT_EQ(message({{3, "--frob\0"s}}, {"--args", "3", "true"}), "Unknown option --frob");
    EXPECT_EQ(message({}, {"--args", "9", "true"}), "Can't read --args data from fd 9: Bad file descriptor");
    EXPECT_EQ(message({}, {"--args", "x", "true"}), "Invalid fd: x");
    EXPECT_EQ(message({}, {"--args"}), "--args takes 1 argument");
}

TEST(ParseArgs, FdOptions)
{
    Options o = parse_args({"--sync-fd", "5", "--block-fd", "6", "--userns-block-fd", "7", "--lock-file", "/a",
                            "--lock-file", "b", "true"});
    EXPECT_EQ(o.fds.sync, 5);
    EXPECT_EQ(o.fds.block, 6);
    EXPECT_EQ(o.fds.userns_block, 7);
    EXPECT_EQ(o.process.lock_files, (std::vector<std::string>{"/a", "b"}));
    // bwrap's words for every option that takes an fd, whatever is wrong with it.
    for (const char* option : {"--args", "--file", "--bind-data", "--ro-bind-data", "--bind-fd", "--ro-bind-fd",
                               "--info-fd", "--json-status-fd", "--sync-fd", "--block-fd", "--userns-block-fd",
                               "--userns", "--userns2", "--pidns", "--seccomp", "--add-seccomp-fd"}) {
        const bool two = std::string(option).find("bind") != std::string::npos || std::string(option) == "--file";
        for (const char* bad : {"-1", "3x", "", "2147483648"}) {
            std::vector<std::string> args{option, bad};
            if (two)
                args.push_back("/d");
            args.push_back("true");
            EXPECT_EQ(parse_error(args), std::string("Invalid fd: ") + bad) << option;
        }
    }
    EXPECT_EQ(parse_error({"--uid", "abc", "true"}), "Invalid uid: abc");
    EXPECT_EQ(parse_error({"--gid", "-1", "true"}), "Invalid gid: -1");
}

TEST(ParseArgs, RepeatedSingleValueOptionsWarnAndTheLastCounts)
{
    // bwrap's list of options that hold one value, each given twice.
    const std::vector<std::pair<std::string, std::string>> single = {
        {"--chdir", "/a"},           {"--hostname", "h"},       {"--uid", "5"},      {"--gid", "6"},
        {"--info-fd", "7"},          {"--json-status-fd", "8"}, {"--sync-fd", "9"},  {"--block-fd", "10"},
        {"--userns-block-fd", "11"}, {"--userns", "12"},        {"--userns2", "13"}, {"--pidns", "14"}};
    for (const auto& [option, value] : single) {
        Options o = parse_args({option, "1", option, value, "true"});
        EXPECT_EQ(o.warnings, std::vector<std::string>{"Only the last " + option + " option will take effect"})
            << option;
        Options once = parse_args({option, value, "true"});
        EXPECT_TRUE(once.warnings.empty()) << option;
    }
    Options o = parse_args({"--chdir", "/a", "--uid", "1", "--chdir", "/b", "--uid", "2", "--chdir", "/c", "true"});
    EXPECT_EQ(o.process.chdir, "/c");
    EXPECT_EQ(o.uid, 2u);
    EXPECT_EQ(o.warnings, (std::vector<std::string>{"Only the last --chdir option will take effect",
                                                    "Only the last --uid option will take effect",
                                                    "Only the last --chdir option will take effect"}));
    // Repeatable options say nothing.
    EXPECT_TRUE(
        parse_args({"--lock-file", "/a", "--lock-file", "/b", "--setenv", "A", "1", "--setenv", "A", "2", "true"})
            .warnings.empty());
}

TEST(ParseArgs, SeccompRules)
{
    const std::string one = std::string(8, '\0');
    FakeFds fds{{{5, one}, {6, one + one}, {7, one}}, {}};
    Options o = parse_args({"--seccomp", "5", "--seccomp", "6", "true"}, fds.reader());
    // bwrap's rule: the last --seccomp wins, with a warning; the others are not read.
    ASSERT_EQ(o.seccomp.size(), 1u);
    EXPECT_EQ(o.seccomp[0].option, "--seccomp 6");
    EXPECT_EQ(o.seccomp[0].bytes.size(), 16u);
    EXPECT_EQ(fds.read, std::vector<int>{6});
    EXPECT_EQ(o.warnings, std::vector<std::string>{"Only the last --seccomp option will take effect"});

    fds.read.clear();
    Options added = parse_args({"--add-seccomp-fd", "7", "--add-seccomp-fd", "5", "true"}, fds.reader());
    ASSERT_EQ(added.seccomp.size(), 2u);
    EXPECT_EQ(added.seccomp[0].option, "--add-seccomp-fd 7");
    EXPECT_EQ(fds.read, (std::vector<int>{7, 5}));
    EXPECT_TRUE(added.warnings.empty());
    EXPECT_EQ(tools::make_launch_plan(added, user_host()).seccomp.size(), 2u);

    try {
        parse_args({"--seccomp", "5", "--add-seccomp-fd", "6", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--add-seccomp-fd cannot be combined with --seccomp");
    }
    try {
        parse_args({"--add-seccomp-fd", "5", "--seccomp", "6", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--seccomp cannot be combined with --add-seccomp-fd");
    }
    // bwrap's words, then which option named the fd.
    try {
        parse_args({"--seccomp", "9", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "Can't read seccomp data: Bad file descriptor (--seccomp 9)");
    }
    try {
        parse_args({"--add-seccomp-fd", "5", "--add-seccomp-fd", "9", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "Can't read seccomp data: Bad file descriptor (--add-seccomp-fd 9)");
    }
}

// bwrap's order: each program is read and checked for whole instructions before the next is read,
// and all of them before cocoon's own check for an empty one.
TEST(ParseArgs, SeccompDataIsCheckedInBwrapsOrder)
{
    FakeFds fds{{{5, ""}, {6, "x"}, {7, std::string(9, 'x')}}, {}};
    auto refusal = [&](const std::vector<std::string>& args) {
        fds.read.clear();
        try {
            tools::make_launch_plan(parse_args(args, fds.reader()), user_host());
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // The first empty, the second one byte long: refused for the second's size.
    EXPECT_EQ(refusal({"--add-seccomp-fd", "5", "--add-seccomp-fd", "6", "true"}),
              "Invalid seccomp data, must be multiple of 8 (--add-seccomp-fd 6: 1 bytes)");
    // A ragged program is refused before a later fd is read.
    EXPECT_EQ(refusal({"--add-seccomp-fd", "7", "--add-seccomp-fd", "9", "true"}),
              "Invalid seccomp data, must be multiple of 8 (--add-seccomp-fd 7: 9 bytes)");
    EXPECT_EQ(fds.read, std::vector<int>{7});
    // Empty alone: cocoon's own check, at planning.
    EXPECT_EQ(
        refusal({"--add-seccomp-fd", "5", "true"}).rfind("Invalid seccomp data from --add-seccomp-fd 5: 0 bytes", 0),
        0u);
}

TEST(MakePlan, SeccompProgramSize)
{
    auto size_ok = [](size_t bytes) {
        try {
            return tools::seccomp_program(tools::SeccompInput{"--seccomp 5", 5, std::string(bytes, 'x')}).size() ==
                   bytes / 8;
        } catch (const UsageError& e) {
            // bwrap's check, and its words, come first: a ragged size is
            // reported as such, an empty program only by cocoon's own check.
            const std::string want =
                bytes % 8 != 0
                    ? "Invalid seccomp data, must be multiple of 8 (--seccomp 5: " + std::to_string(bytes) + " bytes)"
                    : "Invalid seccomp data from --seccomp 5: ";
            EXPECT_EQ(std::string(e.what()).rfind(want, 0), 0u) << e.what();
            return false;
        }
    };
    EXPECT_TRUE(size_ok(8));
    EXPECT_TRUE(size_ok(4096 * 8));
    EXPECT_FALSE(size_ok(0));
    EXPECT_FALSE(size_ok(3));
    EXPECT_FALSE(size_ok(12));
    EXPECT_FALSE(size_ok(4097 * 8 + 1));
    EXPECT_FALSE(size_ok(4097 * 8));
    // The instructions keep their bytes.
    std::string bytes = "\x06\x00\x00\x00\x00\x00\xff\x7f"s;  // BPF_RET|BPF_K, SECCOMP_RET_ALLOW
    auto program = tools::seccomp_program(tools::SeccompInput{"--seccomp 5", 5, bytes});
    ASSERT_EQ(program.size(), 1u);
    EXPECT_EQ(program[0].code, 6);
    EXPECT_EQ(program[0].k, 0x7fff0000u);
}

TEST(MakePlan, FdOptionRules)
{
    auto error = [](std::vector<std::string> args, const tools::HostFacts& host) {
        try {
            plan_for(args, host);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(error({"--userns-block-fd", "5", "--info-fd", "6", "true"}, root_host()),
              "--userns-block-fd requires --unshare-user");
    EXPECT_EQ(error({"--userns-block-fd", "5", "true"}, user_host()), "--userns-block-fd requires --info-fd");
    EXPECT_EQ(error({"--userns-block-fd", "5", "--info-fd", "6", "--uid", "0", "true"}, user_host()),
              "--userns-block-fd cannot be combined with --uid or --gid (the caller writes the id maps)");
    EXPECT_EQ(error({"--userns-block-fd", "5", "--info-fd", "6", "--gid", "0", "true"}, user_host()),
              "--userns-block-fd cannot be combined with --uid or --gid (the caller writes the id maps)");
    EXPECT_EQ(error({"--unshare-pid", "--as-pid-1", "--lock-file", "/x", "true"}, user_host()),
              "Specifying --as-pid-1 and --lock-file is not permitted");
    EXPECT_EQ(error({"--userns-block-fd", "5", "--info-fd", "6", "true"}, user_host()), "no error");
    EXPECT_EQ(error({"--unshare-user", "--userns-block-fd", "5", "--info-fd", "6", "true"}, root_host()), "no error");

    Options o = parse_args({"--sync-fd", "5", "--block-fd", "6", "--lock-file", "/l", "true"});
    EXPECT_EQ(o.fds.sync, 5);
    EXPECT_EQ(o.fds.block, 6);
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    EXPECT_EQ(p.process.lock_files, std::vector<std::string>{"/l"});
}

TEST(MakePlan, WhoHoldsTheSandboxOpen)
{
    // A reaper runs with a PID namespace, and (bwrap's rule) whenever the sync
    // fd or locks need a holder other than the command.
    EXPECT_FALSE(plan_for({"true"}, user_host()).fork_command);
    EXPECT_TRUE(plan_for({"--unshare-pid", "true"}, user_host()).fork_command);
    EXPECT_FALSE(plan_for({"--unshare-pid", "--as-pid-1", "true"}, user_host()).fork_command);
    EXPECT_TRUE(plan_for({"--sync-fd", "5", "true"}, user_host()).fork_command);
    EXPECT_TRUE(plan_for({"--lock-file", "/l", "true"}, user_host()).fork_command);
    EXPECT_FALSE(plan_for({"--unshare-pid", "--as-pid-1", "--sync-fd", "5", "true"}, user_host()).fork_command);
    EXPECT_FALSE(plan_for({"--block-fd", "5", "true"}, user_host()).fork_command);
}

TEST(ParseArgs, UsernsOptions)
{
    Options none = parse_args({"true"});
    EXPECT_FALSE(none.process.disable_userns);
    EXPECT_FALSE(none.process.assert_userns_disabled);
    Options o = parse_args({"--disable-userns", "--assert-userns-disabled", "true"});
    EXPECT_TRUE(o.process.disable_userns);
    EXPECT_TRUE(o.process.assert_userns_disabled);
    EXPECT_EQ(o.command, std::vector<std::string>{"true"});

    ns::LaunchPlan p = plan_for({"--unshare-user", "--disable-userns", "true"}, user_host());
    EXPECT_TRUE(p.process.disable_userns);
    EXPECT_FALSE(p.process.assert_userns_disabled);
    p = plan_for({"--assert-userns-disabled", "true"}, root_host());
    EXPECT_FALSE(p.process.disable_userns);
    EXPECT_TRUE(p.process.assert_userns_disabled);
}

TEST(MakePlan, DisableUsernsRules)
{
    auto error = [](std::vector<std::string> args, const tools::HostFacts& host) {
        try {
            plan_for(args, host);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    const std::string needs = "--disable-userns requires --unshare-user";
    // bwrap 0.8.0 wants the option itself, even where the namespace is
    // implicit (an unprivileged caller) or asked for with -try/--unshare-all.
    EXPECT_EQ(error({"--disable-userns", "true"}, root_host()), needs);
    EXPECT_EQ(error({"--disable-userns", "true"}, user_host()), needs);
    EXPECT_EQ(error({"--unshare-all", "--disable-userns", "true"}, user_host()), needs);
    EXPECT_EQ(error({"--unshare-user-try", "--disable-userns", "true"}, root_host()), needs);
    EXPECT_EQ(error({"--disable-userns", "--unshare-user", "true"}, root_host()), "no error");
    EXPECT_EQ(error({"--unshare-all", "--unshare-user", "--disable-userns", "true"}, user_host()), "no error");
    EXPECT_EQ(
        error({"--unshare-user", "--disable-userns", "--userns-block-fd", "5", "--info-fd", "6", "true"}, user_host()),
        "--disable-userns is not compatible with  --userns-block-fd");
    // --assert-userns-disabled only looks; it needs nothing.
    EXPECT_EQ(error({"--assert-userns-disabled", "true"}, root_host()), "no error");
}

TEST(ParseArgs, SelinuxLabelsAreRefused)
{
    for (const char* option : {"--exec-label", "--file-label"}) {
        SCOPED_TRACE(option);
        try {
            parse_args({option, "system_u:object_r:container_file_t:s0", "true"});
            FAIL();
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()), std::string("labeling not supported on this system (") + option + ")");
        }
        try {
            parse_args({option});
            FAIL();
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()), std::string(option) + " takes 1 argument");
        }
    }
}

TEST(MakePlan, DevBindsTheCallersTerminalAsConsole)
{
    auto console_of = [](const ns::LaunchPlan& p) {
        std::vector<std::pair<std::string, std::string>> found;
        for (const mount::Op& op : p.mounts.ops)
            if (auto* b = std::get_if<mount::Bind>(&op);
                b && b->dest.size() >= 8 && b->dest.compare(b->dest.size() - 8, 8, "/console") == 0) {
                EXPECT_EQ(b->kind, mount::BindKind::Dev);
                EXPECT_FALSE(b->optional);
                found.emplace_back(b->source, b->dest);
            }
        return found;
    };
    using Found = std::vector<std::pair<std::string, std::string>>;
    tools::HostFacts tty = user_host();
    tty.stdout_tty = "/dev/pts/7";
    EXPECT_EQ(console_of(plan_for({"--dev", "/dev", "true"}, tty)), (Found{{"/dev/pts/7", "/dev/console"}}));
    EXPECT_EQ(console_of(plan_for({"--dev", "/dev", "--dev", "sub/dev", "true"}, tty)),
              (Found{{"/dev/pts/7", "/dev/console"}, {"/dev/pts/7", "/sub/dev/console"}}));
    // No terminal on stdout, or no --dev: no console.
    EXPECT_EQ(console_of(plan_for({"--dev", "/dev", "true"}, user_host())), Found{});
    EXPECT_EQ(console_of(plan_for({"--tmpfs", "/dev", "true"}, tty)), Found{});
}

TEST(CocoonMain, HelpListsTheUsernsAndLabelOptions)
{
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_main({"cocoon", "--help"}), 0);
    std::string help = testing::internal::GetCapturedStdout();
    for (const char* opt :
         {"--disable-userns ", "--assert-userns-disabled ", "--exec-label LABEL", "--file-label LABEL"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(MakePlan, JoinedNamespaces)
{
    auto error = [](std::vector<std::string> args, const tools::HostFacts& host) {
        try {
            plan_for(args, host);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    // bwrap's rules and texts: a joined user namespace replaces the new one.
    for (const auto& host : {user_host(), root_host()}) {
        EXPECT_EQ(error({"--userns", "5", "--unshare-user", "true"}, host), "--userns not compatible --unshare-user");
        EXPECT_EQ(error({"--userns", "5", "--unshare-user-try", "true"}, host),
                  "--userns not compatible --unshare-user-try");
        EXPECT_EQ(error({"--userns", "5", "--unshare-all", "true"}, host),
                  "--userns not compatible --unshare-user-try");
        EXPECT_EQ(error({"--userns", "5", "--userns-block-fd", "6", "--info-fd", "7", "true"}, host),
                  "--userns-block-fd requires --unshare-user");
        EXPECT_EQ(error({"--userns", "5", "--uid", "0", "--gid", "0", "true"}, host), "no error");
        EXPECT_EQ(error({"--pidns", "5", "--unshare-pid", "true"}, host), "no error");
        EXPECT_EQ(error({"--pidns", "5", "--as-pid-1", "true"}, host), "Specifying --as-pid-1 requires --unshare-pid");
    }
    EXPECT_EQ(error({"--uid", "0", "true"}, root_host()), "Specifying --uid requires --unshare-user");

    // An unprivileged caller's implicit user namespace gives way to the joined one.
    ns::LaunchPlan p = plan_for({"--userns", "5", "--unshare-pid", "--unshare-net", "true"}, user_host());
    EXPECT_EQ(p.clone_flags, static_cast<unsigned long long>(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET));
    EXPECT_EQ(parse_args({"--userns", "5", "true"}).fds.userns, 5);
    EXPECT_EQ(parse_args({"--userns", "5", "true"}).fds.pidns, -1);
    EXPECT_FALSE(p.switch_uid);
    EXPECT_EQ(p.caps, 0u);  // unprivileged: nothing unless --cap-add
    EXPECT_EQ(plan_for({"--userns", "5", "--cap-add", "CAP_CHOWN", "true"}, user_host()).caps,
              ns::CapSet{1} << 0);  // CAP_CHOWN is 0

    // --uid/--gid with --userns: switched to inside it, no maps written.
    p = plan_for({"--userns", "5", "--uid", "7", "--gid", "8", "true"}, user_host());
    EXPECT_EQ(p.switch_uid, std::optional<uid_t>(7));
    EXPECT_EQ(p.switch_gid, std::optional<gid_t>(8));
    EXPECT_FALSE(p.clone_flags & CLONE_NEWUSER);
    EXPECT_FALSE(plan_for({"--unshare-user", "--uid", "7", "true"}, user_host()).switch_uid);

    // --pidns with --unshare-pid: a new PID namespace, nested in the joined one.
    p = plan_for({"--pidns", "6", "--unshare-pid", "true"}, root_host());
    EXPECT_EQ(parse_args({"--pidns", "6", "true"}).fds.pidns, 6);
    EXPECT_TRUE(p.clone_flags & CLONE_NEWPID);
    EXPECT_TRUE(p.fork_command);
    p = plan_for({"--pidns", "6", "true"}, root_host());
    EXPECT_FALSE(p.clone_flags & CLONE_NEWPID);
    EXPECT_FALSE(p.fork_command);

    EXPECT_EQ(parse_args({"--userns", "5", "--userns2", "9", "true"}).fds.userns2, 9);
    EXPECT_THROW(parse_args({"--userns", "abc", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--pidns", "-1", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--userns2"}), UsageError);
}

TEST(ParseArgs, Argv0ReplacesOnlyWhatTheCommandSees)
{
    ns::LaunchPlan plan = plan_for({"--argv0", "shown", "--", "prog", "a"}, user_host());
    EXPECT_EQ(plan.argv, (std::vector<std::string>{"prog", "a"}));
    EXPECT_EQ(plan.process.argv0, "shown");
    EXPECT_FALSE(plan_for({"prog"}, user_host()).process.argv0);
    EXPECT_EQ(parse_error({"--argv0", "a", "--argv0", "b", "true"}), "--argv0 used multiple times");
}

TEST(ParseArgs, LevelPrefixIsFoundBeforeTheCommandOnly)
{
    EXPECT_TRUE(parse_args({"--level-prefix", "true"}).level_prefix);
    EXPECT_FALSE(parse_args({"true"}).level_prefix);
    EXPECT_TRUE(tools::level_prefix_requested({"--bind", "/a", "/b", "--level-prefix", "--frobnicate"}));
    // An option's argument, the command's own arguments, and anything past an
    // unknown option are not --level-prefix.
    EXPECT_FALSE(tools::level_prefix_requested({"--setenv", "--level-prefix", "x", "true"}));
    EXPECT_FALSE(tools::level_prefix_requested({"true", "--level-prefix"}));
    EXPECT_FALSE(tools::level_prefix_requested({"--", "--level-prefix"}));
    EXPECT_FALSE(tools::level_prefix_requested({"--frobnicate", "--level-prefix"}));
}

TEST(CocoonMain, LevelPrefixMarksErrorsAndWarnings)
{
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--level-prefix", "--frobnicate"})), testing::ExitedWithCode(1),
                "^<3>cocoon: Unknown option --frobnicate\n$");
    ASSERT_EXIT(std::exit(run_main({"bwrap", "--level-prefix", "--unshare-net"})), testing::ExitedWithCode(1),
                "^<3>bwrap: No command specified");
    // A warning, then an error from after parsing (an empty program): both marked.
    auto warn_then_fail = [] {
        const std::string fd = std::to_string(::open("/dev/null", O_RDONLY));
        std::exit(run_main({"cocoon", "--seccomp", fd, "--level-prefix", "--seccomp", fd, "true"}));
    };
    ASSERT_EXIT(warn_then_fail(), testing::ExitedWithCode(1),
                "^<4>cocoon: Only the last --seccomp option will take effect\n<3>cocoon: Invalid seccomp data");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--frobnicate", "--level-prefix"})), testing::ExitedWithCode(1),
                "^cocoon: Unknown option");
}

TEST(ParseArgs, OverlaysTakeThePendingSources)
{
    Options o = parse_args({"--overlay-src", "/l1", "--overlay-src", "l2", "--overlay", "/up", "/work", "/a",
                            "--overlay-src", "/l3", "--tmp-overlay", "/b", "--overlay-src", "/l4", "--overlay-src",
                            "/l5", "--ro-overlay", "c", "true"});
    ASSERT_EQ(o.mounts.size(), 3u);
    const auto& rw = op<mount::Overlay>(o, 0);
    EXPECT_EQ(rw.kind, mount::OverlayKind::ReadWrite);
    EXPECT_EQ(rw.sources, (std::vector<std::string>{"/l1", "l2"}));
    EXPECT_EQ(rw.upper, "/up");
    EXPECT_EQ(rw.work, "/work");
    EXPECT_EQ(rw.dest, "/a");
    const auto& tmp = op<mount::Overlay>(o, 1);
    EXPECT_EQ(tmp.kind, mount::OverlayKind::Tmp);
    EXPECT_EQ(tmp.sources, (std::vector<std::string>{"/l3"}));
    EXPECT_EQ(tmp.upper, "");
    EXPECT_EQ(tmp.dest, "/b");
    const auto& ro = op<mount::Overlay>(o, 2);
    EXPECT_EQ(ro.kind, mount::OverlayKind::ReadOnly);
    EXPECT_EQ(ro.sources, (std::vector<std::string>{"/l4", "/l5"}));
    EXPECT_TRUE(o.next_overlay_srcs.empty());
    // The destination is normalised like any other.
    EXPECT_EQ(std::get<mount::Overlay>(
                  plan_for({"--overlay-src", "/l", "--tmp-overlay", "b//c/", "true"}, user_host()).mounts.ops.at(0))
                  .dest,
              "/b/c");
}

TEST(ParseArgs, OverlayMisuseUsesBwrapsMessages)
{
    const std::string dangling =
        "--overlay-src must be followed by another --overlay-src or one of --overlay, --tmp-overlay, or --ro-overlay";
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "true"}), dangling);
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "--chdir", "/", "true"}), dangling);
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "--perms", "0700", "--tmp-overlay", "/t", "true"}), dangling);
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "--", "true"}), dangling);
    auto plan_error = [](std::vector<std::string> args) {
        try {
            plan_for(args, user_host());
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(plan_error({"--tmp-overlay", "/t", "true"}), "--tmp-overlay requires at least one --overlay-src");
    EXPECT_EQ(plan_error({"--overlay", "/u", "/w", "/t", "true"}), "--overlay requires at least one --overlay-src");
    EXPECT_EQ(plan_error({"--ro-overlay", "/t", "true"}), "--ro-overlay requires at least two --overlay-src");
    EXPECT_EQ(plan_error({"--overlay-src", "/l", "--ro-overlay", "/t", "true"}),
              "--ro-overlay requires at least two --overlay-src");
    EXPECT_EQ(plan_error({"--overlay-src", "/l", "--tmp-overlay", "/t", "true"}), "");
}

TEST(MakePlan, NoFollowSourcesReachesTheMountPlan)
{
    EXPECT_FALSE(
        tools::make_launch_plan(parse_args({"--bind", "/a", "/a", "true"}), user_host()).mounts.no_follow_sources);
    auto plan = tools::make_launch_plan(parse_args({"--bind", "/a", "/a", "--no-follow-sources", "true"}), user_host());
    EXPECT_TRUE(plan.mounts.no_follow_sources);
}

TEST(MakePlan, FreshHomeIsAPrivateTmpfsAndHome)
{
    auto plan = tools::make_launch_plan(parse_args({"--fresh-home", "/home/a", "true"}), user_host());
    const mount::Tmpfs* home = nullptr;
    for (const mount::Op& op : plan.mounts.ops)
        if (auto* t = std::get_if<mount::Tmpfs>(&op); t && t->dest == "/home/a")
            home = t;
    ASSERT_TRUE(home);
    EXPECT_TRUE(home->fresh_home);
    EXPECT_EQ(home->mode, 0700u);
    EXPECT_FALSE(home->uid);  // the setup process has the command's ids
    EXPECT_NE(std::find(plan.env.begin(), plan.env.end(), "HOME=/home/a"), plan.env.end());
    // --uid inside a joined user namespace: the command switches ids, so the
    // tmpfs is made with them.
    plan = tools::make_launch_plan(
        parse_args({"--userns", "5", "--uid", "7", "--gid", "8", "--fresh-home", "/h", "true"}), user_host());
    for (const mount::Op& op : plan.mounts.ops)
        if (auto* t = std::get_if<mount::Tmpfs>(&op); t && t->dest == "/h") {
            EXPECT_EQ(t->uid, std::optional<uid_t>(7));
            EXPECT_EQ(t->gid, std::optional<gid_t>(8));
        }
}
