// End-to-end checks of the namespaces around the command: identity, PID and
// network namespaces, what of the host stays unreachable, and exit codes.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace cocoon::test {
namespace {

std::vector<std::string> numeric_entries(const std::string& ls_output)
{
    std::vector<std::string> out;
    for (const std::string& name : lines(ls_output))
        if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
            out.push_back(name);
    return out;
}

TEST(Identity, UidAndGidFromOptions)
{
    Result r = in_sandbox({"--unshare-user", "--uid", "1234", "--gid", "5678"}, sh("id -u; id -g"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "1234\n5678\n");
}

TEST(Identity, CallerIdsByDefault)
{
    const std::string expected = std::to_string(::getuid()) + "\n" + std::to_string(::getgid()) + "\n";

    Result plain = in_sandbox({}, sh("id -u; id -g"));
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(plain.out, expected);

    Result user_ns = in_sandbox({"--unshare-user"}, sh("id -u; id -g"));
    ASSERT_EQ(user_ns.code, 0) << user_ns.err;
    EXPECT_EQ(user_ns.out, expected);
}

TEST(PidNamespace, Pid1IsCocoonsReaper)
{
    Result r = in_sandbox({"--unshare-pid", "--proc", "/proc"}, {"cat", "/proc/1/cmdline"});
    ASSERT_EQ(r.code, 0) << r.err;
    // The reaper is a fork of cocoon, so it still carries cocoon's argv.
    const std::string argv0 = cocoon_bin() + '\0';
    EXPECT_EQ(r.out.substr(0, argv0.size()), argv0) << r.out;
    EXPECT_NE(r.out, read_file("/proc/1/cmdline"));
}

TEST(PidNamespace, OnlySandboxProcessesAreVisible)
{
    Result r = in_sandbox({"--unshare-pid", "--proc", "/proc"}, {"ls", "/proc"});
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> pids = numeric_entries(r.out);
    // The reaper (1) and ls itself; a few more would still be sandbox processes.
    EXPECT_GE(pids.size(), 2u) << r.out;
    EXPECT_LE(pids.size(), 4u) << r.out;
    EXPECT_NE(std::find(pids.begin(), pids.end(), "1"), pids.end()) << r.out;
    for (const std::string& pid : pids)
        EXPECT_LE(std::stoi(pid), 4) << "host-numbered process visible: " << pid;
    for (pid_t host_pid : {::getpid(), ::getppid()})
        EXPECT_EQ(std::find(pids.begin(), pids.end(), std::to_string(host_pid)), pids.end()) << host_pid;
}

TEST(NetNamespace, OnlyLoopback)
{
    // An unprivileged caller can mount procfs only for a PID namespace it owns.
    Result r = in_sandbox({"--unshare-net", "--unshare-pid", "--proc", "/proc"}, {"cat", "/proc/net/dev"});
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> l = lines(r.out);
    ASSERT_GE(l.size(), 2u) << r.out;  // two header lines
    std::vector<std::string> interfaces;
    for (size_t i = 2; i < l.size(); ++i) {
        std::string name = l[i].substr(0, l[i].find(':'));
        name.erase(0, name.find_first_not_of(' '));
        interfaces.push_back(name);
    }
    EXPECT_EQ(interfaces, std::vector<std::string>{"lo"}) << r.out;
}

// As with bwrap, lo is up: 127.0.0.1 and ::1 exist (if_inet6 lists an address
// only on an interface that is up).
TEST(NetNamespace, LoopbackIsUp)
{
    Result r = in_sandbox({"--unshare-net", "--unshare-pid", "--proc", "/proc"},
                          {"cat", "/proc/net/if_inet6", "/proc/net/fib_trie"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "00000000000000000000000000000001 01 80 10 80       lo")) << r.out;
    EXPECT_TRUE(contains(r.out, "/32 host LOCAL")) << r.out;
    EXPECT_TRUE(contains(r.out, "127.0.0.1")) << r.out;
}

TEST(Isolation, HostFileOutsideTheBindsIsUnreachable)
{
    TempDir host;
    const std::string secret = host / "secret";
    write_file(secret, "cocoon-e2e-secret\n");
    ::mkdir((host / "sub").c_str(), 0755);

    Result cat = in_sandbox({}, {"cat", secret});
    EXPECT_NE(cat.code, 0);
    EXPECT_TRUE(contains(cat.err, "No such file")) << cat.err;
    EXPECT_EQ(cat.out, "");

    Result ls = in_sandbox({}, {"ls", "/"});
    ASSERT_EQ(ls.code, 0) << ls.err;
    EXPECT_EQ(line_set(ls.out), (std::set<std::string>{"bin", "lib", "lib64", "sbin", "usr"}));

    // ".." from a bound directory is the sandbox's parent, not the host's.
    Result up = in_sandbox({"--bind", host / "sub", "/data"}, sh("cat /data/../secret; ls -a /data/.."));
    EXPECT_FALSE(contains(up.out, "cocoon-e2e-secret")) << up.out;
    EXPECT_FALSE(contains(up.out, "secret")) << up.out;
    EXPECT_TRUE(contains(up.out, "data")) << up.out;  // positive control: it listed the sandbox root
}

TEST(Isolation, ProcDoesNotLeadBackToTheHostRoot)
{
    TempDir host;
    const std::string secret = host / "secret";
    write_file(secret, "cocoon-e2e-secret\n");
    const std::vector<std::string> pass_secret = {"--setenv", "SECRET", secret};
    const std::string probe = "for r in /proc/self/root /proc/1/root /proc/$PPID/root /proc/[0-9]*/root; do "
                              "cat \"$r$SECRET\" && echo LEAK; ls \"$r/\"; done; exit 0";

    // A new procfs: every process it shows lives in the sandbox's root.
    Result own = in_sandbox(args({pass_secret, {"--unshare-pid", "--proc", "/proc"}}), sh(probe));
    EXPECT_FALSE(contains(own.out, "cocoon-e2e-secret")) << own.out;
    EXPECT_FALSE(contains(own.out, "LEAK")) << own.out;
    EXPECT_TRUE(contains(own.out, "usr")) << own.out;  // positive control: the roots were listed

    // The host's procfs: host init and the monitor are there, but their roots
    // are out of reach for a command without capabilities.
    const std::string host_probe = "for r in /proc/1/root /proc/$PPID/root; do cat \"$r$SECRET\" && echo LEAK; done";
    Result host_proc = in_sandbox(args({no_caps(), pass_secret, {"--ro-bind", "/proc", "/proc"}}), sh(host_probe));
    EXPECT_FALSE(contains(host_proc.out, "cocoon-e2e-secret")) << host_proc.out;
    EXPECT_FALSE(contains(host_proc.out, "LEAK")) << host_proc.out;
    EXPECT_TRUE(contains(host_proc.err, secret)) << host_proc.err;  // cat did try
}

void expect_exit_codes(const std::vector<std::string>& options)
{
    struct Case {
        const char* script;
        int code;
    };
    for (const Case& c : {Case{"exit 0", 0}, Case{"exit 42", 42}, Case{"kill -9 $$", 137}}) {
        SCOPED_TRACE(c.script);
        Result r = in_sandbox(options, sh(c.script));
        EXPECT_EQ(r.code, c.code) << r.err;
    }
}

TEST(ExitCode, CommandStatusWithoutPidNamespace)
{
    expect_exit_codes({});
}

TEST(ExitCode, CommandStatusWithPidNamespace)
{
    expect_exit_codes({"--unshare-pid"});
}

}  // namespace
}  // namespace cocoon::test

// cocoon keeps its set-up chain on one CPU for speed, and sends the first process to another
// where the monitor works beside it (the sandbox's cgroup looked up and made); the command and
// PID 1 must get the caller's CPU affinity back.
TEST(Scheduling, CommandKeepsTheCallersCpuAffinity)
{
    using namespace cocoon::test;
    std::string mine = status_field(read_file("/proc/self/status"), "Cpus_allowed_list");
    ASSERT_FALSE(mine.empty());
    for (const std::vector<std::string>& mode : std::vector<std::vector<std::string>>{
             {"--unshare-pid", "--proc", "/proc"}, {"--unshare-pid", "--unshare-net", "--proc", "/proc"}}) {
        Result r = in_sandbox(
            mode, sh(std::string(kAwaitPid1Settled) + "grep Cpus_allowed_list /proc/self/status /proc/1/status"));
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "/proc/self/status:Cpus_allowed_list:\t" + mine + "\n/proc/1/status:Cpus_allowed_list:\t" +
                             mine + "\n")
            << mode.size();
    }
}
