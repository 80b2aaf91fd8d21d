// End-to-end checks of the namespace-joining options --userns, --userns2 and
// --pidns: real sandboxes join namespaces that a helper process of the test
// holds, negatives leave nothing behind, and /usr/bin/bwrap is run on the
// same command lines where it can be. Runs as the test's caller (root or not).
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/support/bwrap.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Opens fd without O_CLOEXEC, so run() hands it to cocoon at the same number.
UniqueFd open_inherited(const std::string& path)
{
    UniqueFd fd(::open(path.c_str(), O_RDONLY));
    if (!fd)
        throw std::runtime_error(path + ": " + std::strerror(errno));
    return fd;
}

void write_proc(const char* path, const std::string& data)
{
    int fd = ::open(path, O_WRONLY);
    if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
        ::_exit(2);
    ::close(fd);
}

// A helper process that makes namespaces and holds them until destroyed:
// a user namespace mapping root to the caller (unless `user` is false), with
// `nested` a second one inside it, and with `pid` a PID namespace (owned by
// the user namespace) whose init is a child of the helper.
class NsHolder {
public:
    NsHolder(bool user, bool nested, bool pid)
    {
        const std::string uid_map = "0 " + std::to_string(::getuid()) + " 1\n";
        const std::string gid_map = "0 " + std::to_string(::getgid()) + " 1\n";
        int ready[2];
        if (::pipe2(ready, O_CLOEXEC) < 0)
            throw std::runtime_error("pipe2");
        m_pid = ::fork();
        if (m_pid == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (user) {
                if (::unshare(CLONE_NEWUSER) < 0)
                    ::_exit(2);
                write_proc("/proc/self/uid_map", uid_map);
                write_proc("/proc/self/setgroups", "deny");
                write_proc("/proc/self/gid_map", gid_map);
            }
            if (nested) {
                if (::unshare(CLONE_NEWUSER) < 0)
                    ::_exit(2);
                write_proc("/proc/self/uid_map", "0 0 1\n");
                write_proc("/proc/self/setgroups", "deny");
                write_proc("/proc/self/gid_map", "0 0 1\n");
            }
            pid_t holder = ::getpid();
            if (pid) {
                if (::unshare(CLONE_NEWPID) < 0)
                    ::_exit(2);
                // The holder says when its death signal is set: a test that ends before (under
                // load) would otherwise kill this process first and leave the holder, the new
                // namespace's init, pausing for ever with the test's output pipe open.
                int armed[2];
                if (::pipe2(armed, O_CLOEXEC) < 0)
                    ::_exit(2);
                holder = ::fork();
                if (holder == 0) {
                    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
                    if (::write(armed[1], "", 1) != 1)
                        ::_exit(2);
                    for (;;)
                        ::pause();
                }
                char byte;
                if (holder < 0 || ::read(armed[0], &byte, 1) != 1)
                    ::_exit(2);
            }
            if (::write(ready[1], &holder, sizeof holder) != sizeof holder)
                ::_exit(2);
            for (;;)
                ::pause();
        }
        ::close(ready[1]);
        UniqueFd ready_read(ready[0]);
        if (::read(ready_read.get(), &m_holder, sizeof m_holder) != sizeof m_holder)
            throw std::runtime_error("the namespace holder failed");
    }

    ~NsHolder()
    {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }

    // An fd (inherited by run()) for /proc/HOLDER/ns/<name>.
    UniqueFd open(const std::string& name) const
    {
        return open_inherited("/proc/" + std::to_string(m_holder) + "/ns/" + name);
    }

private:
    pid_t m_pid = -1;
    pid_t m_holder = -1;
};

std::string fd_text(const UniqueFd& fd)
{
    return std::to_string(fd.get());
}

// Prints the inode of each /proc/self/ns entry named, one a line.
std::vector<std::string> print_inodes(const std::string& names, const std::string& more = "")
{
    return sh("for n in " + names + "; do stat -L -c %i /proc/self/ns/$n; done" + more);
}

// Shell that prints "fd-open" if fd is open in the command.
std::string fd_open_test(int fd)
{
    return "(exec 2>&-; true <&" + std::to_string(fd) + ") && echo fd-open; true";
}

// Every test starts from a snapshot of the host and checks in TearDown that
// no sandbox process or mount was left behind.
class JoinNs : public ::testing::Test {
protected:
    void TearDown() override { m_host.expect_unchanged(); }

    // cocoon with a minimal root, a marker in its command line (for
    // processes_with) and a /proc of a new PID namespace unless told not to.
    Result sandbox(const std::vector<std::string>& options, const std::vector<std::string>& command)
    {
        return cocoon(args({minimal_root(), m_host.mark(), options, command}));
    }

    const HostSnapshot m_host{"cocoon-join-ns"};
};

// --- --userns ---

TEST_F(JoinNs, UsernsCommandRunsInTheGivenNamespace)
{
    NsHolder holder(true, false, false);
    UniqueFd user = holder.open("user");
    Result r = sandbox({"--userns", fd_text(user), "--unshare-pid", "--proc", "/proc"},
                       print_inodes("user", "; id -u; " + fd_open_test(user.get())));
    ASSERT_EQ(r.code, 0) << r.err;
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 2u) << r.out;  // no "fd-open": the fd stays out of the command
    EXPECT_EQ(l[0], inode_of(user.get()));
    EXPECT_EQ(l[1], "0");  // the holder maps root to us

    // Control: without --userns the sandbox has a namespace of its own.
    Result own = sandbox({"--unshare-user", "--unshare-pid", "--proc", "/proc"}, print_inodes("user"));
    ASSERT_EQ(own.code, 0) << own.err;
    EXPECT_NE(own.out, inode_of(user.get()) + "\n");
}

// The sandbox's new namespaces belong to the joined user namespace: the
// command, given CAP_SYS_ADMIN there, may set the hostname of its UTS
// namespace, which it could not if cocoon had made that namespace first.
TEST_F(JoinNs, UsernsOwnsTheNewNamespaces)
{
    NsHolder holder(true, false, false);
    UniqueFd user = holder.open("user");
    Result r = sandbox({"--userns", fd_text(user), "--unshare-uts", "--unshare-net", "--unshare-ipc", "--hostname",
                        "set-by-cocoon", "--cap-add", "CAP_SYS_ADMIN"},
                       sh("hostname; hostname set-by-command && hostname"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "set-by-cocoon\nset-by-command\n");
}

TEST_F(JoinNs, UsernsWithUidSwitchesInsideIt)
{
    NsHolder holder(true, false, false);
    UniqueFd user = holder.open("user");
    Result r = sandbox({"--userns", fd_text(user), "--uid", "0", "--gid", "0"}, sh("id -u; id -g"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "0\n0\n");
    // Only root is mapped there.
    expect_refused(sandbox({"--userns", fd_text(user), "--uid", "3"}, {"true", m_host.marker()}),
                   {"unable to switch to uid 3"});
}

// --- --pidns ---

TEST_F(JoinNs, PidnsCommandRunsInTheGivenNamespace)
{
    NsHolder holder(true, false, true);
    UniqueFd user = holder.open("user"), pid = holder.open("pid");
    Result r = sandbox({"--userns", fd_text(user), "--pidns", fd_text(pid), "--proc", "/proc"},
                       print_inodes("pid", "; echo $$; " + fd_open_test(pid.get())));
    ASSERT_EQ(r.code, 0) << r.err;
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 2u) << r.out;
    EXPECT_EQ(l[0], inode_of(pid.get()));
    EXPECT_NE(l[1], "1");  // the holder's child is that namespace's init
}

// With --unshare-pid too, the sandbox gets a PID namespace of its own (nested
// in the given one, which bwrap's run of the same line below agrees with).
TEST_F(JoinNs, PidnsWithUnsharePidMakesANewNamespace)
{
    NsHolder holder(true, false, true);
    UniqueFd user = holder.open("user"), pid = holder.open("pid");
    Result r = sandbox({"--userns", fd_text(user), "--pidns", fd_text(pid), "--unshare-pid", "--proc", "/proc"},
                       print_inodes("pid", "; echo $$"));
    ASSERT_EQ(r.code, 0) << r.err;
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 2u) << r.out;
    EXPECT_NE(l[0], inode_of(pid.get()));
    EXPECT_EQ(l[1], "2");  // cocoon's reaper is PID 1
}

// A PID namespace owned by another user namespace: root may join it (it
// holds CAP_SYS_ADMIN over every namespace), an unprivileged caller only from
// inside that user namespace (--userns).
TEST_F(JoinNs, PidnsWithoutUserns)
{
    NsHolder holder(true, false, true);
    UniqueFd pid = holder.open("pid");
    Result r = sandbox({"--pidns", fd_text(pid), "--proc", "/proc"}, print_inodes("pid", "; echo $$"));
    if (!is_root()) {
        expect_refused(r, {"--pidns " + fd_text(pid), "Operation not permitted"});
        return;
    }
    ASSERT_EQ(r.code, 0) << r.err;
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 2u) << r.out;
    EXPECT_EQ(l[0], inode_of(pid.get()));
    EXPECT_NE(l[1], "1");
    // A PID namespace nested in it must belong to its owner or below: root's
    // own user namespace is above, so the kernel refuses.
    expect_refused(sandbox({"--pidns", fd_text(pid), "--unshare-pid"}, {"true", m_host.marker()}),
                   {"--pidns " + fd_text(pid), "--userns", "Invalid argument"});
}

// --- --userns2 ---

TEST_F(JoinNs, Userns2SwitchesAfterSetup)
{
    NsHolder holder(true, true, false);
    UniqueFd inner = holder.open("user");
    UniqueFd outer(::ioctl(inner.get(), NS_GET_PARENT));
    ASSERT_TRUE(outer) << std::strerror(errno);
    // NS_GET_PARENT's fd is CLOEXEC; run() needs it inherited.
    UniqueFd outer_fd(::fcntl(outer.get(), F_DUPFD, 3));
    ASSERT_NE(inode_of(outer_fd.get()), inode_of(inner.get()));

    const std::vector<std::string> base = {"--userns", fd_text(outer_fd), "--unshare-pid", "--proc", "/proc"};
    Result setup = sandbox(base, print_inodes("user"));
    ASSERT_EQ(setup.code, 0) << setup.err;
    EXPECT_EQ(setup.out, inode_of(outer_fd.get()) + "\n");

    Result r =
        sandbox(args({base, {"--userns2", fd_text(inner)}}), print_inodes("user", "; " + fd_open_test(inner.get())));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, inode_of(inner.get()) + "\n");

    // The namespace used for setup is not below itself.
    expect_refused(sandbox(args({base, {"--userns2", fd_text(outer_fd)}}), {"true", m_host.marker()}),
                   {"--userns2 " + fd_text(outer_fd), "Invalid argument"});
}

// --- refusals: exit 1, one line, nothing left behind ---

TEST_F(JoinNs, WrongTypeOrClosedFds)
{
    NsHolder holder(true, false, true);
    UniqueFd user = holder.open("user"), pid = holder.open("pid");
    UniqueFd file = open_inherited("/proc/self/status");
    int closed = 20;
    while (::fcntl(closed, F_GETFD) >= 0)
        ++closed;
    const std::string closed_text = std::to_string(closed);
    for (const char* option : {"--userns", "--userns2"}) {
        SCOPED_TRACE(option);
        expect_refused(sandbox({option, fd_text(pid)}, {"true", m_host.marker()}),
                       {std::string(option) + " " + fd_text(pid), "not a user namespace"});
        expect_refused(sandbox({option, fd_text(file)}, {"true", m_host.marker()}),
                       {std::string(option) + " " + fd_text(file), "not a user namespace"});
        expect_refused(sandbox({option, closed_text}, {"true", m_host.marker()}),
                       {std::string(option) + " " + closed_text, "Bad file descriptor"});
    }
    expect_refused(sandbox({"--pidns", fd_text(user)}, {"true", m_host.marker()}),
                   {"--pidns " + fd_text(user), "not a PID namespace"});
    expect_refused(sandbox({"--pidns", closed_text}, {"true", m_host.marker()}),
                   {"--pidns " + closed_text, "Bad file descriptor"});
}

TEST_F(JoinNs, ForbiddenCombinations)
{
    NsHolder holder(true, false, false);
    UniqueFd user = holder.open("user");
    const std::string fd = fd_text(user);
    expect_refused(sandbox({"--userns", fd, "--unshare-user"}, {"true", m_host.marker()}),
                   {"--userns not compatible --unshare-user"});
    expect_refused(sandbox({"--userns", fd, "--unshare-all"}, {"true", m_host.marker()}),
                   {"--userns not compatible --unshare-user-try"});
    expect_refused(sandbox({"--userns", fd, "--userns-block-fd", fd, "--info-fd", "1"}, {"true", m_host.marker()}),
                   {"--userns-block-fd requires --unshare-user"});
    // Joining the caller's own user namespace would regain capabilities there.
    UniqueFd own = open_inherited("/proc/self/ns/user");
    expect_refused(sandbox({"--userns", fd_text(own)}, {"true", m_host.marker()}),
                   {"--userns " + fd_text(own), "Invalid argument"});
}

// --- the same command lines under /usr/bin/bwrap ---

class JoinNsBwrap : public JoinNs {
protected:
    void SetUp() override
    {
        if (std::string why = bwrap_unusable(); !why.empty())
            GTEST_SKIP() << why;
    }

    static Result bwrap(const std::vector<std::string>& options, const std::vector<std::string>& command)
    {
        return run(args({{kBwrap}, minimal_root(), options, command}));
    }
};

TEST_F(JoinNsBwrap, SameNamespacesAsBwrap)
{
    NsHolder holder(true, false, true);
    UniqueFd user = holder.open("user"), pid = holder.open("pid");
    const std::vector<std::vector<std::string>> cases = {
        {"--userns", fd_text(user), "--unshare-pid", "--proc", "/proc"},
        {"--userns", fd_text(user), "--pidns", fd_text(pid), "--proc", "/proc"},
        {"--userns", fd_text(user), "--pidns", fd_text(pid), "--unshare-pid", "--proc", "/proc"},
    };
    for (const auto& options : cases) {
        SCOPED_TRACE(options[2] + " " + options.back());
        // PIDs and new namespaces' inodes differ: whether the PID namespace
        // is the given one, and whether the command is its PID 1, do not.
        const auto command = print_inodes("user", "; [ $(stat -L -c %i /proc/self/ns/pid) = " + inode_of(pid.get()) +
                                                      " ] && echo joined-pidns; [ $$ = 1 ] && echo pid-1; id -u");
        Result c = sandbox(options, command), b = bwrap(options, command);
        ASSERT_EQ(c.code, 0) << c.err;
        EXPECT_EQ(c.code, b.code) << b.err;
        EXPECT_EQ(c.out, b.out);
    }
}

TEST_F(JoinNsBwrap, SameRefusalsAsBwrap)
{
    NsHolder holder(true, false, false);
    UniqueFd user = holder.open("user");
    for (const char* other : {"--unshare-user", "--unshare-user-try"}) {
        Result c = sandbox({"--userns", fd_text(user), other}, {"true"});
        Result b = bwrap({"--userns", fd_text(user), other}, {"true"});
        EXPECT_EQ(c.code, 1);
        EXPECT_EQ(b.code, 1);
        // Same text after the program's name.
        EXPECT_EQ(c.err.substr(c.err.find(':')), b.err.substr(b.err.find(':'))) << c.err << b.err;
    }
    // Wrong types: bwrap leaves it to setns (and, for --userns2 and
    // --pidns, hangs after the failure here), so only --userns is compared.
    UniqueFd file = open_inherited("/proc/self/status");
    Result c = sandbox({"--userns", fd_text(file)}, {"true"});
    Result b = bwrap({"--userns", fd_text(file)}, {"true"});
    EXPECT_EQ(c.code, 1) << c.err;
    EXPECT_EQ(b.code, 1) << b.err;
}

}  // namespace
}  // namespace cocoon::test
