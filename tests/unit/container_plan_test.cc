// Inside a container (issue 36): a root caller without CAP_SYS_ADMIN (a container's root) is
// planned as an unprivileged one, gets a user namespace of its own, and is told what else it needs.
#include <linux/capability.h>
#include <sched.h>

#include <gtest/gtest.h>

#include "tests/unit/cli_support.h"

namespace cocoon::cli_test {
namespace {

constexpr ns::CapSet bit(int cap)
{
    return ns::CapSet{1} << cap;
}

// Docker's default set for a container's root (no CAP_SYS_ADMIN).
constexpr ns::CapSet kDocker = bit(CAP_CHOWN) | bit(CAP_DAC_OVERRIDE) | bit(CAP_FOWNER) | bit(CAP_FSETID) |
                               bit(CAP_KILL) | bit(CAP_SETGID) | bit(CAP_SETUID) | bit(CAP_SETPCAP) |
                               bit(CAP_NET_BIND_SERVICE) | bit(CAP_NET_RAW) | bit(CAP_SYS_CHROOT) | bit(CAP_MKNOD) |
                               bit(CAP_AUDIT_WRITE) | bit(CAP_SETFCAP);

tools::HostFacts container_root(ns::CapSet caps = kDocker)
{
    tools::HostFacts h = root_host();
    h.permitted_caps = h.effective_caps = caps;
    return h;
}

std::string plan_error(std::vector<std::string> args, const tools::HostFacts& host)
{
    try {
        tools::make_launch_plan(parse_args(args), host);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

TEST(ContainerRootPlan, GetsAUserNamespaceWithoutAsking)
{
    const ns::LaunchPlan p = tools::make_launch_plan(parse_args({"--unshare-pid", "true"}), container_root());
    EXPECT_EQ(p.clone_flags, static_cast<unsigned long long>(CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID));
    EXPECT_EQ(p.uid, 0u);
    EXPECT_EQ(p.real_uid, 0u);
    EXPECT_FALSE(p.host_user);
    // As an unprivileged caller's: no capability unless --cap-add, with --unshare-user too.
    EXPECT_EQ(p.caps, 0u);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"--unshare-user", "true"}), container_root()).caps, 0u);
    EXPECT_EQ(tools::make_launch_plan(parse_args({"--cap-add", "CAP_NET_ADMIN", "true"}), container_root()).caps,
              bit(CAP_NET_ADMIN));
    // CAP_SYS_ADMIN in the bounding set but not the effective set counts as without it.
    tools::HostFacts bounded = container_root();
    bounded.permitted_caps = ns::kAllCaps;
    EXPECT_TRUE(tools::make_launch_plan(parse_args({"true"}), bounded).clone_flags & CLONE_NEWUSER);
}

TEST(ContainerRootPlan, RootWithSysAdminIsAsBefore)
{
    tools::HostFacts h = container_root(kDocker | bit(CAP_SYS_ADMIN));
    const ns::LaunchPlan p = tools::make_launch_plan(parse_args({"--unshare-pid", "true"}), h);
    EXPECT_EQ(p.clone_flags, static_cast<unsigned long long>(CLONE_NEWNS | CLONE_NEWPID));
    EXPECT_EQ(p.caps, kDocker | bit(CAP_SYS_ADMIN));
}

TEST(ContainerRootPlan, MappingUidZeroNeedsSetfcap)
{
    const std::string error = plan_error({"--unshare-pid", "true"}, container_root(kDocker & ~bit(CAP_SETFCAP)));
    EXPECT_EQ(error, "a root caller without CAP_SYS_ADMIN gets a user namespace of its own, and mapping uid 0 into "
                     "it needs CAP_SETFCAP, which this process lacks too: give it CAP_SETFCAP (a container's root "
                     "has it unless its runtime drops it), or run cocoon as another user");
    // --host-user maps another user's ids, not 0: no CAP_SETFCAP needed there.
    tools::HostFacts h = container_root(kDocker & ~bit(CAP_SETFCAP));
    h.passwd = "agent:x:1500:1500::/nonexistent:/usr/sbin/nologin\n";
    h.group = "agent:x:1500:\n";
    EXPECT_EQ(plan_error({"--host-user", "agent", "true"}, h), "");
}

TEST(ContainerRootPlan, HostUserNeedsSetuidAndSetgid)
{
    tools::HostFacts h = container_root();
    h.passwd = "agent:x:1500:1500::/nonexistent:/usr/sbin/nologin\n";
    h.group = "agent:x:1500:\n";
    const ns::LaunchPlan p = tools::make_launch_plan(parse_args({"--host-user", "agent", "true"}), h);
    EXPECT_TRUE(p.host_user);
    EXPECT_EQ(p.real_uid, 1500u);
    EXPECT_EQ(p.caps, 0u);
    h.effective_caps &= ~bit(CAP_SETUID);
    EXPECT_EQ(plan_error({"--host-user", "agent", "true"}, h),
              "--host-user agent needs CAP_SETUID and CAP_SETGID to map that user's ids, and this root caller lacks "
              "them (a container's root has both unless its runtime drops them)");
}

TEST(ContainerRootPlan, AgentStillNeedsHostUser)
{
    // Its uid 0 is still root's on the files it sees.
    tools::Options o = parse_args({"true"});
    o.agent = "generic";
    try {
        tools::make_launch_plan(o, container_root());
        ADD_FAILURE() << "--agent as a container's root without --host-user was planned";
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("--agent generic as root needs --host-user USER", 0), 0u) << e.what();
    }
}

}  // namespace
}  // namespace cocoon::cli_test
