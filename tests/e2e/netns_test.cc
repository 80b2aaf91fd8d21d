// The sandbox's network and IPC namespaces, as the clone makes them, or beside set-up in a run with
// neither a relay nor a report (the network namespace by the monitor's helper, the IPC namespace by
// the first process): the network namespace is the sandbox's own (not the host's), owned by the
// sandbox's user namespace (so that capabilities the command is given reach it), with lo up; the
// IPC namespace is the sandbox's own, owned alike, where one is asked for, and the host's where none
// is; a queue made through --mqueue's mount is the command's (MqueueMountIsTheSandboxs); a namespace
// report names the namespaces the command runs in; and a namespace that cannot be made is said. As
// root (with and without a user namespace, and --cap-drop ALL) and unprivileged.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/e2e/no_openat2.h"
#include "tests/support/process.h"

namespace cocoon::test {
namespace {

std::string netns_probe()
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
std::vector<std::vector<std::string>> netns_modes()
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
    // --unshare-net alone asks for no IPC namespace: none is made.
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
    return cocoon(args({mode, {"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", netns_probe(), "netns"}}));
}

TEST(SandboxNetns, TheSandboxsOwnWithLoUp)
{
    for (const auto& mode : netns_modes())
        expect_own_netns(run_probe(mode), spaced(mode));
}

// mqueue's mount belongs to the IPC namespace of the process that makes it: the sandbox's, so that
// a queue made through the mount is the command's own (and unprivileged, the mount is allowed at
// all: the host's IPC namespace is not the sandbox's to mount for).
TEST(SandboxNetns, MqueueMountIsTheSandboxs)
{
    Result r = cocoon(args({{"--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--mqueue",
                             "/dev/mqueue", "sh", "-c"},
                            {"touch /dev/mqueue/cocoon-netns-q && " + netns_probe() + " mq /cocoon-netns-q && " +
                             netns_probe() + " netns"}}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    std::map<std::string, std::string> got = results(r.out);
    EXPECT_EQ(got["mq"], "ok") << r.out;
    EXPECT_NE(got["ipcns"], host_ns("/proc/self/ns/ipc")) << r.out;
    EXPECT_EQ(got["netns_owner"], "own") << r.out;
}

// A run that reports its namespaces (--info-fd, --json-status-fd): the report names the network
// and IPC namespaces the command runs in. The monitor names the network one, from the namespace its
// helper made (ns/launch.cc): where the helper fails and the first process makes the namespace
// itself, as it does under a filter refusing setns, no net-namespace is reported, so this test also
// fails when the helper falls back in a plain run. The IPC namespace of a reporting run is the
// clone's (the first process reports at its start, before it could make one itself).
TEST(SandboxNetns, NamespacesReport)
{
    for (const char* ns : {"net", "ipc"}) {
        const std::string member = std::string(ns) + "-namespace";
        Result r = cocoon(args({{"--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--info-fd", "1"},
                                {"sh", "-c", "stat -L -c '\"" + member + "\": %i' /proc/self/ns/" + std::string(ns)}}));
        ASSERT_EQ(r.code, 0) << r.out << r.err;
        // The report's member, then the command's line: the same number twice.
        const std::string reported = "\"" + member + "\": " + std::to_string(json_number(r.out, member));
        const size_t first = r.out.find(reported);
        ASSERT_NE(first, std::string::npos) << r.out;
        EXPECT_NE(r.out.find(reported, first + reported.size()), std::string::npos) << r.out;
        EXPECT_NE(std::to_string(json_number(r.out, member)), host_ns(("/proc/self/ns/" + std::string(ns)).c_str()));
    }
}

// The network namespace is made beside set-up by a helper of the monitor's (ns/launch.cc,
// make_netns_beside), which holds the monitor's memory and fds in the sandbox's user namespace. It
// is gone, reaped, once the command runs: the monitor's one child then is the sandbox's first
// process (its children are counted on the host while the command sleeps).
TEST(SandboxNetns, NoHelperIsLeftBesideTheCommand)
{
    const std::string line =
        "f=$(mktemp); '" + cocoon_bin() +
        "' --unshare-all --ro-bind / / --proc /proc --dev /dev sh -c 'echo up; sleep 5' > \"$f\" & "
        "n=0; until grep -q up \"$f\" || [ $n -ge 1000 ]; do n=$((n+1)); sleep 0.01; done; "
        "grep -l \"^PPid:.$!\\$\" /proc/[0-9]*/status 2>/dev/null | wc -l; kill -KILL $!; wait; rm -f \"$f\"";
    Result r = run({"/bin/sh", "-c", line}, "", 30'000);
    EXPECT_EQ(r.out, "1\n") << "the monitor's children while the command runs: " << r.out << r.err;
}

// Where the monitor's helper cannot join the sandbox's user namespace, or the first process cannot
// join the namespace the helper made (a seccomp filter refuses setns, as a container's profile
// may), the first process makes the namespace itself: the sandbox's own, with lo up, all the same.
TEST(SandboxNetns, WithSetnsRefusedTheFirstProcessMakesIt)
{
    for (const auto& mode : netns_modes()) {
        Result r = under_refusal(SCMP_SYS(setns), EPERM, [&] { return run_probe(mode); });
        expect_own_netns(r, spaced(mode) + " (setns refused)");
    }
}

// Where the network or the IPC namespace cannot be made (none left to the caller's user namespace:
// max_net_namespaces or max_ipc_namespaces 0 in an outer one), the run ends with one line that says
// so, exit status 1, and leaves no process behind. Both are made beside set-up in such a run (the
// network namespace by the monitor's helper, else by the first process; the IPC namespace by the
// first process), and the line is the clone's.
TEST(SandboxNetns, ANamespaceRefusedIsSaid)
{
    for (const char* ns : {"net", "ipc"}) {
        const std::string line = "echo 0 > /proc/sys/user/max_" + std::string(ns) + "_namespaces || exit 99; '" +
                                 cocoon_bin() +
                                 "' --unshare-all --ro-bind / / --proc /proc --dev /dev true; echo \"code $?\"; "
                                 "ps -e -o comm= | grep -c '^cocoon' || true";
        Result r =
            run({"/usr/bin/unshare", "-Ur", "--fork", "--pid", "--mount-proc", "/bin/sh", "-c", line}, "", 30'000);
        ASSERT_NE(r.code, 99) << ns << ": can't set its limit in a user namespace of the test's: " << r.err;
        EXPECT_EQ(r.out, "code 1\n0\n") << ns << ": " << r.out << r.err;
        const std::vector<std::string> err = lines(r.err);
        ASSERT_EQ(err.size(), 1u) << ns << ": " << r.err;
        EXPECT_TRUE(contains(err[0], "Creating new namespace failed")) << r.err;  // the clone's, and bwrap's, words
        EXPECT_TRUE(contains(err[0], "No space left on device")) << r.err;
    }
}

}  // namespace
}  // namespace cocoon::test
