// Build-time generator of the relay worker's seccomp allowlist (relay/worker.h): prints the BPF
// as a C++ array for relay/worker.cc, so cocoon does not link libseccomp. Every call the worker's
// loop makes (the relay, the egress proxy, c-ares's thread, the allocator) and nothing else; any
// other call is not made and ends the worker, naming the call (another architecture's kills
// it); the sandbox runs on without its relay.
// Runs in: build.
#include <fcntl.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include <linux/filter.h>

namespace {

struct CtxDeleter {
    void operator()(void* ctx) const { seccomp_release(ctx); }
};

int fail(const char* what, int rc)
{
    std::fprintf(stderr, "cocoon_worker_seccomp_gen: %s: %s\n", what, std::strerror(-rc));
    return 1;
}

// Allowed whatever the arguments.
const char* const kCalls[] = {
    // I/O on the fds it holds
    "read",
    "write",
    "readv",
    "writev",
    "close",
    "fstat",
    "newfstatat",
    "statx",
    "lseek",
    "pipe2",
    "splice",
    // c-ares reads its copy of /etc/hosts in the worker's own empty root
    "openat",
    // sockets: on the ones it was handed (the listeners, what they accept, the monitor's
    // upstream and name-server sockets). Security: no socket(2), connect(2) nor bind(2): the
    // worker, in an empty network namespace, opens nothing; the monitor connects for it.
    "accept4",
    "getsockname",
    "getpeername",
    "getsockopt",
    "setsockopt",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    // waiting
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    "eventfd2",
    "futex",
    "nanosleep",
    "clock_nanosleep",
    "restart_syscall",
    "sched_yield",
    // time, identity, randomness
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "time",
    "getpid",
    "gettid",
    "getppid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getrandom",
    "uname",
    "getrlimit",
    "prlimit64",
    "sysinfo",
    // memory
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    // signals and the end (abort raises SIGABRT at itself)
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigaction",
    "tgkill",
    "exit",
    "exit_group",
    "set_robust_list",
    "rseq",
    // ASan's runtime: a thread's end takes its alternate signal stack down; it counts the CPUs
    "sigaltstack",
    "sched_getaffinity",
};

}  // namespace

int main()
{
    // A call outside the list is not made: SIGSYS, whose handler (relay/worker.cc) names the
    // call on stderr and ends the worker.
    std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_TRAP));
    if (!ctx)
        return fail("seccomp_init", -ENOMEM);
    // A binary tree of syscall numbers: every call the relay makes passes the filter.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0)
        return fail("seccomp_attr_set(SCMP_FLTATR_CTL_OPTIMIZE)", rc);
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS); rc < 0)
        return fail("seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)", rc);
    for (const char* name : kCalls) {
        const int nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR)
            return fail(name, -ENOSYS);
        if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, nr, 0); rc < 0)
            return fail(name, rc);
    }
    // fcntl(2), dup(2), dup3(2): anything on every fd but the --egress-log's (kLogFd). Security:
    // a regular file as the log is the worker's through a description of its own, O_WRONLY |
    // O_APPEND (relay/worker.h), so that what it writes goes after every line already there; on
    // that fd the worker may read its flags and set them with O_APPEND kept, and make no copy
    // (dup, F_DUPFD: a copy's F_SETFL could clear O_APPEND for the description, and then lseek and
    // write, or splice, would rewrite earlier lines). The worker has no other way to a second
    // copy: no /proc, no Unix socket to pass one to itself. Without a log the fd is /dev/null, so
    // the number is never another's.
    // The fd and the command are compared as the kernel reads them, 32 bits (libseccomp's
    // SCMP_A0_32 only narrows the constant: 5 | 1 << 32 passed a "!= 5" and reached fd 5,
    // WorkerAllowlist.*). "Its low 32 bits are not kLogFd" is one rule per bit where they can
    // differ (libseccomp takes one comparison per argument, and has no masked "!=").
    constexpr uint32_t kLogFd = 5;
    constexpr uint64_t kLow32 = 0xffffffff;
    for (int call : {SCMP_SYS(fcntl), SCMP_SYS(dup), SCMP_SYS(dup3)})
        for (int bit = 0; bit < 32; ++bit) {
            const uint64_t mask = uint64_t{1} << bit;
            if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, call, 1,
                                          SCMP_A0(SCMP_CMP_MASKED_EQ, mask, ~uint64_t{kLogFd} & mask));
                rc < 0)
                return fail("fcntl, dup, dup3", rc);
        }
    for (unsigned cmd : {F_GETFD, F_SETFD, F_GETFL})
        if (int rc =
                seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 2,
                                 SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, kLogFd), SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, cmd));
            rc < 0)
            return fail("fcntl", rc);
    if (int rc =
            seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 3, SCMP_A0(SCMP_CMP_MASKED_EQ, kLow32, kLogFd),
                             SCMP_A1(SCMP_CMP_MASKED_EQ, kLow32, static_cast<unsigned>(F_SETFL)),
                             SCMP_A2(SCMP_CMP_MASKED_EQ, static_cast<unsigned>(O_APPEND), O_APPEND));
        rc < 0)
        return fail("fcntl", rc);
    // ioctl(2): FIONREAD and FIONBIO only (c-ares).
    for (unsigned long request : {static_cast<unsigned long>(FIONREAD), static_cast<unsigned long>(FIONBIO)})
        if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
                                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff, request));
            rc < 0)
            return fail("ioctl", rc);
    int fds[2];
    if (::pipe(fds) < 0)
        return fail("pipe", -errno);
    if (int rc = seccomp_export_bpf(ctx.get(), fds[1]); rc < 0)
        return fail("seccomp_export_bpf", rc);
    ::close(fds[1]);
    std::printf("// Generated by cocoon_worker_seccomp_gen (relay/worker_seccomp_gen.cc). Do not edit.\n");
    std::printf("constexpr sock_filter kWorkerAllowlist[] = {\n");
    for (sock_filter f; ::read(fds[0], &f, sizeof f) == sizeof f;)
        std::printf("    {0x%04x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
    std::printf("};\n");
    return 0;
}
