// The default seccomp policy's rules, and the build-time program that compiles them with
// libseccomp into the BPF that cocoon loads (ns/seccomp_policy.cc includes its output).
// Start-up speed: compiling ~60 rules for three ABIs with libseccomp costs a few hundred
// microseconds; done at build time, a sandbox only hands the kernel a finished program.
//
// Each rule refuses with EPERM (the caller sees an ordinary "Operation not permitted", as without
// the privilege, and programs that probe for a feature fall back). SECURITY.md ("Default seccomp
// policy") has the table of these rules with their reasons and tests; keep the two in step.
//
// usage: cocoon_seccomp_gen > seccomp_default.inc
#include <linux/personality.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <linux/filter.h>
#include <linux/seccomp.h>

namespace {

struct Rule {
    const char* syscall;
    std::vector<scmp_arg_cmp> args;  // empty: every call
};

std::vector<Rule> rules()
{
    std::vector<Rule> out;
    // Whole system calls no agent needs, each a kernel interface that has been a way out or a
    // way to reach the host: keyrings (the caller's keys, the uid's key quota), kernel modules and
    // kexec, BPF programs, perf events, userfaultfd (a race primitive in many exploits), io_uring
    // (a large attack surface, disabled by many distributions), process accounting, swap, reboot,
    // file handles (open_by_handle_at opens any inode of a mount, the "shocker" escape), the
    // kernel log, and obsolete calls.
    for (const char* name : {"keyctl",
                             "add_key",
                             "request_key",
                             "init_module",
                             "finit_module",
                             "delete_module",
                             "kexec_load",
                             "kexec_file_load",
                             "bpf",
                             "perf_event_open",
                             "userfaultfd",
                             "io_uring_setup",
                             "io_uring_enter",
                             "io_uring_register",
                             "acct",
                             "swapon",
                             "swapoff",
                             "reboot",
                             "open_by_handle_at",
                             "syslog",
                             "lookup_dcookie",
                             "uselib",
                             "vm86",
                             "vm86old",
                             "nfsservctl",
                             "quotactl",
                             "quotactl_fd"})
        out.push_back({name, {}});
    // Terminal input injection (CVE-2017-5226): TIOCSTI pushes bytes into a terminal's input queue,
    // TIOCLINUX (subcode 2 and others) reads or selects console text. The kernel compares only the
    // low 32 bits of an ioctl's request, so the filter must too (CVE-2019-7303): a request with
    // high bits set is still TIOCSTI.
    for (unsigned long request : {TIOCSTI, TIOCLINUX})
        out.push_back({"ioctl", {SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, request)}});
    // AF_VSOCK reaches the hypervisor and other guests' services, outside any network namespace.
    out.push_back({"socket", {SCMP_A0(SCMP_CMP_EQ, AF_VSOCK)}});
    // Setuid and setgid files: a command that runs as the caller's uid can make a file it owns
    // setuid with chmod, no capability needed; for a root caller (even with --cap-drop ALL) that
    // file is setuid-root on the host, for any user who runs it from a read-write bind. No agent
    // needs to make one. The mode argument is compared on its S_ISUID and S_ISGID bits; creating
    // calls only with O_CREAT or O_TMPFILE. (openat2 carries its mode in memory, out of a
    // filter's reach: see SECURITY.md.)
    constexpr unsigned long kSetId = S_ISUID | S_ISGID;
    for (unsigned long bit : {static_cast<unsigned long>(S_ISUID), static_cast<unsigned long>(S_ISGID)}) {
        out.push_back({"chmod", {SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)}});
        out.push_back({"fchmod", {SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)}});
        out.push_back({"fchmodat", {SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)}});
        out.push_back({"fchmodat2", {SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)}});
        out.push_back({"creat", {SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)}});
        out.push_back({"mknod", {SCMP_A1(SCMP_CMP_MASKED_EQ, bit, bit)}});
        out.push_back({"mknodat", {SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)}});
        for (unsigned long create : {static_cast<unsigned long>(O_CREAT), static_cast<unsigned long>(__O_TMPFILE)}) {
            out.push_back(
                {"open", {SCMP_A1(SCMP_CMP_MASKED_EQ, create, create), SCMP_A2(SCMP_CMP_MASKED_EQ, bit, bit)}});
            out.push_back(
                {"openat", {SCMP_A2(SCMP_CMP_MASKED_EQ, create, create), SCMP_A3(SCMP_CMP_MASKED_EQ, bit, bit)}});
        }
    }
    (void)kSetId;
    // personality: see personality_block below (an allowlist of values, which libseccomp's one
    // comparison per argument cannot express).
    return out;
}

// personality(2) keeps the Linux persona: 0, PER_LINUX32 (8, for 32-bit builds), either with
// ADDR_NO_RANDOMIZE (which gdb and setarch -R set; it weakens only the sandbox's own processes),
// and the 0xffffffff query. Everything else is refused: other operating systems' personas, and the
// flags that weaken memory protection for every later exec (READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, the
// old address layouts). libseccomp allows one comparison per argument in a rule, which cannot say
// "one of these values", so the rule it compiles for personality returns a marker, and every
// return of the marker becomes a jump to this hand-written block, appended to its program: one
// filter, not two (each filter the kernel loads costs start-up time). The first argument's low 32
// bits are at offset 16 on x86_64 and i386 alike (the kernel compares the value as an unsigned int).
constexpr uint32_t kPersonalityMarker =
    SECCOMP_RET_ERRNO | 0xffe;  // an errno no rule uses (libseccomp takes up to 4094)

std::vector<sock_filter> personality_block()
{
    constexpr uint32_t kRandom = ADDR_NO_RANDOMIZE, kLinux32 = PER_LINUX32;
    constexpr uint32_t kAllowed[] = {0, kLinux32, kRandom, kRandom | kLinux32, 0xffffffff};
    std::vector<sock_filter> p;
    p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 16));  // args[0], low 32 bits
    for (size_t i = 0; i < std::size(kAllowed); ++i)
        p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAllowed[i], static_cast<uint8_t>(std::size(kAllowed) - i), 0));
    p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM));
    p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    return p;
}

// Every `return marker` of program becomes a jump to the personality block, appended.
bool splice_personality(std::vector<sock_filter>& program)
{
    const size_t block = program.size();
    bool found = false;
    for (size_t i = 0; i < block; ++i)
        if (program[i].code == (BPF_RET | BPF_K) && program[i].k == kPersonalityMarker) {
            program[i] = BPF_STMT(BPF_JMP | BPF_JA, static_cast<uint32_t>(block - i - 1));
            found = true;
        }
    for (const sock_filter& insn : personality_block())
        program.push_back(insn);
    return found;
}

struct CtxDeleter {
    void operator()(void* ctx) const { seccomp_release(ctx); }
};

int fail(const std::string& what, int rc)
{
    std::fprintf(stderr, "cocoon_seccomp_gen: %s: %s\n", what.c_str(), std::strerror(-rc));
    return 1;
}

}  // namespace

int main()
{
    std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx)
        return fail("seccomp_init", -ENOMEM);
    // Start-up speed: a binary tree of syscall numbers rather than a chain. The kernel runs the
    // filter for every syscall number of every ABI when it is loaded (to cache the calls it always
    // allows), and a chain made that load take ~220 us; the tree, a fraction of it.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2); rc < 0)
        return fail("seccomp_attr_set(SCMP_FLTATR_CTL_OPTIMIZE)", rc);
    // The compat ABI of an x86_64 kernel: a 32-bit binary (or int $0x80 from a 64-bit one) is
    // filtered by the same rules, with its own syscall numbers. The x32 ABI is refused as a whole
    // with ENOSYS, what a kernel without x32 answers (Debian's default, syscall.x32=n; this host's
    // too): no agent is an x32 binary, and leaving it out of the filter makes it a third smaller,
    // which is start-up time (the kernel compiles the filter and runs it for every syscall number
    // when it is loaded). Any other architecture's calls get ENOSYS likewise.
    if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS)); rc < 0)
        return fail("seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)", rc);
    if (int rc = seccomp_arch_add(ctx.get(), SCMP_ARCH_X86); rc < 0 && rc != -EEXIST)
        return fail("seccomp_arch_add", rc);
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(kPersonalityMarker & SECCOMP_RET_DATA),
                                  SCMP_SYS(personality), 0);
        rc < 0)
        return fail("seccomp_rule_add(personality)", rc);
    for (const Rule& rule : rules()) {
        const int nr = seccomp_syscall_resolve_name(rule.syscall);
        if (nr == __NR_SCMP_ERROR)
            continue;  // not a system call on any of these ABIs
        const int rc = seccomp_rule_add_array(ctx.get(), SCMP_ACT_ERRNO(EPERM), nr,
                                              static_cast<unsigned>(rule.args.size()), rule.args.data());
        // -EDOM etc.: a call or comparison one ABI cannot express (e.g. socket's arguments under
        // i386's socketcall). libseccomp then skips that ABI; say so, and go on.
        if (rc < 0)
            return fail(std::string("seccomp_rule_add(") + rule.syscall + ")", rc);
    }
    int fds[2];
    if (::pipe(fds) < 0)
        return fail("pipe", -errno);
    if (int rc = seccomp_export_bpf(ctx.get(), fds[1]); rc < 0)
        return fail("seccomp_export_bpf", rc);
    ::close(fds[1]);
    std::vector<sock_filter> program;
    sock_filter insn;
    for (;;) {
        ssize_t n = ::read(fds[0], &insn, sizeof insn);
        if (n == 0)
            break;
        if (n != sizeof insn)
            return fail("read", n < 0 ? -errno : -EIO);
        program.push_back(insn);
    }
    if (!splice_personality(program))
        return fail("the personality rule is missing from libseccomp's program", -EINVAL);
    if (program.size() > BPF_MAXINSNS)
        return fail("the program is too long", -E2BIG);
    std::printf("// Generated by cocoon_seccomp_gen (ns/seccomp_rules.cc) at build time. Do not edit.\n");
    auto print = [](const char* name, const std::vector<sock_filter>& insns) {
        std::printf("constexpr sock_filter %s[] = {\n", name);
        for (const sock_filter& f : insns)
            std::printf("    {0x%04x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
        std::printf("};\n");
    };
    print("kDefaultPolicy", program);
    return 0;
}
