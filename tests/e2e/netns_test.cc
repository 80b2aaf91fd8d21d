// The sandbox's network namespace where the monitor's helper makes it beside set-up (ns/launch.cc,
// start_netns_maker) and the first process joins it after its mounts: it is the sandbox's own
// (not the host's), its owner is the sandbox's user namespace (as the clone's was, so that
// capabilities the command is given reach it), lo is up; and the same where the helper cannot
// (setns refused by a seccomp filter the caller runs under), where the first process makes it
// itself. A run that reports its namespaces keeps the clone's way (NamespacesReport below). The
// IPC namespace, made by the same helper where one is asked for: the sandbox's own, owned alike;
// the host's where none is asked for; and made by the clone for --mqueue, whose mount belongs to
// the IPC namespace its maker is in (MqueueMountIsTheSandboxs). As root (with and without a user
// namespace, and --cap-drop ALL) and unprivileged.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <seccomp.h>

#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/e2e/no_openat2.h"
#include "tests/support/process.h"

namespace cocoon::test {
namespace {

std::string probe()
{
    return sibling_binary("cocoon_escape_probe");
}

std::string host_ns(const char* path)
{
    struct stat st {};
    return ::stat(path, &st) == 0 ? std::to_string(st.st_ino) : "?";
}

std::string host_netns()
{
    return host_ns("/proc/self/ns/net");
}

// The ways a caller asks for a network namespace: bwrap's --unshare-all (for root without
// --unshare-user, no user namespace where root may make the others itself), with a user namespace
// asked for, and root's --cap-drop ALL.
std::vector<std::vector<std::string>> modes()
{
    std::vector<std::vector<std::string>> out{{"--unshare-all"}, {"--unshare-all", "--unshare-user"}};
    if (is_root()) {
        out.push_back({"--unshare-net"});
        out.push_back({"--unshare-all", "--cap-drop", "ALL"});
    }
    return out;
}

void expect_own_netns(const Result& r, const std::string& mode)
{
    ASSERT_EQ(r.code, 0) << mode << ": " << r.out << r.err;
    std::map<std::string, std::string> got = results(r.out);
    EXPECT_NE(got["netns"], "") << mode << ": " << r.out;
    EXPECT_NE(got["netns"], host_netns()) << mode << ": the host's network namespace";
    EXPECT_EQ(got["netns_owner"], "own") << mode << ": " << r.out;
    EXPECT_EQ(got["lo"], "up") << mode << ": " << r.out;
    // --unshare-net alone asks for no IPC namespace: the helper makes none.
    if (mode.find("--unshare-all") == std::string::npos) {
        EXPECT_EQ(got["ipcns"], host_ns("/proc/self/ns/ipc")) << mode << ": " << r.out;
        return;
    }
    EXPECT_NE(got["ipcns"], "") << mode << ": " << r.out;
    EXPECT_NE(got["ipcns"], host_ns("/proc/self/ns/ipc")) << mode << ": the host's IPC namespace";
    EXPECT_EQ(got["ipcns_owner"], "own") << mode << ": " << r.out;
}

Result run_probe(const std::vector<std::string>& mode)
{
    return cocoon(args({mode, {"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", probe(), "netns"}}));
}

std::string joined(const std::vector<std::string>& words)
{
    std::string out;
    for (const std::string& w : words)
        out += (out.empty() ? "" : " ") + w;
    return out;
}

TEST(NetnsBesideSetup, TheSandboxsOwnWithLoUp)
{
    for (const auto& mode : modes())
        expect_own_netns(run_probe(mode), joined(mode));
}

// setns refused: where the sandbox has a user namespace the helper cannot join it; where it has
// none (root), the first process cannot join the helper's network namespace. Either way the first
// process makes one itself.
TEST(NetnsBesideSetup, MadeByTheFirstProcessWhereSetnsIsRefused)
{
    for (const auto& mode : modes()) {
        Result r = under_refusal(SCMP_SYS(setns), EPERM, [&] { return run_probe(mode); });
        expect_own_netns(r, joined(mode) + " (setns refused)");
    }
}

// --mqueue mounts during set-up, before the helper's namespaces are joined, and mqueue's mount
// belongs to the IPC namespace of the process that makes it: with --mqueue the clone makes the IPC
// namespace, so that a queue made through the mount is the command's own (and unprivileged, the
// mount is allowed at all: the host's IPC namespace is not the sandbox's to mount for).
TEST(NetnsBesideSetup, MqueueMountIsTheSandboxs)
{
    Result r = cocoon(
        args({{"--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--mqueue", "/dev/mqueue",
               "sh", "-c"},
              {"touch /dev/mqueue/cocoon-netns-q && " + probe() + " mq /cocoon-netns-q && " + probe() + " netns"}}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    std::map<std::string, std::string> got = results(r.out);
    EXPECT_EQ(got["mq"], "ok") << r.out;
    EXPECT_NE(got["ipcns"], host_ns("/proc/self/ns/ipc")) << r.out;
    EXPECT_EQ(got["netns_owner"], "own") << r.out;
}

// A run that reports its namespaces (--info-fd, --json-status-fd) reads the network namespace in
// set-up's first step: the clone makes it there, as before, and the report names the one the
// command runs in.
TEST(NetnsBesideSetup, NamespacesReport)
{
    Result r = cocoon(args({{"--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--info-fd", "1"},
                            {"sh", "-c", "stat -L -c '\"net-namespace\": %i' /proc/self/ns/net"}}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    // The report's member, then the command's line: the same number twice.
    const std::string reported = "\"net-namespace\": " + std::to_string(json_number(r.out, "net-namespace"));
    const size_t first = r.out.find(reported);
    ASSERT_NE(first, std::string::npos) << r.out;
    EXPECT_NE(r.out.find(reported, first + reported.size()), std::string::npos) << r.out;
    EXPECT_NE(std::to_string(json_number(r.out, "net-namespace")), host_netns());
}

}  // namespace
}  // namespace cocoon::test
