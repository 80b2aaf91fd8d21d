// The default seccomp policy and the session keyring, tried from inside real sandboxes (as root
// and unprivileged): each refused call fails with EPERM, and with --no-default-seccomp the same
// call gets past the policy (so the EPERM was the policy's). The probe (tests/e2e/probe/
// seccomp_probe.cc) makes the calls.
#include <fcntl.h>
#include <sys/stat.h>
#include <seccomp.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "base/unique_fd.h"
#include "tests/support/process.h"

namespace cocoon::test {
namespace {

std::string seccomp_probe()
{
    return sibling_binary("cocoon_seccomp_probe");
}

std::vector<std::string> sandbox(const std::vector<std::string>& extra = {})
{
    return args({minimal_root(),
                 {"--unshare-all", "--proc", "/proc", "--dev", "/dev", "--ro-bind", seccomp_probe(), "/probe"},
                 no_caps(),
                 extra});
}

// Whether int $0x80 (the i386 ABI of a 64-bit process) works on this host, outside any
// sandbox: a PVM guest answers it with SIGSEGV, and there the policy's i386 rules cannot be
// reached by any test (they come from the same rules as x86_64's; ns/setup/seccomp_gen.cc).
bool i386_abi_works()
{
    static const bool works = [] {
        const bool ok = run({seccomp_probe(), "i386"}).code == 0;
        if (!ok)
            std::printf("note: int $0x80 ends in SIGSEGV on this host, outside any sandbox too: the i386 "
                        "ABI cannot be tried here\n");
        return ok;
    }();
    return works;
}

// keyctl through the i386 ABI: `want` where the host has that ABI, else the host's SIGSEGV.
std::string keyctl_i386_should_be(const std::string& want)
{
    return i386_abi_works() ? want : "SIGSEGV";
}

class DefaultPolicy : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(::access(seccomp_probe().c_str(), X_OK), 0) << seccomp_probe() << " is missing"; }
};

TEST_F(DefaultPolicy, RefusedCallsFailWithEperm)
{
    Result r = cocoon(args({sandbox(), {"/probe", "calls"}}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto got = results(r.out);
    EXPECT_EQ(got["keyctl_i386"], keyctl_i386_should_be("EPERM")) << r.out;
    for (const char* name : {"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
                             "io_uring_setup", "kexec_load", "init_module", "acct", "swapoff", "open_by_handle_at",
                             "syslog", "vsock", "personality_bsd", "personality_read_implies_exec"})
        EXPECT_EQ(got[name], "EPERM") << name << "\n" << r.out;
    // The same with bit 32 set in the compared argument: the kernel reads an int's low 32 bits, so
    // the filter does (socket((1UL << 32) | AF_VSOCK) is a vsock socket).
    for (const char* name :
         {"vsock_high_bits", "tiocsti_high_bits", "personality_bsd_high_bits", "fchmod_suid_high_bits"})
        EXPECT_EQ(got[name], "EPERM") << name << "\n" << r.out;
    // What stays: the Linux persona, its query, and ADDR_NO_RANDOMIZE (gdb); a plain fchmod.
    for (const char* name : {"personality_query", "personality_no_randomize", "personality_linux",
                             "personality_linux_high_bits", "fchmod_plain_high_bits"})
        EXPECT_EQ(got[name], "ok") << name << "\n" << r.out;
}

// The control: without the policy the kernel itself allows these (so the EPERM above was the
// policy's), for root with --cap-drop ALL and for an unprivileged caller alike.
TEST_F(DefaultPolicy, WithoutThePolicyTheKernelAllowsThem)
{
    Result r = cocoon(args({sandbox({"--no-default-seccomp"}), {"/probe", "calls"}}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto got = results(r.out);
    EXPECT_EQ(got["keyctl_i386"], keyctl_i386_should_be("ok")) << r.out;
    for (const char* name : {"keyctl", "add_key", "personality_bsd", "personality_read_implies_exec",
                             "personality_bsd_high_bits", "fchmod_suid_high_bits"})
        EXPECT_EQ(got[name], "ok") << name << "\n" << r.out;
    // The kernel itself: ENOTTY for /dev/null; vsock made, or refused for want of the module.
    EXPECT_EQ(got["tiocsti_high_bits"], "ENOTTY") << r.out;
    EXPECT_NE(got["vsock_high_bits"], "EPERM") << r.out;
    // These fail for another reason without the policy (no capability, bad arguments), never
    // with the policy's EPERM where the kernel answers otherwise.
    EXPECT_NE(got["io_uring_setup"], "EPERM") << r.out;
    EXPECT_NE(got["request_key"], "EPERM") << r.out;
}

// The ways the caller can run a command, each tried: a root caller keeping its capabilities (in a
// user namespace whose root is the host's root, and in none), root with --cap-drop ALL, an
// unprivileged caller with and without capabilities in its user namespace.
struct CallerMode {
    const char* name;
    std::vector<std::string> options;
};

std::vector<CallerMode> caller_modes()
{
    const std::vector<std::string> ns = {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"};
    if (is_root())
        return {{"root keeping capabilities, user namespace", args({ns, {"--unshare-user"}})},
                {"root keeping capabilities, no user namespace", ns},
                {"root --cap-drop ALL", args({ns, {"--unshare-user", "--cap-drop", "ALL"}})}};
    return {{"unprivileged", ns}, {"unprivileged --cap-add ALL", args({ns, {"--cap-add", "ALL"}})}};
}

// Runs the probe's setid attempts in a sandbox with `dir` bound read-write at /wt and a setuid
// file on the sandbox's /tmp (a tmpfs: --perms 04755 --file) to move in.
Result setid_attempts(const std::string& dir, const std::vector<std::string>& options)
{
    std::string script = "exec '" + cocoon_bin() + "'";
    for (const std::string& w :
         args({minimal_root(),
               {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--perms", "04755", "--file", "3", "/tmp/suid",
                "--ro-bind", seccomp_probe(), "/probe", "--bind", dir, "/wt"},
               options,
               {"/probe", "setid", "/wt", "/tmp/suid"}}))
        script += " '" + w + "'";
    script += " 3< /dev/null";
    return run({"/bin/sh", "-c", script});
}

// Every file under dir on the host with a setuid or setgid bit or a security.capability
// attribute, one line each.
std::string setid_or_capable_files(const std::string& dir)
{
    std::string found;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied)) {
        struct stat st {};
        if (::lstat(entry.path().c_str(), &st) != 0)
            continue;
        if (st.st_mode & (S_ISUID | S_ISGID))
            found += entry.path().string() + " mode " + std::to_string(st.st_mode) + "\n";
        char value[64];
        if (::lgetxattr(entry.path().c_str(), "security.capability", value, sizeof value) >= 0)
            found += entry.path().string() + " has security.capability\n";
    }
    return found;
}

// No system call makes a setuid or setgid file, or a file with capabilities, in a read-write bind
// of a host directory: for a root caller such a file is setuid-root (or capable) on the host, even
// with --cap-drop ALL. Each way, in every caller mode; then the host directory is looked at.
TEST_F(DefaultPolicy, NoSetidOrCapableFileReachesTheHost)
{
    const std::vector<std::string> eperm = {"chmod_suid",          "chmod_sgid",
                                            "fchmod_suid",         "fchmod_sgid",
                                            "fchmodat_suid",       "fchmodat_sgid",
                                            "fchmodat2_suid",      "fchmodat2_sgid",
                                            "open_creat_suid",     "open_creat_sgid",
                                            "openat_creat_suid",   "openat_creat_sgid",
                                            "open_tmpfile_suid",   "openat_tmpfile_sgid",
                                            "creat_suid",          "creat_sgid",
                                            "mknod_suid",          "mknod_sgid",
                                            "mknodat_suid",        "mknodat_sgid",
                                            "setxattr_capability", "lsetxattr_capability_v3",
                                            "fsetxattr_capability"};
    // openat2 and setxattrat carry the mode or value in memory: refused whole, as an old kernel.
    const std::vector<std::string> enosys = {"openat2_creat_suid", "openat2_creat_sgid", "openat2_tmpfile_suid",
                                             "setxattrat_capability"};
    const std::vector<std::string> exdev = {"link_from_tmpfs", "renameat2_from_tmpfs", "rename_from_tmpfs"};
    for (const CallerMode& mode : caller_modes()) {
        SCOPED_TRACE(mode.name);
        TempDir wt;
        ASSERT_EQ(::chmod(wt.path().c_str(), 0777), 0);
        Result r = setid_attempts(wt.path(), mode.options);
        ASSERT_EQ(r.code, 0) << r.out << r.err;
        auto got = results(r.out);
        for (const char* name : {"create_plain", "chmod_plain", "tmpfs_suid_present"})
            EXPECT_EQ(got[name], "ok") << name << "\n" << r.out;
        for (const std::string& way : eperm)
            EXPECT_EQ(got[way], "EPERM") << way << "\n" << r.out;
        for (const std::string& way : enosys)
            EXPECT_EQ(got[way], "ENOSYS") << way << "\n" << r.out;
        for (const std::string& way : exdev)
            EXPECT_EQ(got[way], "EXDEV") << way << "\n" << r.out;
        EXPECT_EQ(setid_or_capable_files(wt.path()), "");
        EXPECT_TRUE(exists(wt / "plain"));
    }
}

// The control: without the policy the same command leaves a setuid file on the host (by chmod
// and by openat2), so the test above can see one.
TEST_F(DefaultPolicy, WithoutThePolicyASetuidFileReachesTheHost)
{
    TempDir wt;
    ASSERT_EQ(::chmod(wt.path().c_str(), 0777), 0);
    const std::vector<std::string> options =
        is_root() ? std::vector<std::string>{"--unshare-user", "--cap-drop", "ALL", "--no-default-seccomp"}
                  : std::vector<std::string>{"--no-default-seccomp"};
    Result r = setid_attempts(wt.path(), options);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto got = results(r.out);
    EXPECT_EQ(got["chmod_suid"], "ok") << r.out;
    EXPECT_EQ(got["openat2_creat_suid"], "ok") << r.out;
    struct stat st {};
    ASSERT_EQ(::stat((wt / "openat2_suid").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 04755U);
    EXPECT_EQ(st.st_uid, ::getuid());
    EXPECT_NE(setid_or_capable_files(wt.path()), "");
}

// TIOCSTI on a terminal that is the command's controlling terminal: refused by the policy, also
// with bits above the low 32 set in the request (which the kernel ignores).
TEST_F(DefaultPolicy, TerminalInputInjectionIsRefused)
{
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(master, 0);
    UniqueFd m(master);
    ASSERT_EQ(::grantpt(master), 0);
    ASSERT_EQ(::unlockpt(master), 0);
    const std::string slave_path = ::ptsname(master);
    auto run_on_tty = [&](const std::vector<std::string>& extra) {
        Result r;
        std::string script = "exec '" + cocoon_bin() + "'";
        for (const std::string& w : args({sandbox(extra), {"/probe", "tiocsti"}}))
            script += " '" + w + "'";
        script += " < '" + slave_path + "'";
        return run({"/bin/sh", "-c", script});
    };
    Result on = run_on_tty({});
    EXPECT_EQ(on.code, 0) << on.out << on.err;
    auto got = results(on.out);
    EXPECT_EQ(got["tiocsti"], "EPERM") << on.out;
    EXPECT_EQ(got["tiocsti_high_bits"], "EPERM") << on.out;
    EXPECT_EQ(got["tioclinux"], "EPERM") << on.out;

    Result off = run_on_tty({"--no-default-seccomp"});
    EXPECT_EQ(off.code, 0) << off.out << off.err;
    auto control = results(off.out);
    // Without the policy the kernel decides: the byte is injected (ok), or dev.tty.legacy_tiocsti=0
    // refuses with EIO; TIOCLINUX is for virtual consoles only (ENOTTY/EINVAL on a pty).
    EXPECT_TRUE(control["tiocsti"] == "ok" || control["tiocsti"] == "EIO") << off.out;
    EXPECT_NE(control["tioclinux"], "EPERM") << off.out;
}

// The caller's terminal: a pty of the test's own, cocoon's stdin and stdout (so /dev/console is
// bound to it). What it was before the run.
struct TtyState {
    termios settings{};
    int discipline = -1;
    int exclusive = -1;
};

TtyState tty_state(int fd)
{
    TtyState s;
    EXPECT_EQ(::tcgetattr(fd, &s.settings), 0);
    EXPECT_EQ(::ioctl(fd, TIOCGETD, &s.discipline), 0);
    EXPECT_EQ(::ioctl(fd, TIOCGEXCL, &s.exclusive), 0);
    return s;
}

void expect_same_tty(const TtyState& a, const TtyState& b)
{
    EXPECT_EQ(a.settings.c_iflag, b.settings.c_iflag);
    EXPECT_EQ(a.settings.c_oflag, b.settings.c_oflag);
    EXPECT_EQ(a.settings.c_cflag, b.settings.c_cflag);
    EXPECT_EQ(a.settings.c_lflag, b.settings.c_lflag);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.settings.c_cc), sizeof a.settings.c_cc),
              std::string(reinterpret_cast<const char*>(b.settings.c_cc), sizeof b.settings.c_cc));
    EXPECT_EQ(a.discipline, b.discipline);
    EXPECT_EQ(a.exclusive, b.exclusive);
}

// Each way to leave the caller's terminal broken, tried from inside: those no agent needs are
// refused by the policy; with the policy off they take effect (the probe reads them back), and
// every one is undone when the sandbox ends: same settings, line discipline, not exclusive,
// output flowing (a write and a read through it work). Not the window size (ns/monitor/terminal.h).
TEST_F(DefaultPolicy, TheCallersTerminalIsAsItWasAfterTheRun)
{
    UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    ASSERT_TRUE(master);
    ASSERT_EQ(::grantpt(master.get()), 0);
    ASSERT_EQ(::unlockpt(master.get()), 0);
    const std::string slave_path = ::ptsname(master.get());
    UniqueFd slave(::open(slave_path.c_str(), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(slave);
    const TtyState before = tty_state(slave.get());
    ASSERT_NE(before.settings.c_lflag & ICANON, 0U);

    auto run_on_tty = [&](const std::vector<std::string>& extra) {
        std::string script = "exec '" + cocoon_bin() + "'";
        for (const std::string& w : args({sandbox(extra), {"/probe", "terminal"}}))
            script += " '" + w + "'";
        script += " < '" + slave_path + "' > '" + slave_path + "'";
        Result r = run({"/bin/sh", "-c", script});
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        return r;
    };
    auto usable_after = [&](const char* what) {
        SCOPED_TRACE(what);
        expect_same_tty(tty_state(slave.get()), before);
        // Output flows: written to the terminal, read from its master (a stopped terminal: EAGAIN).
        ASSERT_EQ(::write(slave.get(), "after\n", 6), 6) << std::strerror(errno);
        char buf[64] = {};
        ssize_t n = ::read(master.get(), buf, sizeof buf - 1);
        EXPECT_TRUE(n > 0 && contains(buf, "after")) << n << " " << buf;
        // Not exclusive: the terminal opens again.
        UniqueFd again(::open(slave_path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC));
        EXPECT_TRUE(again) << std::strerror(errno);
    };

    Result on = run_on_tty({});
    auto got = results(on.err);
    for (const char* name : {"tiocsetd", "tiocexcl", "tioccons", "kdskbmode", "vt_activate", "tcooff",
                             "tcooff_high_bits", "console_tiocsetd", "console_tiocexcl", "console_tcooff"})
        EXPECT_EQ(got[name], "EPERM") << name << "\n" << on.err;
    EXPECT_EQ(got["console_open"], "ok") << on.err;
    // What an interactive agent may change took effect inside, and is put back.
    EXPECT_EQ(got["tcsets_raw"], "ok") << on.err;
    EXPECT_EQ(got["tiocswinsz"], "ok") << on.err;
    EXPECT_EQ(got["inside_icanon"], "0") << on.err;
    usable_after("default policy");

    // Policy off: the kernel decides, and what it let through is put back. TIOCCONS needs
    // CAP_SYS_ADMIN of the host, KDSKBMODE and VT_ACTIVATE a virtual console: not asserted.
    Result off = run_on_tty({"--no-default-seccomp"});
    auto control = results(off.err);
    EXPECT_EQ(control["tiocsetd"], "ok") << off.err;
    EXPECT_EQ(control["tiocexcl"], "ok") << off.err;
    EXPECT_EQ(control["tcooff"], "ok") << off.err;
    EXPECT_EQ(control["inside_ldisc"], "27") << off.err;
    EXPECT_EQ(control["inside_excl"], "1") << off.err;
    EXPECT_EQ(control["inside_icanon"], "0") << off.err;
    usable_after("no default policy");
}

// A filter of the caller's (--seccomp) stacks on the policy: both hold.
TEST_F(DefaultPolicy, TheCallersFilterStacksOnIt)
{
    std::unique_ptr<void, decltype(&seccomp_release)> ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
    ASSERT_TRUE(ctx);
    ASSERT_EQ(seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(EACCES), SCMP_SYS(uname), 0), 0);
    // The probe also calls through the i386 ABI, which this filter (x86_64 only) would kill.
    ASSERT_EQ(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ALLOW), 0);
    TempDir dir;
    const std::string filter = dir / "filter.bpf";
    UniqueFd out(::open(filter.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_EQ(seccomp_export_bpf(ctx.get(), out.get()), 0);
    out.reset();
    std::string script = "exec '" + cocoon_bin() + "'";
    for (const std::string& w : args({sandbox({"--seccomp", "5"}), {"sh", "-c", "uname; echo uname=$?; /probe calls"}}))
        script += " '" + w + "'";
    script += " 5< '" + filter + "'";
    Result r = run({"/bin/sh", "-c", script});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "uname=1")) << r.out << r.err;
    EXPECT_TRUE(contains(r.err, "Permission denied")) << r.err;
    auto got = results(r.out);
    EXPECT_EQ(got["keyctl"], "EPERM") << r.out;
}

// The command runs under the policy once: PID 1 loads it before it forks the command where the
// first process waits for the monitor's message (ns/launch.cc, confined_before_fork), else the
// command loads it before its exec, and neither may load it twice. With --no-default-seccomp, no
// filter at all (TheCallersFilterStacksOnIt adds the caller's own).
TEST_F(DefaultPolicy, TheCommandRunsUnderThePolicyOnce)
{
    const std::string line =
        "while read -r k v; do [ \"$k\" = Seccomp_filters: ] && echo \"filters $v\"; done < /proc/self/status; true";
    for (const auto& [extra, want] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{}, "1"}, {{"--no-default-seccomp"}, "0"}, {{"--info-fd", "2"}, "1"}, {{"--as-pid-1"}, "1"}}) {
        Result r = cocoon(args({sandbox(extra), {"sh", "-c", line}}));
        ASSERT_EQ(r.code, 0) << spaced(extra) << ": " << r.out << r.err;
        EXPECT_EQ(results(r.out)["filters"], want) << spaced(extra) << ": " << r.out;
    }
}

// The caller's session keyring and its keys are out of reach (policy off, so keyctl itself runs),
// and a key planted inside does not outlive the sandbox in the caller's keyrings.
TEST_F(DefaultPolicy, TheCommandGetsANewEmptySessionKeyring)
{
    const std::string inner = "/probe keyring \"$COCOON_KEY\"; /probe plant";
    Result r =
        run(args({{seccomp_probe(), "hostkey", cocoon_bin()}, sandbox({"--no-default-seccomp"}), {"sh", "-c", inner}}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto got = results(r.out);
    // "host key ID session SID"
    const std::string host = got["host"];
    ASSERT_FALSE(host.empty()) << r.out;
    const std::string host_session = host.substr(host.rfind(' ') + 1);
    EXPECT_NE(got["session"], host_session) << r.out;
    EXPECT_NE(got["session"], "-1") << r.out;
    EXPECT_TRUE(got["read_host_key"] == "EACCES" || got["read_host_key"] == "ENOKEY") << r.out;
    ASSERT_TRUE(got.count("planted")) << r.out;
    const std::string planted = got["planted"];
    EXPECT_NE(planted, "-1") << r.out;
    // The caller's session keyring holds its own key only.
    EXPECT_TRUE(contains(r.out, "host session keys 1\n")) << r.out;
    EXPECT_FALSE(contains(r.out, "host session has " + planted + "\n")) << r.out;
}

}  // namespace
}  // namespace cocoon::test
