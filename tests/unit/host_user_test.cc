// Unit tests of --host-user: resolving USER[:GROUP] (tools/cocoon/passwd.cc) and the planner's rules
// for it (tools/cocoon/plan.cc).
#include <gtest/gtest.h>
#include <sched.h>

#include <string>

#include "base/sys_error.h"
#include "tools/cocoon/passwd.h"
#include "tools/cocoon/options.h"
#include "tools/cocoon/plan.h"

using namespace cocoon;
using tools::HostIds;
using tools::resolve_host_user;

namespace {

const std::string kPasswd = "root:x:0:0:root:/root:/bin/bash\n"
                            "# a comment\n"
                            "+nisuser::::::\n"
                            "toor:x:0:0:root again:/root:/bin/sh\n"
                            "agent:x:1500:1600:the agent:/home/agent:/bin/sh\n"
                            "wheelie:x:1700:0::/home/wheelie:/bin/sh\n"
                            "broken:x:notanumber:1:::\n"
                            "agent:x:1501:1601:a second entry, never used:/:/bin/sh\n"
                            "last:x:1800:1801::/:/bin/sh";  // no final newline
const std::string kGroup = "root:x:0:\n"
                           "agents:x:1600:agent\n"
                           "builders:x:1650:\n";

HostIds resolve(const std::string& spec)
{
    return resolve_host_user(spec, kPasswd, kGroup);
}

std::string refusal(const std::string& spec)
{
    try {
        resolve(spec);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(accepted)";
}

}  // namespace

TEST(HostUser, ANameIsItsFirstEntryWithItsPrimaryGroup)
{
    HostIds ids = resolve("agent");
    EXPECT_EQ(ids.uid, 1500u);
    EXPECT_EQ(ids.gid, 1600u);
    EXPECT_EQ(resolve("last").uid, 1800u);
    EXPECT_EQ(resolve("last").gid, 1801u);
}

TEST(HostUser, AGroupByNameOrNumber)
{
    EXPECT_EQ(resolve("agent:builders").gid, 1650u);
    EXPECT_EQ(resolve("agent:1650").gid, 1650u);
    EXPECT_EQ(resolve("agent:4242").gid, 4242u);
    EXPECT_EQ(resolve("agent:builders").uid, 1500u);
}

TEST(HostUser, NumbersAreTakenAsIs)
{
    EXPECT_EQ(resolve("1500").uid, 1500u);
    EXPECT_EQ(resolve("1500").gid, 1600u);  // its passwd entry's group
    EXPECT_EQ(resolve("4000:4001").uid, 4000u);
    EXPECT_EQ(resolve("4000:4001").gid, 4001u);
}

TEST(HostUser, RefusalsNameTheOption)
{
    for (const char* spec : {"nobody-here", "agent:nogroup", "4000", "", ":1600", "agent:", "nisuser", "broken"})
        EXPECT_EQ(refusal(spec).rfind("--host-user", 0), 0u) << spec << ": " << refusal(spec);
    EXPECT_NE(refusal("nobody-here").find("no user nobody-here in /etc/passwd"), std::string::npos);
    EXPECT_NE(refusal("agent:nogroup").find("no group nogroup in /etc/group"), std::string::npos);
    EXPECT_NE(refusal("4000").find("USER:GROUP"), std::string::npos);
}

TEST(HostUser, RootsIdsAreRefused)
{
    for (const char* spec : {"root", "0", "toor", "0:1600", "root:agents"})
        EXPECT_NE(refusal(spec).find("uid 0"), std::string::npos) << spec << ": " << refusal(spec);
    for (const char* spec : {"wheelie", "agent:root", "agent:0", "1500:0"})
        EXPECT_NE(refusal(spec).find("gid 0"), std::string::npos) << spec << ": " << refusal(spec);
    EXPECT_EQ(resolve("wheelie:agents").gid, 1600u);
    // (uid_t)-1 means "unchanged" to the kernel's set*id calls: never an id.
    EXPECT_NE(refusal("4294967295:1").find("no user 4294967295"), std::string::npos) << refusal("4294967295:1");
}

namespace {

tools::HostFacts host(uid_t uid)
{
    tools::HostFacts h;
    h.uid = h.gid = uid;
    h.environ = {"PATH=/usr/bin"};
    h.cwd = "/";
    h.passwd = kPasswd;
    h.group = kGroup;
    return h;
}

ns::LaunchPlan plan(std::vector<std::string> args, uid_t caller = 0)
{
    args.push_back("true");
    return tools::make_launch_plan(tools::parse_args(args), host(caller));
}

std::string plan_refusal(std::vector<std::string> args, uid_t caller = 0)
{
    try {
        plan(std::move(args), caller);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(accepted)";
}

}  // namespace

TEST(HostUserPlan, MapsTheSandboxsIdsToTheUser)
{
    ns::LaunchPlan p = plan({"--host-user", "agent"});
    EXPECT_TRUE(p.host_user);
    EXPECT_EQ(p.real_uid, 1500u);
    EXPECT_EQ(p.real_gid, 1600u);
    // The ids inside are as without the option: root's 0, or --uid/--gid.
    EXPECT_EQ(p.uid, 0u);
    EXPECT_EQ(p.gid, 0u);
    EXPECT_TRUE(p.clone_flags & CLONE_NEWUSER) << "a root caller's user namespace is implied";
    p = plan({"--unshare-user", "--uid", "1000", "--gid", "1000", "--host-user", "agent:builders"});
    EXPECT_EQ(p.uid, 1000u);
    EXPECT_EQ(p.real_uid, 1500u);
    EXPECT_EQ(p.real_gid, 1650u);
    EXPECT_FALSE(plan({"--unshare-user"}).host_user);
    EXPECT_EQ(plan({"--unshare-user"}).real_uid, 0u);
}

TEST(HostUserPlan, OnlyForARootCallerThatLetsCocoonWriteTheMaps)
{
    EXPECT_EQ(plan_refusal({"--host-user", "agent"}, 1000),
              "--host-user needs a root caller: this is uid 1000, whose sandbox acts on the host as uid 1000 already");
    EXPECT_EQ(plan_refusal({"--host-user", "agent", "--userns", "5"})
                  .rfind("--host-user cannot be combined with "
                         "--userns ",
                         0),
              0u);
    EXPECT_EQ(plan_refusal({"--host-user", "agent", "--info-fd", "3", "--userns-block-fd", "4"})
                  .rfind("--host-user cannot be combined with --userns-block-fd", 0),
              0u);
    EXPECT_EQ(plan_refusal({"--host-user", "root"}).rfind("--host-user root: that is uid 0", 0), 0u);
}

TEST(HostUserPlan, TheLastOneGivenCounts)
{
    tools::Options o = tools::parse_args({"--host-user", "root", "--host-user", "agent", "true"});
    EXPECT_EQ(o.host_user, "agent");
    ASSERT_EQ(o.warnings.size(), 1u);
    EXPECT_EQ(o.warnings[0], "Only the last --host-user option will take effect");
}
