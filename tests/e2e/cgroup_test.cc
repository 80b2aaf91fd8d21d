// The sandbox's cgroup v2 (--cgroup-parent, --memory-max, --pids-max, and the
// caller's own cgroup when it is delegated): made before the clone, the
// sandbox cloned into it, emptied and removed at the end, its figures in the
// report. This host runs the memory and pids controllers on cgroup v1, so the
// limits' success path runs only where cgroup v2 has them (each test below
// takes the branch the host offers and says which); everything else of the
// path runs here: the cgroup, CLONE_INTO_CGROUP, cgroup.kill, cpu.stat, the
// stale-cgroup sweep and the refusals. The unprivileged pass runs inside a
// cgroup that tools/test delegates to the test user (user.delegate=1).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <climits>
#include <cstring>
#include <fstream>
#include <regex>
#include <thread>

#include "ns/monitor/cgroup.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/support/process.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Whether a process is gone (or a zombie nobody has reaped yet), within two seconds.
bool ends(pid_t pid)
{
    for (int i = 0; i < 200; ++i) {
        std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
        if (stat.empty() || stat.find(") Z ") != std::string::npos)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

// A cgroup v2 directory this caller may make cgroups in: for root a new one
// under the cgroup2 mount (removed at the end), for anyone else its own
// cgroup where that was delegated to it.
class Cgroup : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_own = ns::own_cgroup();
        if (m_own.mount.empty())
            GTEST_SKIP() << "cgroup2 is not mounted on this host";
        if (is_root()) {
            static std::atomic<int> serial;
            m_parent = m_own.mount + "/cocoon-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
            ASSERT_EQ(::mkdir(m_parent.c_str(), 0755), 0) << m_parent << ": " << std::strerror(errno);
            m_made = true;
        } else if (m_own.writable) {
            m_parent = m_own.dir;
        } else {
            GTEST_SKIP() << "the caller's cgroup " << m_own.dir
                         << " is not writable by it (tools/test runs the unprivileged pass in one delegated to it)";
        }
    }
    void TearDown() override
    {
        for (const std::string& dir : m_private)
            EXPECT_EQ(::rmdir(dir.c_str()), 0) << dir << " is left: " << std::strerror(errno);
        if (m_made) {
            EXPECT_EQ(::rmdir(m_parent.c_str()), 0) << m_parent << " is left: " << std::strerror(errno);
        }
    }

    // A parent of this test's own below m_parent, for a test that checks
    // what is left in it (the unprivileged pass shares its delegated cgroup
    // with the other tests that run meanwhile); removed at the end.
    std::string private_parent()
    {
        static std::atomic<int> serial;
        std::string dir = m_parent + "/private-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
        EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir << ": " << std::strerror(errno);
        m_private.insert(m_private.begin(), dir);
        return dir;
    }

    // The cgroup of a sandbox's command as /proc/self/cgroup shows it ("0::PATH").
    std::string cgroup_seen(const std::vector<std::string>& options)
    {
        Result r = in_sandbox(args({{"--cgroup-parent", m_parent, "--unshare-pid", "--proc", "/proc"}, options}),
                              {"cat", "/proc/self/cgroup"});
        EXPECT_EQ(r.code, 0) << r.err;
        for (const std::string& line : lines(r.out))
            if (line.rfind("0::", 0) == 0)
                return line.substr(3);
        return "";
    }

    bool parent_offers(const std::string& controller) { return ns::cgroup_offers(m_parent, controller); }

    ns::OwnCgroup m_own;
    std::string m_parent;
    std::vector<std::string> m_private;
    bool m_made = false;
};

TEST_F(Cgroup, TheSandboxRunsInANewCgroupRemovedAtTheEnd)
{
    const std::string seen = cgroup_seen({});
    const std::string relative = m_parent.substr(m_own.mount.size());
    std::smatch m;
    ASSERT_TRUE(std::regex_match(seen, m, std::regex(relative + "/(cocoon-[0-9]+)/command")))
        << seen << " under " << relative;
    struct stat st {};
    EXPECT_NE(::stat((m_parent + "/" + m[1].str()).c_str(), &st), 0) << m[1] << " was left under " << m_parent;
}

// A cgroup nobody asked for is made while set-up runs (ns/launch.cc): PID 1 stays in the caller's
// cgroup and the command is cloned into the sandbox's leaf. One asked for (--cgroup-parent, a
// report) holds PID 1 as well, so that set-up's and PID 1's use counts.
TEST_F(Cgroup, PidOneStaysInTheCallersCgroupOnlyWhereNobodyAskedForOne)
{
    const std::string own = m_own.dir == m_own.mount ? "" : m_own.dir.substr(m_own.mount.size());
    const std::string parent = m_parent.substr(m_own.mount.size());
    const std::string script = "sed -n 's/^0:://p' /proc/1/cgroup /proc/self/cgroup";
    struct Case {
        std::vector<std::string> options;
        std::string pid1, command;  // patterns
    };
    const std::string sandbox = "/cocoon-[0-9]+(-[0-9]+)?";
    for (const Case& c : std::vector<Case>{
             {{}, own.empty() ? "/" : own, own + sandbox + "/command"},
             {{"--cgroup-parent", m_parent}, parent + sandbox, parent + sandbox + "/command"},
             {{"--json-status-fd", "2"}, own + sandbox, own + sandbox + "/command"},
         }) {
        Result r = in_sandbox(args({{"--unshare-pid", "--proc", "/proc"}, c.options}), sh(script));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_TRUE(std::regex_match(r.out, std::regex(c.pid1 + "\n" + c.command + "\n")))
            << r.out << "expected PID 1 in " << c.pid1 << ", the command in " << c.command << " with "
            << testing::PrintToString(c.options);
    }
}

TEST_F(Cgroup, ItIsTheRootOfTheSandboxsCgroupNamespace)
{
    EXPECT_EQ(cgroup_seen({"--unshare-cgroup"}), "/");
}

// Without a PID namespace nothing ends a background process with the
// command; a cgroup asked for does (cgroup.kill): --cgroup-parent, or the one
// a report makes in the caller's own cgroup. The control run, with the
// cgroup a sandbox gets unasked, keeps bwrap's rule: the process outlives it.
TEST_F(Cgroup, WhatTheCommandLeftIsKilled)
{
    // (--dev: sh gives a background job /dev/null for its stdin.)
    const auto leftover = sh("sleep 60 >/dev/null 2>&1 & echo $!");
    Result control = in_sandbox({"--dev", "/dev"}, leftover);
    ASSERT_EQ(control.code, 0) << control.err;
    const pid_t survivor = static_cast<pid_t>(std::stol(control.out));
    EXPECT_FALSE(ends(survivor)) << "without a PID namespace the background process should outlive the sandbox";
    // It keeps the cgroup the sandbox got unasked (cocoon-PID/command); both go with it here.
    std::string left;
    for (const std::string& line : lines(read_file("/proc/" + std::to_string(survivor) + "/cgroup")))
        if (line.rfind("0::", 0) == 0)
            left = m_own.mount + line.substr(3);
    ::kill(survivor, SIGKILL);
    EXPECT_TRUE(ends(survivor));
    if (left.size() > m_own.mount.size() + 8 && left.compare(left.size() - 8, 8, "/command") == 0) {
        for (int i = 0; i < 100 && ::rmdir(left.c_str()) < 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        EXPECT_EQ(::rmdir(left.substr(0, left.size() - 8).c_str()), 0) << left << ": " << std::strerror(errno);
    }

    for (const auto& asked :
         {std::vector<std::string>{"--cgroup-parent", m_parent}, std::vector<std::string>{"--json-status-fd", "2"}}) {
        Result r = in_sandbox(args({{"--dev", "/dev"}, asked}), leftover);
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_TRUE(ends(static_cast<pid_t>(std::stol(r.out)))) << "the background process outlived the sandbox";
    }
}

// CPU comes from the cgroup's cpu.stat, and covers what the command left
// running; memory and tasks too where those controllers run (else sampled).
TEST_F(Cgroup, TheReportReadsTheCgroup)
{
    Result r = in_sandbox(
        {"--unshare-pid", "--proc", "/proc", "--dev", "/dev", "--cgroup-parent", m_parent, "--json-status-fd", "1"},
        busy_loops());
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string exit_line = lines(r.out).back();
    const bool full = parent_offers("memory") && parent_offers("pids");
    EXPECT_TRUE(contains(exit_line, full ? "\"accounting\": \"cgroup\"" : "\"accounting\": \"cgroup+sampled\""))
        << exit_line;
    const double cpu = (json_number(exit_line, "cpu-user-us") + json_number(exit_line, "cpu-system-us")) / 1e6;
    // At least what the busy loops had used when the command ended (whatever the load), and not
    // far more.
    const double seen = busy_loops_seen(r.out);
    EXPECT_GE(seen, 0.3) << r.out;
    EXPECT_GE(cpu, seen) << exit_line << " the loops had used " << seen << " s";
    EXPECT_LE(cpu, seen + 1.5) << exit_line;
    EXPECT_GE(json_number(exit_line, "pids-peak"), 3u) << exit_line;
}

// Issue 31: the relay worker (--relay, --egress) runs in the sandbox's cgroup, in a leaf
// beside the command's, so the CPU and memory the agent makes it spend count against the
// sandbox's; before, it ran in the monitor's cgroup. Control: the command's leaf is in the same
// sandbox cgroup, and the leaf goes with the rest at the end.
TEST_F(Cgroup, TheRelayWorkerRunsInTheSandboxsCgroup)
{
    TempDir dir;
    std::vector<std::string> argv = {cocoon_bin()};
    for (const std::string& a :
         args({minimal_root(),
               {"--cgroup-parent", m_parent, "--unshare-net", "--unshare-pid", "--proc", "/proc", "--egress", "3129",
                "--egress-allow", "example.test", "sh", "-c", "grep ^0:: /proc/self/cgroup; sleep 1"}}))
        argv.push_back(a);
    const pid_t pid = start_logged(argv, dir / "out");
    const pid_t worker = relay_worker(pid);
    ASSERT_GT(worker, 0) << read_file(dir / "out");
    std::string seen;
    for (const std::string& line : lines(read_file("/proc/" + std::to_string(worker) + "/cgroup")))
        if (line.rfind("0::", 0) == 0)
            seen = line.substr(3);
    EXPECT_EQ(wait_exit(pid), 0) << read_file(dir / "out");
    const std::string relative = m_parent.substr(m_own.mount.size());
    std::smatch m;
    ASSERT_TRUE(std::regex_match(seen, m, std::regex(relative + "/(cocoon-[0-9]+)/relay")))
        << "the worker runs in " << seen << ", not in a sandbox's cgroup under " << relative;
    EXPECT_EQ(read_file(dir / "out"), "0::" + relative + "/" + m[1].str() + "/command\n");
    struct stat st {};
    EXPECT_NE(::stat((m_parent + "/" + m[1].str()).c_str(), &st), 0) << m[1] << " was left under " << m_parent;
}

// The end of a run never waits long on the worker now in the sandbox's cgroup: with its leaf
// frozen (as an agent without a PID namespace might, where cgroup2 lacks nsdelegate), cocoon
// ends within 2 s of the command (Worker::stop's bound), says how the worker ended, and leaves
// no cgroup. Control: the worker was frozen.
TEST_F(Cgroup, AFrozenRelayWorkerDoesNotHoldUpTheEnd)
{
    TempDir dir;
    std::vector<std::string> argv = {cocoon_bin()};
    for (const std::string& a : args({minimal_root(),
                                      {"--cgroup-parent", m_parent, "--unshare-net", "--egress", "3129",
                                       "--egress-allow", "example.test", "sleep", "2"}}))
        argv.push_back(a);
    const pid_t pid = start_logged(argv, dir / "out");
    const pid_t worker = relay_worker(pid);
    ASSERT_GT(worker, 0) << read_file(dir / "out");
    std::string leaf;
    for (const std::string& line : lines(read_file("/proc/" + std::to_string(worker) + "/cgroup")))
        if (line.rfind("0::", 0) == 0)
            leaf = m_own.mount + line.substr(3);
    ASSERT_TRUE(leaf.size() > 6 && leaf.compare(leaf.size() - 6, 6, "/relay") == 0) << leaf;
    std::ofstream(leaf + "/cgroup.freeze") << "1";
    bool frozen = false;
    for (int i = 0; i < 100 && !frozen; ++i) {
        frozen = contains(read_file(leaf + "/cgroup.events"), "frozen 1");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(frozen) << read_file(leaf + "/cgroup.events");
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(wait_exit(pid), 0) << read_file(dir / "out");
    // The command's 2 s and the monitor's 2 s wait for the worker's exit, then the kill: a bound with
    // room for a loaded machine (5.09 s was seen with two suites at once), where a worker the
    // monitor waited on for ever would never end.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(8));
    EXPECT_TRUE(contains(read_file(dir / "out"), "the relay worker was killed by signal 9")) << read_file(dir / "out");
    struct stat st {};
    EXPECT_NE(::stat(leaf.c_str(), &st), 0) << leaf << " was left";
}

// A cgroup whose cocoon was killed: removed by the next sandbox under the
// same parent once no process is in it and it is a minute old, whatever pid its
// name holds (a container's cocoon, PID 1 there, names its cgroups cocoon-1 and
// cocoon-1-N: a live pid here). One with a process in it below is left.
TEST_F(Cgroup, StaleCgroupsAreSweptAway)
{
    const std::string stale = m_parent + "/cocoon-4194305", fresh = m_parent + "/cocoon-4194306",
                      container = m_parent + "/cocoon-1-7", running = m_parent + "/cocoon-4194307";
    for (const std::string& dir : {stale, fresh, container, running, running + "/command"})
        ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir << ": " << std::strerror(errno);
    ASSERT_EQ(::mkdir((container + "/command").c_str(), 0755), 0) << std::strerror(errno);
    // A sandbox that still runs: a process in its command's leaf.
    const pid_t sleeper = ::fork();
    if (sleeper == 0) {
        ::pause();
        ::_exit(0);
    }
    ASSERT_GT(sleeper, 0);
    std::ofstream(running + "/command/cgroup.procs") << sleeper << std::flush;
    const timespec old[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
    for (const std::string& dir : {stale, container, running})
        ASSERT_EQ(::utimensat(AT_FDCWD, dir.c_str(), old, 0), 0) << std::strerror(errno);
    Result r = in_sandbox({"--cgroup-parent", m_parent}, {"true"});
    EXPECT_EQ(r.code, 0) << r.err;
    struct stat st {};
    EXPECT_NE(::stat(stale.c_str(), &st), 0) << "the stale cgroup is still there";
    EXPECT_NE(::stat(container.c_str(), &st), 0) << "a container cocoon's stale cgroup is still there";
    EXPECT_EQ(::rmdir(fresh.c_str()), 0) << "a cgroup made a moment ago was removed";
    EXPECT_EQ(::stat(running.c_str(), &st), 0) << "the cgroup of a sandbox that still runs was removed";
    ::kill(sleeper, SIGKILL);
    ::waitpid(sleeper, nullptr, 0);
    for (int i = 0; i < 100 && ::rmdir((running + "/command").c_str()) != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(::rmdir(running.c_str()), 0) << std::strerror(errno);
}

// The cocoon-* cgroups under dir.
std::vector<std::string> sandbox_cgroups(const std::string& dir)
{
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.is_directory() && entry.path().filename().string().rfind("cocoon-", 0) == 0)
            out.push_back(entry.path().filename().string());
    return out;
}

// Issue 21, item 3: the agent makes cgroups below its own (through a cgroup2
// mount in a user and cgroup namespace of its own); they go with the
// sandbox's, and no more than cgroup.max.descendants can be made.
TEST_F(Cgroup, TheAgentsCgroupsAreBoundedAndRemovedWithTheSandboxs)
{
    const std::string parent = private_parent();
    Result r =
        in_sandbox({"--cgroup-parent", parent, "--unshare-cgroup", "--unshare-pid", "--proc", "/proc", "--dev", "/dev",
                    "--tmpfs", "/tmp"},
                   sh("unshare -UrmC sh -c 'mount -t cgroup2 none /tmp && mkdir -p /tmp/a0/b/c && for i in $(seq "
                      "80); do mkdir /tmp/a$i 2>/dev/null; done; find /tmp -mindepth 1 -type d | wc -l'"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, std::to_string(ns::kMaxDescendants - 1) + "\n");  // the command's leaf is one of them
    EXPECT_EQ(r.err, "");
    EXPECT_TRUE(sandbox_cgroups(parent).empty()) << sandbox_cgroups(parent)[0] << " is left";
}

// The sampler walks every cgroup the agent made below its own, a name starting with '.'
// included: an agent could otherwise keep processes out of the report's figures. (The figures
// come from the samples where the cgroup offers no pids controller, as here; with one, pids.peak
// counts them anyway.)
TEST_F(Cgroup, ProcessesInACgroupNamedWithADotAreSampled)
{
    const std::string parent = private_parent();
    Result r = in_sandbox({"--cgroup-parent", parent, "--unshare-cgroup", "--unshare-pid", "--proc", "/proc", "--dev",
                           "/dev", "--tmpfs", "/tmp", "--json-status-fd", "1"},
                          sh("unshare -UrmC sh -c 'mount -t cgroup2 none /tmp && mkdir /tmp/.hidden && for i in $(seq "
                             "20); do sleep 2 & echo $! > /tmp/.hidden/cgroup.procs; done; "
                             "wc -l < /tmp/.hidden/cgroup.procs; wait'"));
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(contains(r.out, "\n20\n")) << r.out;  // all 20 moved (after --json-status-fd's first line)
    const std::string exit_line = lines(r.out).back();
    EXPECT_GE(json_number(exit_line, "pids-peak"), 20u) << exit_line;
}

// Issue 21, item 3: a cgroup left at the name a start would use (a killed
// cocoon of the same pid, or a live one of another PID namespace) neither
// blocks the start nor is touched. cocoon runs as pid 1 of a new PID
// namespace, so its name is cocoon-1.
TEST_F(Cgroup, ALeftoverAtTheSameNameNeverBlocksAStart)
{
    const std::string parent = private_parent();
    const std::string left = parent + "/cocoon-1";
    ASSERT_EQ(::mkdir(left.c_str(), 0755), 0) << std::strerror(errno);
    ASSERT_EQ(::mkdir((left + "/kept").c_str(), 0755), 0) << std::strerror(errno);
    std::vector<std::string> unshare = {"/usr/bin/unshare", "--pid", "--fork"};
    if (!is_root())
        unshare = {"/usr/bin/unshare", "--user", "--map-current-user", "--pid", "--fork"};
    Result r = run(args({unshare,
                         {cocoon_bin()},
                         minimal_root(),
                         {"--cgroup-parent", parent, "--unshare-pid", "--proc", "/proc"},
                         {"cat", "/proc/self/cgroup"}}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "/cocoon-1-1/command\n")) << r.out;
    struct stat st {};
    EXPECT_EQ(::stat((left + "/kept").c_str(), &st), 0) << "a cgroup of another was removed";
    EXPECT_EQ(::rmdir((left + "/kept").c_str()), 0);
    EXPECT_EQ(::rmdir(left.c_str()), 0);
    EXPECT_TRUE(sandbox_cgroups(parent).empty()) << sandbox_cgroups(parent)[0] << " is left";
}

// A scratch cgroup of the caller's (below the fixture's parent), with a
// victim process in it: what an orchestrator's cgroup holds beside cocoon.
struct Scratch {
    std::string dir;
    pid_t victim = -1;

    explicit Scratch(const std::string& parent)
    {
        static std::atomic<int> serial;
        dir = parent + "/scratch-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
        EXPECT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir << ": " << std::strerror(errno);
        victim = ::fork();
        if (victim == 0) {
            int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY);
            if (fd < 0 || ::write(fd, "0", 1) != 1)
                ::_exit(1);
            ::execl("/bin/sleep", "sleep", "60", nullptr);
            ::_exit(1);
        }
    }
    ~Scratch()
    {
        sys_write(dir + "/cgroup.kill", "1");
        sys_write(dir + "/cgroup.freeze", "0");
        ::kill(victim, SIGKILL);
        ::waitpid(victim, nullptr, 0);
        for (int i = 0; i < 100 && ::rmdir(dir.c_str()) < 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    static void sys_write(const std::string& path, const std::string& value)
    {
        int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            (void)!::write(fd, value.data(), value.size());
            ::close(fd);
        }
    }
    bool victim_alive() const { return ::kill(victim, 0) == 0 && !ends(victim); }
    bool frozen() const { return contains(read_file(dir + "/cgroup.events"), "frozen 1"); }
    // Runs argv inside the scratch cgroup, as the orchestrator runs cocoon.
    std::vector<std::string> in_it(const std::vector<std::string>& argv) const
    {
        std::vector<std::string> out = {"/bin/sh", "-c", "echo $$ > " + dir + "/cgroup.procs && exec \"$@\"", "sh"};
        out.insert(out.end(), argv.begin(), argv.end());
        return out;
    }
};

// The attack of issue 21, item 1: a cgroup2 mount in a user and cgroup
// namespace of the agent's own, then a write to the root of what it shows.
std::string nested_cgroup(const std::string& script)
{
    return "unshare -UrmC sh -c 'mount -t cgroup2 none /tmp && " + script + "'";
}

const std::vector<std::string> kAttackLayout = {"--unshare-pid", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"};

// Control: from a process in the scratch cgroup itself (no sandbox), the
// same nested mount reaches the scratch cgroup and kills the victim. So the
// probes below would see a way out if there were one.
TEST_F(Cgroup, ControlTheNestedMountReachesTheCgroupItStartsIn)
{
    Scratch scratch(m_parent);
    ASSERT_TRUE(scratch.victim_alive());
    TempDir mnt;
    Result r =
        run(scratch.in_it({"/usr/bin/unshare", "-UrmC", "sh", "-c",
                           "mount -t cgroup2 none " + mnt.path() + " && echo 1 > " + mnt.path() + "/cgroup.kill"}));
    EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
    EXPECT_TRUE(ends(scratch.victim)) << "the control's cgroup.kill did not reach the victim";
}

// Issue 21, item 1: the agent's cgroup.kill and cgroup.freeze, from a nested
// namespace, reach only the sandbox, with and without --cgroup-parent
// (without it the sandbox's cgroup is made in the caller's own, here the
// scratch cgroup cocoon runs in).
TEST_F(Cgroup, TheAgentCannotKillOrFreezeWhatIsBesideTheSandbox)
{
    for (const auto& where : {std::vector<std::string>{}, std::vector<std::string>{"--cgroup-parent", m_parent}}) {
        Scratch scratch(m_parent);
        Result r = run(scratch.in_it(args({{cocoon_bin()},
                                           minimal_root(),
                                           kAttackLayout,
                                           where,
                                           sh(nested_cgroup("echo 1 > /tmp/cgroup.kill") + "; echo not-killed")})));
        // The root of the agent's view is the command's own cgroup: it killed itself.
        EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
        EXPECT_EQ(r.out, "") << r.err;
        EXPECT_TRUE(scratch.victim_alive()) << "the agent's cgroup.kill reached the caller's cgroup";

        // Freezing the root of its view freezes the agent itself, nothing more;
        // a stop (SIGTERM, --kill-after) still ends the sandbox.
        TempDir logs;
        const std::string out = logs / "out";
        std::vector<std::string> argv =
            scratch.in_it(args({{cocoon_bin()},
                                minimal_root(),
                                kAttackLayout,
                                where,
                                {"--forward-signals", "--kill-after", "1"},
                                sh(nested_cgroup("echo 1 > /tmp/cgroup.freeze") + "; echo not-frozen")}));
        pid_t pid = start_logged(argv, out);
        std::this_thread::sleep_for(std::chrono::milliseconds(1000));
        EXPECT_FALSE(scratch.frozen()) << "the agent froze the caller's cgroup";
        EXPECT_TRUE(scratch.victim_alive());
        ::kill(pid, SIGTERM);
        // --kill-after 1: the sandbox ends within a few seconds of SIGTERM
        // (its frozen command by the SIGKILL that follows).
        const int code = wait_exit(pid, 5000);
        EXPECT_TRUE(code == 128 + SIGKILL || code == 128 + SIGTERM) << code << ": " << read_file(out);
        EXPECT_FALSE(contains(read_file(out), "not-frozen")) << read_file(out);
    }
}

// Issue 21, item 2: the agent cannot move PID 1 into a cgroup it made (PID 1
// is above the root of its cgroup namespace) nor freeze it; the command's
// exit code is what cocoon reports.
TEST_F(Cgroup, PidOneIsOutOfTheAgentsReach)
{
    // Into a cgroup of its own (where it may make one), or into the root of
    // its view; then freeze it, and exit 7.
    const std::vector<std::string> attack = sh(nested_cgroup("mkdir /tmp/x; echo 1 > /tmp/x/cgroup.procs; echo 1 > "
                                                             "/tmp/x/cgroup.freeze; echo 1 > /tmp/cgroup.procs") +
                                               " 2>/dev/null; grep ^0:: /proc/1/cgroup; exit 7");
    // With nsdelegate the kernel refuses to move a process the mover's cgroup
    // namespace does not show; without it (this host's cgroup2) only the
    // ownership of the sandbox's cgroup.procs stops the move, and an agent
    // owns its caller's files in a user namespace of its own: --host-user
    // (root) gives the sandbox a uid that does not own them. PID 1 must still
    // be in the sandbox's cgroup, not in the command's leaf nor below it.
    if (m_own.nsdelegate || is_root()) {
        std::vector<std::string> as;
        if (!m_own.nsdelegate) {
            ASSERT_TRUE(test_user()) << kNoTestUser;
            as = {"--host-user", kTestUser, "--uid", "0", "--gid", "0"};
        }
        Result r = in_sandbox(args({{"--cgroup-parent", m_parent}, as, kAttackLayout}), attack);
        EXPECT_EQ(r.code, 7) << r.err;
        EXPECT_TRUE(std::regex_match(r.out, std::regex("0::.*/cocoon-[0-9]+(-[0-9]+)?\n")))
            << r.out << "PID 1 was moved into the agent's cgroup";
    }
    if (m_own.nsdelegate)
        return;
    // Where the agent may move PID 1 (no nsdelegate; unprivileged, or root
    // without --host-user), it freezes it: the monitor sees the command end
    // (ns/monitor/command_watch.h), reports its code and ends the sandbox; nothing of
    // it is left in the cgroup (tools/test checks) or running.
    for (bool with_parent : {true, false}) {
        SCOPED_TRACE(with_parent ? "--cgroup-parent" : "the caller's cgroup");
        std::vector<std::string> where;
        if (with_parent)
            where = {"--cgroup-parent", m_parent};
        const auto started = std::chrono::steady_clock::now();
        Result r = in_sandbox(args({where, kAttackLayout}),
                              sh(nested_cgroup("mkdir /tmp/x; echo 1 > /tmp/x/cgroup.procs; echo 1 > "
                                               "/tmp/x/cgroup.freeze") +
                                 "; grep ^0:: /proc/1/cgroup; exit 7"));
        const auto took = std::chrono::steady_clock::now() - started;
        EXPECT_EQ(r.code, 7) << r.out << r.err;
        EXPECT_TRUE(std::regex_search(r.out, std::regex("/x\n"))) << r.out << "the control: PID 1 was not moved";
        EXPECT_TRUE(contains(r.err, "PID 1 did not end")) << r.err;
        EXPECT_LT(took, std::chrono::seconds(10));
    }
}

// --memory-max and --pids-max: enforced where cgroup v2 runs the controller;
// a one-line refusal naming the option where it does not (this host).
TEST_F(Cgroup, MemoryMaxWhereTheControllerIs)
{
    const std::string self = self_exe();
    ASSERT_FALSE(self.empty());
    Result r = in_sandbox({"--cgroup-parent", m_parent, "--memory-max", "64M", "--ro-bind", self, "/helper", "--setenv",
                           "COCOON_E2E_TOUCH", "1", "--json-status-fd", "2"},
                          {"/helper"});
    if (!parent_offers("memory")) {
        expect_refused(r, {"--memory-max: the cgroup v2 memory controller is not available in " + m_parent});
        return;
    }
    // The helper touches 256 MiB: the kernel's OOM killer ends it inside the limit.
    EXPECT_EQ(r.code, 128 + SIGKILL) << r.err;
    EXPECT_LE(json_number(lines(r.err).back(), "memory-peak-bytes"), 64u << 20) << r.err;
}

TEST_F(Cgroup, PidsMaxWhereTheControllerIs)
{
    Result r = in_sandbox({"--cgroup-parent", m_parent, "--pids-max", "32", "--unshare-pid", "--ro-bind",
                           sibling_binary("cocoon_escape_probe"), "/probe"},
                          {"/probe", "forkbomb", "2000"});
    if (!parent_offers("pids")) {
        expect_refused(r, {"--pids-max: the cgroup v2 pids controller is not available in " + m_parent});
        return;
    }
    // Also a root caller's: pids.max holds where RLIMIT_NPROC does not.
    ASSERT_TRUE(contains(r.out, " then EAGAIN\n")) << r.out << r.err;
    EXPECT_LE(std::stol(r.out.substr(r.out.find("forked ") + 7)), 32) << r.out;
}

TEST_F(Cgroup, Refusals)
{
    HostSnapshot host("cgroup");
    expect_refused(in_sandbox({"--cgroup-parent", "/tmp"}, {"true"}),
                   {"--cgroup-parent /tmp: not a cgroup v2 directory"});
    expect_refused(in_sandbox({"--cgroup-parent", "/nonexistent-cgroup"}, {"true"}),
                   {"--cgroup-parent /nonexistent-cgroup: No such file or directory"});
    expect_refused(in_sandbox({"--memory-max", "0"}, {"true"}), {"--memory-max takes a non-zero number"});
    expect_refused(in_sandbox({"--memory-max", "12Q"}, {"true"}), {"--memory-max", "12Q"});
    expect_refused(in_sandbox({"--memory-max", "99999999T"}, {"true"}), {"--memory-max", "99999999T"});
    expect_refused(in_sandbox({"--pids-max", "0"}, {"true"}), {"--pids-max takes a positive number"});
    expect_refused(in_sandbox({"--pids-max", "-3"}, {"true"}), {"--pids-max", "-3"});
    if (!m_own.writable) {
        expect_refused(in_sandbox({"--memory-max", "1G"}, {"true"}),
                       {"--memory-max: no cgroup v2 to set it in", "give --cgroup-parent DIR"});
    }
    if (!is_root()) {
        expect_refused(
            in_sandbox({"--cgroup-parent", m_own.mount, "--json-status-fd", "1"}, {"true"}),
            {"--cgroup-parent " + m_own.mount + ": can't make " + m_own.mount + "/cocoon-", ": Permission denied"});
    }
    host.expect_unchanged();
    if (m_made) {  // no cgroup left behind (the shared delegated one has other tests' meanwhile)
        for (const auto& entry : std::filesystem::directory_iterator(m_parent))
            EXPECT_FALSE(entry.is_directory()) << entry.path() << " was left";
    }
}

}  // namespace
}  // namespace cocoon::test
