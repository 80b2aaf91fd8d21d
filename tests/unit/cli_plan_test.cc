// Unit tests of plan building (tools/cocoon/plan.cc): the launch plan make_launch_plan makes of options and host facts.
#include <fcntl.h>
#include <sched.h>

#include <algorithm>

#include "tests/unit/cli_support.h"

using namespace cocoon;
using namespace cocoon::cli_test;
using namespace std::string_literals;

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
            const std::string said = std::string(e.what()) + (e.detail().empty() ? "" : " (" + e.detail() + ")");
            EXPECT_EQ(said.rfind(want, 0), 0u) << said;
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
