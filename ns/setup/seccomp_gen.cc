// The build-time program that compiles the default seccomp policy's rules (ns/setup/seccomp_rules.h)
// with libseccomp into the BPF that cocoon loads (ns/setup/seccomp_policy.cc includes its output). Runs
// on the build machine only.
// Start-up speed: compiling ~60 rules for two ABIs with libseccomp costs a few hundred
// microseconds; done at build time, a sandbox only hands the kernel a finished program.
//
// usage: cocoon_seccomp_gen > seccomp_default.inc
// Runs in: build.
#include <seccomp.h>
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

#include "ns/setup/seccomp_rules.h"

namespace {

using cocoon::seccomp::kPersonalityAllowed;
using cocoon::seccomp::Rule;

// personality (kPersonalityAllowed): libseccomp allows one comparison per argument in a rule, which
// cannot say "one of these values", so the rule it compiles for personality returns a marker, and
// every return of the marker becomes a jump to this hand-written block, appended to its program:
// one filter, not two (each filter the kernel loads costs start-up time). The first argument's low
// 32 bits are at offset 16 on x86_64 and i386 alike (the kernel reads the value as an unsigned int).
constexpr uint32_t kPersonalityMarker =
    SECCOMP_RET_ERRNO | 0xffe;  // an errno no rule uses (libseccomp takes up to 4094)

std::vector<sock_filter> personality_block()
{
    std::vector<sock_filter> p;
    p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 16));  // args[0], low 32 bits
    for (size_t i = 0; i < std::size(kPersonalityAllowed); ++i)
        p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kPersonalityAllowed[i],
                             static_cast<uint8_t>(std::size(kPersonalityAllowed) - i), 0));
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

// Calls libseccomp does not know (Rule::number), refused whole, ahead of its program: two
// instructions per number for every call. Their numbers are the same on x86_64 and i386; an x32
// call's number has bit 30 set, so it cannot match, and any other architecture's call is refused
// with ENOSYS by the program anyway.
std::vector<sock_filter> numbered_prefix(const std::vector<const Rule*>& numbered)
{
    std::vector<sock_filter> p;
    if (numbered.empty())
        return p;
    p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 0));  // seccomp_data.nr
    for (const Rule* rule : numbered) {
        p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(rule->number), 0, 1));
        p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | static_cast<uint32_t>(rule->error)));
    }
    return p;
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
    std::vector<const Rule*> numbered;
    const std::vector<Rule> rules = cocoon::seccomp::default_rules();
    for (const Rule& rule : rules) {
        const int nr = seccomp_syscall_resolve_name(rule.syscall);
        if (nr == __NR_SCMP_ERROR && rule.number >= 0) {
            if (!rule.args.empty())
                return fail(std::string("a numbered rule compares arguments (") + rule.syscall + ")", -EINVAL);
            numbered.push_back(&rule);
            continue;
        }
        // A name libseccomp does not know would leave the call open: stop the build instead.
        if (nr == __NR_SCMP_ERROR)
            return fail(std::string("libseccomp does not know ") + rule.syscall + " (give its number)", -ENOSYS);
        // Security: every comparison is on the argument's low 32 bits, the part the kernel reads
        // of an int (see ArgMatch).
        std::vector<scmp_arg_cmp> cmps;
        for (const cocoon::seccomp::ArgMatch& m : rule.args)
            cmps.push_back(scmp_arg_cmp{m.index, SCMP_CMP_MASKED_EQ, m.mask, m.value});
        const int rc = seccomp_rule_add_array(ctx.get(), SCMP_ACT_ERRNO(static_cast<uint32_t>(rule.error)), nr,
                                              static_cast<unsigned>(cmps.size()), cmps.data());
        if (rc < 0)
            return fail(std::string("seccomp_rule_add(") + rule.syscall + ")", rc);
    }
    int fds[2];
    if (::pipe(fds) < 0)
        return fail("pipe", -errno);
    if (int rc = seccomp_export_bpf(ctx.get(), fds[1]); rc < 0)
        return fail("seccomp_export_bpf", rc);
    ::close(fds[1]);
    std::vector<sock_filter> program = numbered_prefix(numbered);
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
    std::printf("// Generated by cocoon_seccomp_gen (ns/setup/seccomp_gen.cc) at build time. Do not edit.\n");
    auto print = [](const char* name, const std::vector<sock_filter>& insns) {
        std::printf("constexpr sock_filter %s[] = {\n", name);
        for (const sock_filter& f : insns)
            std::printf("    {0x%04x, %u, %u, 0x%08x},\n", f.code, f.jt, f.jf, f.k);
        std::printf("};\n");
    };
    print("kDefaultPolicy", program);
    return 0;
}
