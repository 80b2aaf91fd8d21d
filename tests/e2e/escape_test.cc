// Escape attempts from an orchestrator-shaped sandbox (every namespace, the system read-only, a
// worktree read-write, a fresh home; --cap-drop ALL for a root caller, as the recipe says), one
// test per attempt, each asserting the errno it must fail with. CI runs them as root and as an
// unprivileged user. The static probe (tests/e2e/probe/escape_probe.cc) makes the system calls
// and prints each one's errno name. SECURITY.md ("Escape attempts") lists them.
#include <fcntl.h>
#include <linux/keyctl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/support/process.h"
#include "tests/support/socket.h"

namespace cocoon::test {
namespace {

// The host's mounts at or under dir (other tests on the machine may mount elsewhere meanwhile).
std::vector<std::string> mounts_under(const std::string& dir)
{
    std::vector<std::string> out;
    for (const std::string& line : mount_table())
        if (contains(line, " " + dir))
            out.push_back(line);
    return out;
}

std::string escape_probe()
{
    return sibling_binary("cocoon_escape_probe");
}

// argv as one sh -c word list, each word single-quoted (the tests' paths hold no quote).
std::string quoted(const std::vector<std::string>& argv)
{
    std::string out;
    for (const std::string& w : argv)
        out += " '" + w + "'";
    return out;
}

class Escape : public ::testing::Test {
protected:
    void SetUp() override
    {
        ASSERT_EQ(::access(escape_probe().c_str(), X_OK), 0) << escape_probe() << " is missing";
        // The sandbox's uid is the caller's, but the worktree must be writable whoever made it.
        ASSERT_EQ(::chmod(m_worktree.path().c_str(), 0777), 0);
    }

    // The orchestrator's sandbox: every namespace (the user namespace explicitly: for root,
    // --unshare-all alone makes one only where the host allows it), the system read-only, the
    // worktree at /wt, a fresh home, no capabilities. Then `extra`, then the command.
    std::vector<std::string> shape(const std::vector<std::string>& extra, const std::vector<std::string>& command,
                                   bool drop_caps = true)
    {
        return args({minimal_root(),
                     {"--unshare-all", "--unshare-user", "--die-with-parent", "--proc", "/proc", "--dev", "/dev",
                      "--tmpfs", "/tmp", "--fresh-home", "/home/agent", "--bind", m_worktree.path(), "/wt", "--ro-bind",
                      escape_probe(), "/probe"},
                     drop_caps ? no_caps() : std::vector<std::string>{},
                     extra,
                     command});
    }

    // The probe's results for one attempt; fails the test if the sandbox itself did not start.
    std::map<std::string, std::string> attempt(const std::vector<std::string>& probe_args,
                                               const std::vector<std::string>& extra = {})
    {
        std::vector<std::string> command{"/probe"};
        command.insert(command.end(), probe_args.begin(), probe_args.end());
        Result r = cocoon(shape(extra, command));
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        EXPECT_EQ(r.err, "");
        return results(r.out);
    }

    TempDir m_worktree;
};

TEST_F(Escape, ReadingAHostFileThatWasNotBound)
{
    TempDir secret;
    write_file(secret / "key", "secret", 0644);
    // Readable on the host by whoever runs the test: only the mount namespace stands in the way.
    ASSERT_EQ(::chmod(secret.path().c_str(), 0755), 0);
    auto got = attempt({"read", secret / "key"});
    EXPECT_EQ(got["read"], "ENOENT");
    // Nor through the parent of what was bound, where the secret is the worktree's sibling on the
    // host: /wt/.. is the sandbox's root.
    const std::string sibling = secret.path().substr(secret.path().rfind('/') + 1);
    ASSERT_EQ(m_worktree.path().substr(0, m_worktree.path().rfind('/')),
              secret.path().substr(0, secret.path().rfind('/')));
    auto up = attempt({"read", "/wt/../" + sibling + "/key"});
    EXPECT_EQ(up["read"], "ENOENT");
}

TEST_F(Escape, WritingThroughAReadOnlyBind)
{
    TempDir ro;
    write_file(ro / "f", "kept", 0666);
    // World-writable on the host: only the read-only bind refuses.
    ASSERT_EQ(::chmod(ro.path().c_str(), 0777), 0);
    auto got = attempt({"ro", "/ro", "f"}, {"--ro-bind", ro.path(), "/ro"});
    for (const char* call : {"open_wronly", "open_trunc", "creat", "unlink", "rename", "mkdir", "chmod"})
        EXPECT_EQ(got[call], "EROFS") << call;
    EXPECT_EQ(read_file(ro / "f"), "kept");
    EXPECT_FALSE(exists(ro / "new"));
    EXPECT_FALSE(exists(ro / "dir"));
    // The system too: /usr is bound read-only by the shape.
    // (EACCES first for an unprivileged caller, which does not own the file.)
    auto usr = attempt({"write", "/usr/bin/env"});
    EXPECT_EQ(usr["/usr/bin/env"], is_root() ? "EROFS" : "EACCES");
}

TEST_F(Escape, SeeingOrSignallingAHostProcess)
{
    pid_t host = ::fork();
    ASSERT_GE(host, 0);
    if (host == 0) {
        ::execl("/bin/sleep", "sleep", "30", nullptr);
        ::_exit(127);
    }
    // The sandbox's own PIDs count up from 1; a host pid that low would be seen for the wrong
    // reason (it is the sandbox's pid too), and no test host runs so few processes.
    ASSERT_GT(host, 100);
    auto got = attempt({"host-pid", std::to_string(host)});
    EXPECT_EQ(got["proc_entry"], "ENOENT");
    EXPECT_EQ(got["kill_0"], "ESRCH");
    EXPECT_EQ(got["kill_SIGKILL"], "ESRCH");
    EXPECT_EQ(::kill(host, 0), 0) << "the host process was killed";
    ::kill(host, SIGKILL);
    ::waitpid(host, nullptr, 0);
}

TEST_F(Escape, ReachingPid1)
{
    // PID 1 is cocoon's reaper: not dumpable, so neither ptrace nor its /proc links are open to
    // the command, even though both run as the same uid.
    auto got = attempt({"pid1"});
    EXPECT_EQ(got["ptrace_attach"], "EPERM");
    EXPECT_EQ(got["ptrace_seize"], "EPERM");
    EXPECT_EQ(got["mem_read"], "EACCES");
    EXPECT_EQ(got["exe_write"], "EACCES");
    EXPECT_EQ(got["exe_readlink"], "EACCES");
    EXPECT_EQ(got["root_readlink"], "EACCES");
    EXPECT_EQ(got["root_dotdot"], "EACCES");
}

TEST_F(Escape, ClimbingOutOfTheRoot)
{
    // The command's own /proc/self/root is open to it: it must lead back to the sandbox's root.
    auto got = attempt({"root"});
    EXPECT_EQ(got["self_root_readlink"], "ok");
    EXPECT_EQ(got["self_root"], "/");
    EXPECT_EQ(got["self_root_dotdot"], "same");
    EXPECT_EQ(got["self_root_dotdot_dotdot"], "same");
    EXPECT_EQ(got["dotdot"], "same");
    EXPECT_EQ(got["chdir_up"], "ok");
    EXPECT_EQ(got["cwd_after_up"], "same");
}

TEST_F(Escape, ConnectingToHostListeners)
{
    // A TCP listener on the host's loopback, and an abstract Unix socket in the host's network
    // namespace (abstract names belong to a network namespace).
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

    // The sandbox's loopback is up and its own: nothing listens on the port there.
    EXPECT_EQ(attempt({"tcp", "127.0.0.1", port})["connect_tcp"], "ECONNREFUSED");
    // Anywhere else: no route at all (the namespace has only lo). 192.0.2.1 is TEST-NET-1.
    EXPECT_EQ(attempt({"tcp", "192.0.2.1", port})["connect_tcp"], "ENETUNREACH");
    EXPECT_EQ(attempt({"abstract", name})["connect_abstract"], "ECONNREFUSED");

    // The listeners were reachable: the same attempts from the host connect.
    EXPECT_TRUE(try_connect(address_of(tcp.get()), std::chrono::seconds(2)));
    UniqueFd c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(c.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
}

TEST_F(Escape, UnmountingATmpfsMask)
{
    // The worktree's "secret" directory is masked by a tmpfs; taking the mask away would show it.
    ASSERT_EQ(::mkdir((m_worktree / "secret").c_str(), 0755), 0);
    write_file(m_worktree / "secret/token", "t0ken", 0644);
    auto got = attempt({"umount", "/wt/secret"}, {"--tmpfs", "/wt/secret"});
    EXPECT_EQ(got["umount"], "EPERM");
    EXPECT_EQ(got["umount_detach"], "EPERM");
    // With every capability in a user namespace of its own: the sandbox's mounts were copied into
    // a less privileged mount namespace, where the kernel locks them together (MNT_LOCKED).
    auto nested = attempt({"nested", "/wt/secret", "/usr"}, {"--tmpfs", "/wt/secret"});
    EXPECT_EQ(nested["nested_umount"], "EINVAL");
    EXPECT_EQ(nested["nested_umount_detach"], "EINVAL");
    EXPECT_EQ(read_file(m_worktree / "secret/token"), "t0ken");
}

TEST_F(Escape, RemountingReadWrite)
{
    auto got = attempt({"remount-rw", "/usr"});
    EXPECT_EQ(got["remount_rw"], "EPERM");
    // Nested, with every capability there: the read-only flag is locked (MNT_LOCK_READONLY).
    auto nested = attempt({"nested", "/wt", "/usr"});
    EXPECT_EQ(nested["nested_remount_rw"], "EPERM");
}

TEST_F(Escape, MakingADeviceNode)
{
    EXPECT_EQ(attempt({"mknod", "/wt/null"})["mknod_char"], "EPERM");
    EXPECT_EQ(attempt({"mknod", "/tmp/null"})["mknod_char"], "EPERM");
    EXPECT_FALSE(exists(m_worktree / "null"));
}

TEST_F(Escape, WritingProcSysAndSys)
{
    // /proc/sys is covered read-only; /sys is not in the shape at all, so a read-only bind of it
    // is what a caller who wants it would add. core_pattern: a pipe there runs as host root.
    // The files belong to the host's root: an unprivileged caller's command fails the permission
    // check (EACCES) before the read-only mount is looked at; root's (the owner) reaches it.
    const std::vector<std::string> files{"/proc/sys/kernel/hostname", "/proc/sys/kernel/core_pattern",
                                         "/proc/sys/vm/drop_caches", "/sys/kernel/mm/transparent_hugepage/enabled",
                                         "/sys/kernel/rcu_expedited"};
    auto got = attempt(args({{"write"}, files}), {"--ro-bind", "/sys", "/sys"});
    for (const std::string& f : files)
        EXPECT_EQ(got[f], is_root() ? "EROFS" : "EACCES") << f;
}

// An fd the caller left inheritable is handed over (bwrap's rule, the caller's decision); with
// --close-fds (the agent recipe's) none crosses but the one an option keeps there.
TEST_F(Escape, InheritedFdsCrossOnlyWithoutCloseFds)
{
    TempDir dir;
    write_file(dir / "f", "host", 0644);
    // The process that runs cocoon holds fd 7 (a host file) and fd 8 without CLOEXEC.
    auto run_with_fds = [&](const std::vector<std::string>& extra) {
        const std::string script = "exec 7<'" + (dir / "f") + "' 8</dev/null; exec '" + cocoon_bin() + "'" +
                                   quoted(shape(extra, {"/probe", "fds"}));
        Result r = run({"/bin/sh", "-c", script});
        EXPECT_EQ(r.code, 0) << r.err;
        return results(r.out);
    };
    // Whatever else the test's own caller left inheritable crosses too, so 7 and 8 are looked for.
    auto plain = run_with_fds({});
    const std::string fds = " " + plain["fds"] + " ";
    for (const char* fd : {" 0 1 2 ", " 7 ", " 8 "})
        EXPECT_TRUE(contains(fds, fd)) << fd << " not in" << fds;
    EXPECT_EQ(plain["fstat_7"], "ok");
    auto closed = run_with_fds({"--close-fds"});
    EXPECT_EQ(closed["fds"], "0 1 2");
    EXPECT_EQ(closed["fstat_7"], "EBADF");
    // --sync-fd is held by PID 1; with --as-pid-1 the command is PID 1 and holds it: the one fd
    // named by an option crosses, and still not fd 7.
    auto named = run_with_fds({"--close-fds", "--as-pid-1", "--sync-fd", "8"});
    EXPECT_EQ(named["fds"], "0 1 2 8");
    EXPECT_EQ(named["fstat_7"], "EBADF");
}

TEST_F(Escape, MountsDoNotPropagateToTheHost)
{
    ASSERT_EQ(::mkdir((m_worktree / "sub").c_str(), 0777), 0);
    write_file(m_worktree / "sub/host", "", 0644);
    ASSERT_EQ(mounts_under(m_worktree.path()), std::vector<std::string>{});
    // Without capabilities, no mount at all.
    EXPECT_EQ(attempt({"mount", "/wt/sub"})["mount"], "EPERM");

    // In a nested user and mount namespace the mount succeeds; while it stands, the test looks
    // at the host's mount table.
    Result r;
    std::thread sandbox([&] { r = cocoon(shape({}, {"/probe", "nested-mount", "/wt"})); });
    bool ready = false;
    for (int i = 0; i < 500 && !(ready = exists(m_worktree / "ready")); ++i)
        ::usleep(10000);
    const std::vector<std::string> during = mounts_under(m_worktree.path());
    write_file(m_worktree / "go", "");
    sandbox.join();
    ASSERT_TRUE(ready) << r.out << r.err;
    EXPECT_EQ(r.code, 0) << r.err;
    auto got = results(r.out);
    EXPECT_EQ(got["nested_mount"], "ok");
    EXPECT_EQ(got["nested_sees_host_file"], "ENOENT") << "the nested tmpfs did not cover /wt/sub";
    EXPECT_EQ(got["go"], "ok");
    EXPECT_EQ(during, std::vector<std::string>{});
    EXPECT_EQ(mounts_under(m_worktree.path()), std::vector<std::string>{});
}

// A root caller that keeps its capabilities (bwrap's default for root) may mount; its mounts stay
// in the sandbox too (the new mount namespace's mounts do not propagate back).
TEST_F(Escape, MountsOfARootCallerWithCapabilitiesDoNotPropagate)
{
    if (!is_root())
        GTEST_SKIP() << "an unprivileged caller has no capabilities to keep; MountsDoNotPropagateToTheHost covers it";
    ASSERT_EQ(::mkdir((m_worktree / "sub").c_str(), 0777), 0);
    ASSERT_EQ(mounts_under(m_worktree.path()), std::vector<std::string>{});
    Result r = cocoon(shape({}, {"sh", "-c", "/probe mount /wt/sub && : > /wt/sub/inside"}, false));
    EXPECT_EQ(results(r.out)["mount"], "ok") << r.out << r.err;
    EXPECT_EQ(mounts_under(m_worktree.path()), std::vector<std::string>{});
    EXPECT_FALSE(exists(m_worktree / "sub/inside"));
}

TEST_F(Escape, FillingATmpfsStopsAtItsSize)
{
    Result r = cocoon(shape({"--size", "1048576", "--tmpfs", "/t"}, {"/probe", "fill", "/t/fill"}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(results(r.out)["fill"], "ENOSPC after 1024 KiB") << r.out;
}

// --size bounds the inodes too (one per 2 KiB, at least 256): a 1 MiB tmpfs or fresh home takes
// 511 empty files besides its root directory, not millions; an agent's tree of small files still
// fits a 64 MiB home.
TEST_F(Escape, FillingATmpfsWithEmptyFilesStopsAtItsInodes)
{
    auto tmp = attempt({"files", "/t", "100000"}, {"--size", "1048576", "--tmpfs", "/t"});
    EXPECT_EQ(tmp["files"], "ENOSPC after 511");
    auto home = attempt({"files", "/home/small", "100000"}, {"--size", "1048576", "--fresh-home", "/home/small"});
    EXPECT_EQ(home["files"], "ENOSPC after 511");
    auto tree = attempt({"tree", "/home/big", "1000", "10"}, {"--size", "67108864", "--fresh-home", "/home/big"});
    EXPECT_EQ(tree["tree"], "ok 11000");
}

// /proc/keys names every key the caller's uid may view, whatever keyring holds it, and
// /proc/key-users counts every uid's keys: inside both read empty, with a new procfs and with the
// host's bound (no PID namespace), as root keeping capabilities too. The control, that file bound
// elsewhere, shows the key: the sandbox's uid may view it.
TEST_F(Escape, ReadingTheCallersKeyNames)
{
    const std::string name = unique_marker("cocoon-e2e-key");
    const long key = ::syscall(SYS_add_key, "user", name.c_str(), "secret", 6, KEY_SPEC_USER_KEYRING);
    ASSERT_GE(key, 0) << "add_key: " << std::strerror(errno);
    struct Invalidate {
        long key;
        ~Invalidate() { ::syscall(SYS_keyctl, KEYCTL_INVALIDATE, key); }
    } invalidate{key};
    ASSERT_TRUE(contains(read_file("/proc/keys"), name));

    const std::vector<std::string> cat = sh("cat /proc/keys /proc/key-users; echo \"cat $?\"");
    Result control = cocoon(shape({"--ro-bind", "/proc/keys", "/keys"}, sh("cat /keys")));
    EXPECT_TRUE(contains(control.out, name)) << control.out << control.err;
    std::vector<std::vector<std::string>> modes = {
        shape({}, cat), args({minimal_root(), {"--unshare-user", "--unshare-net", "--proc", "/proc"}, no_caps(), cat})};
    if (is_root())
        modes.push_back(shape({}, cat, false));
    for (const auto& options : modes) {
        Result r = cocoon(options);
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "cat 0\n") << r.err;
    }
}

// A fork bomb stops at RLIMIT_NPROC, which the kernel counts per user and per user namespace (the
// count is charged to the user's ucounts in each namespace up to the initial one). A process whose
// real uid is the host's uid 0 is exempt from it in any user namespace and without capabilities
// (tried: `prlimit --nproc=64 cocoon --unshare-all --cap-drop ALL` forked 2000 of 2000), and this
// host has no cgroup v2 pids controller, so nothing here bounds a root caller's fork bomb.
TEST_F(Escape, AForkBombStopsAtTheProcessLimit)
{
    if (is_root())
        GTEST_SKIP() << "the host's uid 0 is exempt from RLIMIT_NPROC even in a user namespace without "
                        "capabilities, and this host has no cgroup v2 pids controller (a root caller bounds a "
                        "sandbox with --pids-max where it has one)";
    // The limit counts every process of this uid on the host, so it is set above what runs now.
    long running = 0;
    for (const auto& entry : lines(run({"/bin/sh", "-c", "ps -u $(id -u) -o pid= | wc -l"}).out))
        running = std::stol(entry);
    const long headroom = 64;
    const std::string script = "exec /usr/bin/prlimit --nproc=" + std::to_string(running + headroom) + " '" +
                               cocoon_bin() + "'" + quoted(shape({}, {"/probe", "forkbomb", "2000"}));
    Result r = run({"/bin/sh", "-c", script}, "", 30000);
    ASSERT_TRUE(contains(r.out, " then EAGAIN\n")) << r.out << r.err;
    const long forked = std::stol(r.out.substr(r.out.find("forked ") + 7));
    // The uid's other processes on the host come and go meanwhile (ctest runs tests in parallel),
    // so the bound is checked with slack: without a limit the probe forks all 2000.
    EXPECT_LE(forked, 2 * headroom) << r.out;
    EXPECT_GT(forked, 0) << r.out;
}

// A root caller's command runs as the host's uid 0 over the worktree: a setuid bit or a file
// capability it leaves there grants root to whoever runs the file later. With --cap-drop ALL
// (and the default seccomp policy, for the owner's chmod) each way is refused.
TEST_F(Escape, LeavingASetuidOrCapableFileAsRoot)
{
    if (!is_root())
        GTEST_SKIP() << "an unprivileged caller's files are its own uid's on the host: a setuid bit grants nothing";
    write_file(m_worktree / "tool", "#!/bin/sh\n", 0755);
    auto got = attempt({"setid", "/wt/tool"});
    EXPECT_EQ(got["chmod_suid"], "EPERM");
    EXPECT_EQ(got["setxattr_capability"], "EPERM");
    // The sandbox's user namespace maps one uid (root's): there is no other owner to give it to.
    EXPECT_EQ(got["chown_other"], "EINVAL");
    struct stat st {};
    ASSERT_EQ(::stat((m_worktree / "tool").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755U);
    EXPECT_EQ(st.st_uid, 0U);
    char value[64];
    EXPECT_LT(::getxattr((m_worktree / "tool").c_str(), "security.capability", value, sizeof value), 0);
}

// A setuid-root program of the host's /usr copied up by the kernel into the worktree, through an
// overlay the command mounts in a user namespace of its own: the copy keeps the mode, and no filter
// sees a copy-up. A namespace that maps uid 0 needs CAP_SETFCAP in the sandbox (Linux 5.12), which
// --cap-drop ALL took away; an unprivileged caller maps its own uid, which owns no such file, and
// the kernel copies up no file whose owner is unmapped. (A root caller keeping its capabilities
// can: SECURITY.md, "A root caller that keeps capabilities".)
TEST_F(Escape, PlantingASetuidFileThroughAnOverlayCopyUp)
{
    std::string name;
    for (const auto& entry : std::filesystem::directory_iterator("/usr/bin")) {
        struct stat st {};
        if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & S_ISUID) &&
            st.st_uid == 0) {
            name = entry.path().filename();
            break;
        }
    }
    if (name.empty())
        GTEST_SKIP() << "no setuid-root program in this host's /usr/bin to copy up";
    auto got = attempt({"overlay", "/usr/bin", name, "/wt"});
    EXPECT_EQ(got["mkdir"], "ok");
    if (is_root())
        EXPECT_EQ(got["uid_map"], "EPERM");
    else
        EXPECT_EQ(got["uid_map"], "ok");
    EXPECT_NE(got["copy_up"], "ok");
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             m_worktree.path(), std::filesystem::directory_options::skip_permission_denied)) {
        struct stat st {};
        ASSERT_EQ(::lstat(entry.path().c_str(), &st), 0) << entry.path();
        EXPECT_EQ(st.st_mode & (S_ISUID | S_ISGID), 0U) << entry.path();
    }
}

}  // namespace
}  // namespace cocoon::test
