// Tries what cocoon's default seccomp policy refuses, from inside a sandbox, and prints one line
// per attempt: "NAME ok" or "NAME E<errno name>". Static, so it runs in any sandbox layout.
//
// usage: cocoon_seccomp_probe calls            the refused calls, one line each ("keyctl_i386
//                                              SIGSEGV" where the host has no int $0x80)
//        cocoon_seccomp_probe i386             exits 0 if int $0x80 (the i386 ABI) works here
//        cocoon_seccomp_probe setid DIR SUID   makes setuid/setgid or capable files in DIR, one line
//                                              per way; SUID: a setuid file on a tmpfs to move in
//        cocoon_seccomp_probe tiocsti          TIOCSTI and TIOCLINUX on stdin (a terminal), made
//                                              the controlling terminal of a new session first
//        cocoon_seccomp_probe terminal         breaks stdin's terminal (and /dev/console) every way,
//                                              puts it in raw mode; reports on stderr
//        cocoon_seccomp_probe keyring ID       the session keyring's id, and whether key ID reads
//        cocoon_seccomp_probe plant            adds a key to the session keyring, prints its id
//        cocoon_seccomp_probe hostkey CMD...   (outside) joins a new session keyring, adds a key,
//                                              and runs CMD with COCOON_KEY set to its id
#include <fcntl.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <signal.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

const char* errno_name(int err)
{
    switch (err) {
    case EPERM:
        return "EPERM";
    case EACCES:
        return "EACCES";
    case EINVAL:
        return "EINVAL";
    case EFAULT:
        return "EFAULT";
    case ENOSYS:
        return "ENOSYS";
    case EIO:
        return "EIO";
    case ENOKEY:
        return "ENOKEY";
    case EBADF:
        return "EBADF";
    case ENOTTY:
        return "ENOTTY";
    case EAFNOSUPPORT:
        return "EAFNOSUPPORT";
    case ENODEV:
        return "ENODEV";
    case ENOENT:
        return "ENOENT";
    case EOPNOTSUPP:
        return "EOPNOTSUPP";
    case ESRCH:
        return "ESRCH";
    case EXDEV:
        return "EXDEV";
    case EEXIST:
        return "EEXIST";
    case EBUSY:
        return "EBUSY";
    case ENXIO:
        return "ENXIO";
    case EROFS:
        return "EROFS";
    case ENODATA:
        return "ENODATA";
    default:
        return "E?";
    }
}

void report(const char* name, long rc)
{
    if (rc < 0)
        std::printf("%s %s\n", name, errno_name(errno));
    else
        std::printf("%s ok\n", name);
}

// keyctl through the i386 ABI (int $0x80 from a 64-bit process: the kernel runs it as a 32-bit
// call, and seccomp sees AUDIT_ARCH_I386). 288 is keyctl there; returns -errno or the result.
long keyctl_i386(long op, long arg)
{
    long ret;
    asm volatile("int $0x80" : "=a"(ret) : "a"(288L), "b"(op), "c"(arg) : "memory");
    return ret;
}

// keyctl_i386 in a child of its own: a host may have no i386 ABI for int $0x80 (a PVM guest
// answers it with SIGSEGV, outside any sandbox too), and the other calls must still run.
void report_keyctl_i386()
{
    pid_t pid = ::fork();
    if (pid == 0) {
        long r = keyctl_i386(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING);
        ::_exit(r < 0 ? static_cast<int>(-r) : 0);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) != pid)
        return report("keyctl_i386", -1);
    if (WIFSIGNALED(status))
        std::printf("keyctl_i386 SIG%s\n", sigabbrev_np(WTERMSIG(status)));
    else if (int err = WEXITSTATUS(status)) {
        errno = err;
        report("keyctl_i386", -1);
    } else {
        report("keyctl_i386", 0);
    }
}

int calls()
{
    report("keyctl", syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
    report("add_key", syscall(SYS_add_key, "user", "cocoon-probe", "x", 1, KEY_SPEC_SESSION_KEYRING));
    report("request_key", syscall(SYS_request_key, "user", "cocoon-probe", nullptr, 0));
    report_keyctl_i386();
    report("bpf", syscall(SYS_bpf, 0, nullptr, 0));
    report("perf_event_open", syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, 0));
    report("io_uring_setup", syscall(SYS_io_uring_setup, 1, nullptr));
    report("kexec_load", syscall(SYS_kexec_load, 0, 0, nullptr, 0));
    report("init_module", syscall(SYS_init_module, nullptr, 0, ""));
    report("acct", syscall(SYS_acct, nullptr));
    report("swapoff", syscall(SYS_swapoff, "/nonexistent"));
    report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, nullptr, O_RDONLY));
    report("syslog", syscall(SYS_syslog, 10, nullptr, 0));  // SYSLOG_ACTION_SIZE_BUFFER
    int fd = ::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    report("vsock", fd);
    if (fd >= 0)
        ::close(fd);
    report("personality_query", syscall(SYS_personality, 0xffffffffUL));
    report("personality_bsd", syscall(SYS_personality, 0x0006UL));
    report("personality_read_implies_exec", syscall(SYS_personality, 0x0400000UL));
    report("personality_no_randomize", syscall(SYS_personality, 0x0040000UL));
    report("personality_linux", syscall(SYS_personality, 0UL));
    // The same with bits above the low 32 set, which the kernel ignores for these int arguments
    // (the filter must too). TIOCSTI on /dev/null: refused by the policy before the kernel looks
    // at the fd, ENOTTY without it (never a real terminal's queue). fchmod on a memfd: a regular
    // file of the command's own.
    constexpr unsigned long kHigh = 1UL << 32;
    int vs = static_cast<int>(syscall(SYS_socket, kHigh | AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0));
    report("vsock_high_bits", vs);
    if (vs >= 0)
        ::close(vs);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    char c = '#';
    report("tiocsti_high_bits", null >= 0 ? syscall(SYS_ioctl, null, kHigh | TIOCSTI, &c) : -1);
    if (null >= 0)
        ::close(null);
    report("personality_bsd_high_bits", syscall(SYS_personality, kHigh | 0x0006UL));
    report("personality_linux_high_bits", syscall(SYS_personality, kHigh | 0UL));
    int mfd = static_cast<int>(syscall(SYS_memfd_create, "cocoon-probe", MFD_CLOEXEC));
    report("fchmod_suid_high_bits", mfd >= 0 ? syscall(SYS_fchmod, mfd, kHigh | 04755) : -1);
    report("fchmod_plain_high_bits", mfd >= 0 ? syscall(SYS_fchmod, mfd, kHigh | 0700) : -1);
    if (mfd >= 0)
        ::close(mfd);
    return 0;
}

// An O_TMPFILE file, linked into DIR as NAME where it was made (so the host would see it).
long tmpfile_linked(long fd, const std::string& dir, const char* name)
{
    if (fd < 0)
        return fd;
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    long rc = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, (dir + "/" + name).c_str(), AT_SYMLINK_FOLLOW);
    ::close(static_cast<int>(fd));
    return rc < 0 ? rc : 0;
}

long openat2_mode(const std::string& path, unsigned long flags, unsigned long mode)
{
    open_how how{};
    how.flags = flags | O_WRONLY | O_CLOEXEC;
    how.mode = mode;
    return syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
}

// struct xattr_args of setxattrat (Linux 6.13; glibc has no wrapper).
struct XattrArgs {
    uint64_t value;
    uint32_t size;
    uint32_t flags;
};
constexpr long kSetxattrat = 463;
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

// Tries every way to make a setuid or setgid file, or a file with capabilities, in DIR (a
// writable directory, a read-write bind of a host directory), one line per way. SUID names an
// existing setuid file on a tmpfs of the sandbox ("-" for none), to rename and link into DIR.
int setid(const std::string& dir, const std::string& suid)
{
    const std::string f = dir + "/plain";
    int fd = ::open(f.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
    report("create_plain", fd);
    report("chmod_suid", ::chmod(f.c_str(), 04755));
    report("chmod_sgid", ::chmod(f.c_str(), 02755));
    report("fchmod_suid", fd >= 0 ? ::fchmod(fd, 04755) : -1);
    report("fchmod_sgid", fd >= 0 ? ::fchmod(fd, 02755) : -1);
    report("fchmodat_suid", ::fchmodat(AT_FDCWD, f.c_str(), 04755, 0));
    report("fchmodat_sgid", ::fchmodat(AT_FDCWD, f.c_str(), 02755, 0));
    report("fchmodat2_suid", syscall(SYS_fchmodat2, AT_FDCWD, f.c_str(), 04755, 0));
    report("fchmodat2_sgid", syscall(SYS_fchmodat2, AT_FDCWD, f.c_str(), 02755, 0));
    report("open_creat_suid", ::open((dir + "/open_suid").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
    report("open_creat_sgid", ::open((dir + "/open_sgid").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 02755));
    report("openat_creat_suid",
           ::openat(AT_FDCWD, (dir + "/openat_suid").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
    report("openat_creat_sgid",
           ::openat(AT_FDCWD, (dir + "/openat_sgid").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 02755));
    report("open_tmpfile_suid",
           tmpfile_linked(syscall(SYS_open, dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 04755), dir, "tmp_suid"));
    report("openat_tmpfile_sgid",
           tmpfile_linked(::openat(AT_FDCWD, dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 02755), dir, "tmp_sgid"));
    report("creat_suid", syscall(SYS_creat, (dir + "/creat_suid").c_str(), 04755));
    report("creat_sgid", syscall(SYS_creat, (dir + "/creat_sgid").c_str(), 02755));
    report("openat2_creat_suid", openat2_mode(dir + "/openat2_suid", O_CREAT, 04755));
    report("openat2_creat_sgid", openat2_mode(dir + "/openat2_sgid", O_CREAT, 02755));
    report("openat2_tmpfile_suid", tmpfile_linked(openat2_mode(dir, O_TMPFILE, 04755), dir, "openat2_tmp"));
    report("mknod_suid", ::mknod((dir + "/mknod_suid").c_str(), S_IFREG | 04755, 0));
    report("mknod_sgid", ::mknod((dir + "/mknod_sgid").c_str(), S_IFREG | 02755, 0));
    report("mknodat_suid", ::mknodat(AT_FDCWD, (dir + "/mknodat_suid").c_str(), S_IFREG | 04755, 0));
    report("mknodat_sgid", ::mknodat(AT_FDCWD, (dir + "/mknodat_sgid").c_str(), S_IFREG | 02755, 0));
    // An existing setuid file, from a tmpfs of the sandbox: a rename or link crosses mounts.
    if (suid != "-") {
        struct stat st {};
        report("tmpfs_suid_present", ::stat(suid.c_str(), &st) == 0 && (st.st_mode & S_ISUID) ? 0 : -1);
        report("link_from_tmpfs", ::link(suid.c_str(), (dir + "/linked").c_str()));
        report("renameat2_from_tmpfs",
               syscall(SYS_renameat2, AT_FDCWD, suid.c_str(), AT_FDCWD, (dir + "/renamed2").c_str(), 0));
        report("rename_from_tmpfs", ::rename(suid.c_str(), (dir + "/renamed").c_str()));
    }
    // File capabilities: a revision 2 value granting CAP_SETUID (bit 7), permitted and effective;
    // a revision 3 value, the same with root uid 0.
    const uint32_t v2[5] = {0x02000001, 1U << 7, 0, 0, 0};
    const uint32_t v3[6] = {0x03000001, 1U << 7, 0, 0, 0, 0};
    report("setxattr_capability", ::setxattr(f.c_str(), "security.capability", v2, sizeof v2, 0));
    report("lsetxattr_capability_v3", ::lsetxattr(f.c_str(), "security.capability", v3, sizeof v3, 0));
    report("fsetxattr_capability", fd >= 0 ? ::fsetxattr(fd, "security.capability", v2, sizeof v2, 0) : -1);
    XattrArgs xa{reinterpret_cast<uint64_t>(v2), sizeof v2, 0};
    report("setxattrat_capability",
           syscall(kSetxattrat, AT_FDCWD, f.c_str(), 0, "security.capability", &xa, sizeof xa));
    if (fd >= 0)
        ::close(fd);
    report("chmod_plain", ::chmod(f.c_str(), 0700));
    return 0;
}

int tiocsti()
{
    // A new session whose controlling terminal is stdin: then only the policy stands between the
    // command and the terminal's input queue (legacy_tiocsti permitting).
    pid_t child = ::fork();
    if (child == 0) {
        if (::setsid() < 0 || ::ioctl(0, TIOCSCTTY, 0) < 0) {
            std::printf("setup %s\n", errno_name(errno));
            std::fflush(stdout);
            ::_exit(1);
        }
        char c = '#';
        report("tiocsti", ::ioctl(0, TIOCSTI, &c));
        report("tiocsti_high_bits", syscall(SYS_ioctl, 0, TIOCSTI | 0x100000000UL, &c));
        char sub = 2;  // TIOCL_SETSEL's neighbour; any subcode: the request itself is refused
        report("tioclinux", ::ioctl(0, TIOCLINUX, &sub));
        std::fflush(stdout);
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

// What a command can do to the caller's terminal (stdin, and /dev/console where cocoon bound it):
// every request that would leave it broken, then what an interactive agent changes (raw mode,
// window size), then what those left, read back. Reports go to stderr: output to the terminal
// may be stopped by then.
int terminal()
{
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    // Opened first: exclusive mode would refuse the open.
    int console = ::open("/dev/console", O_RDWR | O_NOCTTY | O_CLOEXEC);
    report("console_open", console);
    termios t{};
    ::tcgetattr(STDIN_FILENO, &t);
    ::cfmakeraw(&t);
    report("tcsets_raw", ::tcsetattr(STDIN_FILENO, TCSANOW, &t));
    winsize size{11, 22, 0, 0};
    report("tiocswinsz", ::ioctl(STDIN_FILENO, TIOCSWINSZ, &size));
    report("tcflsh", ::tcflush(STDIN_FILENO, TCIOFLUSH));
    // The line discipline last: N_NULL takes no other request.
    auto attack = [](int fd, const std::string& prefix) {
        report((prefix + "tcooff").c_str(), ::ioctl(fd, TCXONC, TCOOFF));
        report((prefix + "tcooff_high_bits").c_str(), syscall(SYS_ioctl, fd, TCXONC | 0x100000000UL, TCOOFF));
        report((prefix + "tioccons").c_str(), ::ioctl(fd, TIOCCONS));
        report((prefix + "kdskbmode").c_str(), ::ioctl(fd, 0x4B45 /* KDSKBMODE */, 4 /* K_OFF */));
        report((prefix + "vt_activate").c_str(), ::ioctl(fd, 0x5606 /* VT_ACTIVATE */, 1));
        report((prefix + "tiocexcl").c_str(), ::ioctl(fd, TIOCEXCL));
        int discipline = 27;  // N_NULL: nothing typed reaches a reader, nothing written is shown
        report((prefix + "tiocsetd").c_str(), ::ioctl(fd, TIOCSETD, &discipline));
    };
    attack(STDIN_FILENO, "");
    if (console >= 0)
        attack(console, "console_");  // the same terminal: refused with the policy, else EINVAL
    // What is in force now, inside.
    termios now{};
    winsize now_size{};
    int discipline = -1, exclusive = -1;
    ::tcgetattr(STDIN_FILENO, &now);
    ::ioctl(STDIN_FILENO, TIOCGWINSZ, &now_size);
    ::ioctl(STDIN_FILENO, TIOCGETD, &discipline);
    ::ioctl(STDIN_FILENO, TIOCGEXCL, &exclusive);
    std::printf("inside_icanon %d\ninside_winsize %dx%d\ninside_ldisc %d\ninside_excl %d\n",
                (now.c_lflag & ICANON) ? 1 : 0, now_size.ws_row, now_size.ws_col, discipline, exclusive);
    return 0;
}

int keyring(const char* id_text)
{
    long own = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
    std::printf("session %ld\n", own);
    char buf[64];
    report("read_host_key", syscall(SYS_keyctl, KEYCTL_READ, std::strtol(id_text, nullptr, 10), buf, sizeof buf));
    return 0;
}

int plant()
{
    long id = syscall(SYS_add_key, "user", "cocoon-planted", "planted", 7, KEY_SPEC_SESSION_KEYRING);
    std::printf("planted %ld\n", id);
    return id < 0 ? 1 : 0;
}

int hostkey(char** argv)
{
    if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "cocoon-test-host") < 0) {
        std::printf("join %s\n", errno_name(errno));
        return 1;
    }
    long id = syscall(SYS_add_key, "user", "cocoon-host-secret", "s3cret", 6, KEY_SPEC_SESSION_KEYRING);
    long session = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
    if (id < 0 || session < 0) {
        std::printf("add_key %s\n", errno_name(errno));
        return 1;
    }
    std::printf("host key %ld session %ld\n", id, session);
    std::fflush(stdout);
    ::setenv("COCOON_KEY", std::to_string(id).c_str(), 1);
    pid_t child = ::fork();
    if (child == 0) {
        ::execv(argv[0], argv);
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    // After the sandbox: what the caller's session keyring holds.
    char list[4096];
    long n = syscall(SYS_keyctl, KEYCTL_READ, KEY_SPEC_SESSION_KEYRING, list, sizeof list);
    std::printf("host session keys %ld\n", n < 0 ? -1 : n / 4);
    for (long i = 0; i + 4 <= n && i < static_cast<long>(sizeof list); i += 4) {
        int32_t key;
        std::memcpy(&key, list + i, 4);
        std::printf("host session has %d\n", key);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

int main(int argc, char** argv)
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "calls")
        return calls();
    if (mode == "tiocsti")
        return tiocsti();
    if (mode == "terminal")
        return terminal();
    if (mode == "i386")
        return keyctl_i386(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING) < 0;
    if (mode == "setid" && argc > 3)
        return setid(argv[2], argv[3]);
    if (mode == "keyring" && argc > 2)
        return keyring(argv[2]);
    if (mode == "plant")
        return plant();
    if (mode == "hostkey" && argc > 2)
        return hostkey(argv + 2);
    std::fprintf(stderr, "usage: %s calls|i386|tiocsti|terminal|keyring ID|plant|hostkey CMD...\n", argv[0]);
    return 2;
}
