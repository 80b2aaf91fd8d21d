// Escape attempts from an orchestrator-shaped sandbox (every namespace, the system read-only, a
// worktree read-write, a fresh home; --cap-drop ALL for a root caller, as the recipe says), one
// test per attempt, each asserting the error it must fail with. Run as root and unprivileged.
// SECURITY.md ("Escape attempts") lists them. The attempts that need a system call are made by
// the static probe (tests/e2e/probe/seccomp_probe.cc); the rest by the shell and coreutils, whose
// messages are strerror's text.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/support/process.h"
#include "tests/support/socket.h"

namespace cocoon::test {
namespace {

std::string probe()
{
    char buf[PATH_MAX] = {};
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    std::string self(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return self.substr(0, self.rfind('/')) + "/cocoon_seccomp_probe";
}

std::map<std::string, std::string> results(const std::string& out)
{
    std::map<std::string, std::string> m;
    for (const std::string& line : lines(out))
        if (size_t sp = line.find(' '); sp != std::string::npos)
            m[line.substr(0, sp)] = line.substr(sp + 1);
    return m;
}

class Escape : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(::access(probe().c_str(), X_OK), 0) << probe() << " is missing";
        ASSERT_EQ(::chmod(m_worktree.path().c_str(), 0777), 0);
    }

    // The orchestrator's sandbox, then `extra`, then the command.
    Result attempt(const std::vector<std::string>& command, const std::vector<std::string>& extra = {})
    {
        return cocoon(
            args({minimal_root(),
                  {"--unshare-all", "--die-with-parent", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                   "--fresh-home", "/home/agent", "--bind", m_worktree.path(), "/wt", "--ro-bind", probe(), "/probe"},
                  no_caps(),
                  extra,
                  command}));
    }

    TempDir m_worktree;
};

TEST_F(Escape, ReadingAHostFileThatWasNotBound)
{
    TempDir secret;
    write_file(secret / "key", "secret", 0644);
    Result r = attempt(sh("cat '" + (secret / "key") + "'"));
    EXPECT_NE(r.code, 0);
    EXPECT_TRUE(contains(r.err, "No such file or directory")) << r.err;
    EXPECT_FALSE(contains(r.out, "secret"));
}

TEST_F(Escape, WritingThroughAReadOnlyBind)
{
    TempDir ro;
    write_file(ro / "f", "kept", 0666);
    ASSERT_EQ(::chmod(ro.path().c_str(), 0777), 0);
    Result r = attempt(sh("echo x > /ro/f; echo x > /ro/new; rm -f /ro/f; mv /ro/f /ro/g; echo done"),
                       {"--ro-bind", ro.path(), "/ro"});
    EXPECT_EQ(r.out, "done\n") << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 4) << r.err;
    for (const std::string& line : lines(r.err))
        EXPECT_TRUE(contains(line, "Read-only file system")) << line;
    EXPECT_EQ(read_file(ro / "f"), "kept");
    EXPECT_FALSE(exists(ro / "new"));
}

TEST_F(Escape, SeeingOrSignallingAHostProcess)
{
    pid_t host = ::fork();
    if (host == 0) {
        ::execl("/bin/sleep", "sleep", "30", nullptr);
        ::_exit(127);
    }
    const std::string pid = std::to_string(host);
    Result r = attempt(sh("test -e /proc/" + pid + " && echo visible; kill -9 " + pid + "; echo done"));
    EXPECT_EQ(r.out, "done\n") << r.err;
    EXPECT_TRUE(contains(r.err, "No such process")) << r.err;
    EXPECT_EQ(::kill(host, 0), 0) << "the host process was killed";
    ::kill(host, SIGKILL);
    ::waitpid(host, nullptr, 0);
}

TEST_F(Escape, ReachingPid1)
{
    Result r = attempt(sh("/probe ptrace 1; cat /proc/1/mem; true > /proc/1/exe; ls /proc/1/root/; "
                          "readlink -v /proc/1/exe; echo done"));
    EXPECT_TRUE(contains(r.out, "done\n")) << r.out << r.err;
    auto got = results(r.out);
    EXPECT_EQ(got["ptrace_attach"], "EPERM") << r.out;
    EXPECT_EQ(got["ptrace_seize"], "EPERM") << r.out;
    // /proc/1/mem, /proc/1/exe for writing, /proc/1/root, the exe link: PID 1 is not dumpable.
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 4) << r.err;
    for (const std::string& line : lines(r.err))
        EXPECT_TRUE(contains(line, "Permission denied")) << line;
}

TEST_F(Escape, ConnectingToHostListeners)
{
    // A TCP listener on the host's loopback, and an abstract Unix socket in the host's namespace.
    UniqueFd tcp = listen_on(loopback(), 16, 0);
    ASSERT_TRUE(tcp);
    const std::string port = std::to_string(port_of(address_of(tcp.get())));
    const std::string name = unique_marker("cocoon-escape");
    UniqueFd unix_fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path + 1, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    ASSERT_EQ(::bind(unix_fd.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
    ASSERT_EQ(::listen(unix_fd.get(), 16), 0);
    Result r = attempt(sh("bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + port +
                          "' 2>&1 | grep -m1 -o 'Connection refused'; /probe abstract " + name));
    EXPECT_EQ(r.out, "Connection refused\nconnect_abstract ECONNREFUSED\n") << r.err;
}

TEST_F(Escape, UnmountingATmpfsMask)
{
    // The worktree's "secret" directory is masked by a tmpfs; taking the mask away would show it.
    ASSERT_EQ(::mkdir((m_worktree / "secret").c_str(), 0755), 0);
    write_file(m_worktree / "secret/token", "t0ken", 0644);
    Result r = attempt(sh("/probe umount /wt/secret; /probe nested /wt/secret; cat /wt/secret/token"),
                       {"--tmpfs", "/wt/secret"});
    auto got = results(r.out);
    EXPECT_EQ(got["umount"], "EPERM") << r.out;
    EXPECT_EQ(got["umount_detach"], "EPERM") << r.out;
    // In a user namespace of its own: the sandbox's mounts are locked together.
    EXPECT_EQ(got["nested_umount"], "EINVAL") << r.out;
    EXPECT_FALSE(contains(r.out, "t0ken")) << r.out;
}

TEST_F(Escape, RemountingReadWrite)
{
    Result r = attempt(sh("/probe remount-rw /usr; /probe nested /tmp"));
    auto got = results(r.out);
    EXPECT_EQ(got["remount_rw"], "EPERM") << r.out;
    // Even with every capability in a nested user namespace: the read-only flag is locked.
    EXPECT_EQ(got["nested_remount_rw"], "EPERM") << r.out;
}

TEST_F(Escape, MakingADeviceNode)
{
    Result r = attempt({"/probe", "mknod", "/tmp/null"});
    EXPECT_EQ(results(r.out)["mknod_char"], "EPERM") << r.out;
}

TEST_F(Escape, WritingProcSysAndSys)
{
    Result r = attempt(sh("echo evil > /proc/sys/kernel/hostname; echo 1 > /proc/sys/vm/drop_caches; "
                          "echo x > /sys/kernel/uevent_helper; echo done"),
                       {"--ro-bind", "/sys", "/sys"});
    EXPECT_EQ(r.out, "done\n") << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
    for (const std::string& line : lines(r.err))
        EXPECT_TRUE(contains(line, "Read-only file system")) << line;
}

TEST_F(Escape, InheritedFdsDoNotCross)
{
    TempDir dir;
    write_file(dir / "f", "host", 0644);
    // fd 7 open, without CLOEXEC, in the process that runs cocoon.
    std::string script = "exec 7<'" + (dir / "f") + "'; exec '" + cocoon_bin() + "'";
    for (const std::string& w :
         args({minimal_root(), {"--unshare-all", "--proc", "/proc"}, no_caps(), sh("ls /proc/self/fd; cat <&7")}))
        script += " '" + w + "'";
    Result r = run({"/bin/sh", "-c", script});
    // 0, 1, 2 and ls's own directory fd (3): nothing of the caller's.
    EXPECT_EQ(r.out, "0\n1\n2\n3\n") << r.err;
    EXPECT_TRUE(contains(r.err, "Bad file descriptor")) << r.err;
}

TEST_F(Escape, MountsDoNotPropagateToTheHost)
{
    ASSERT_EQ(::mkdir((m_worktree / "sub").c_str(), 0777), 0);
    const std::vector<std::string> before = mount_table();
    Result r = attempt({"/probe", "nested", "/wt/sub"});
    auto got = results(r.out);
    // The mount succeeds in the nested namespace, and only there.
    EXPECT_EQ(got["nested_mount"], "ok") << r.out;
    EXPECT_EQ(got["nested_sees_own_mount"], "ok") << r.out;
    for (const std::string& line : mount_table())
        EXPECT_FALSE(contains(line, m_worktree.path())) << line;
    EXPECT_EQ(mount_table().size(), before.size());
}

TEST_F(Escape, FillingATmpfsStopsAtItsSize)
{
    Result r = attempt(sh("head -c 2097152 /dev/zero > /t/fill; echo exit=$?; du -k /t/fill | cut -f1"),
                       {"--size", "1048576", "--tmpfs", "/t"});
    EXPECT_TRUE(contains(r.out, "exit=1\n1024\n")) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "No space left on device")) << r.err;
}

// A fork bomb stops at RLIMIT_NPROC, which the kernel counts per user in each user namespace.
// Root (uid 0 of the initial namespace) is exempt from RLIMIT_NPROC, and this host has no cgroup
// v2 pids controller, so nothing here bounds a root caller's fork bomb: skipped for root.
TEST_F(Escape, AForkBombStopsAtTheProcessLimit)
{
    if (is_root())
        GTEST_SKIP() << "root is exempt from RLIMIT_NPROC and this host has no cgroup v2 pids controller "
                        "(a root caller bounds a sandbox with --pids-max where it has one)";
    // The limit counts every process of this uid, so it is set above what the uid runs now.
    long running = 0;
    for (const auto& entry : lines(run({"/bin/sh", "-c", "ps -u $(id -u) -o pid= | wc -l"}).out))
        running = std::stol(entry);
    const rlim_t limit = static_cast<rlim_t>(running + 64);
    std::string script = "exec /usr/bin/prlimit --nproc=" + std::to_string(limit) + " '" + cocoon_bin() + "'";
    for (const std::string& w :
         args({minimal_root(), {"--unshare-all", "--ro-bind", probe(), "/probe"}, {"/probe", "forkbomb"}}))
        script += " '" + w + "'";
    Result r = run({"/bin/sh", "-c", script}, "", 30000);
    ASSERT_TRUE(contains(r.out, " then EAGAIN\n")) << r.out << r.err;
    const long forked = std::stol(r.out.substr(r.out.find("forked ") + 7));
    EXPECT_LE(forked, 64) << r.out;
}

}  // namespace
}  // namespace cocoon::test
