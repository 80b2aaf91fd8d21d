// The default seccomp policy's compiled program (the build's seccomp_default.inc), run against
// every rule of ns/setup/seccomp_rules.h on both ABIs it covers, by a small classic-BPF interpreter of
// the subset seccomp takes. Runs in the test process, no privilege.
//
// An interpreter rather than loading the filter and making the calls: it tries the i386 ABI on
// any host (a PVM guest answers int $0x80 with SIGSEGV, outside any sandbox too), gives the i386
// ABI arguments with high bits the kernel would never pass, and "makes" calls no test should
// make for real (reboot, kexec_load, swapoff). tests/e2e/seccomp_test.cc makes the real calls
// through the kernel's own filter, with high bits set, for socket, ioctl, personality and fchmod.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/syscall.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <string>

#include "ns/setup/seccomp_rules.h"

namespace cocoon::test {
namespace {

#include "seccomp_default.inc"

using seccomp::ArgMatch;
using seccomp::Rule;

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kX32Bit = 0x40000000;  // __X32_SYSCALL_BIT
constexpr uint64_t kHigh = 0xdeadbeef00000000ULL;

uint32_t error(int err)
{
    return SECCOMP_RET_ERRNO | static_cast<uint32_t>(err);
}

// The interpreter's registers: the accumulator, the index register and the scratch memory.
struct Machine {
    uint32_t a = 0, x = 0;
    std::array<uint32_t, BPF_MEMWORDS> mem{};
};

enum class Step { Done, OutOfRange, NotMine };

// Loads and stores: the 32-bit words of struct seccomp_data in the host's byte order, constants,
// and the scratch memory. OutOfRange for a word outside either.
Step load_or_store(Machine& m, const sock_filter& f, const seccomp_data& data)
{
    const bool in_memory = f.k < BPF_MEMWORDS;
    switch (f.code) {
    case BPF_LD | BPF_W | BPF_ABS:
        if (f.k % 4 != 0 || f.k + 4 > sizeof data)
            return Step::OutOfRange;
        std::memcpy(&m.a, reinterpret_cast<const char*>(&data) + f.k, 4);
        return Step::Done;
    case BPF_LD | BPF_IMM:
        m.a = f.k;
        return Step::Done;
    case BPF_LDX | BPF_IMM:
        m.x = f.k;
        return Step::Done;
    case BPF_LD | BPF_MEM:
        m.a = in_memory ? m.mem[f.k] : 0;
        break;
    case BPF_LDX | BPF_MEM:
        m.x = in_memory ? m.mem[f.k] : 0;
        break;
    case BPF_ST:
        if (in_memory)
            m.mem[f.k] = m.a;
        break;
    case BPF_STX:
        if (in_memory)
            m.mem[f.k] = m.x;
        break;
    default:
        return Step::NotMine;
    }
    return in_memory ? Step::Done : Step::OutOfRange;
}

// The ALU operations and register moves seccomp's programs use.
Step alu(Machine& m, const sock_filter& f)
{
    switch (f.code) {
    case BPF_ALU | BPF_AND | BPF_K:
        m.a &= f.k;
        return Step::Done;
    case BPF_ALU | BPF_OR | BPF_K:
        m.a |= f.k;
        return Step::Done;
    case BPF_MISC | BPF_TAX:
        m.x = m.a;
        return Step::Done;
    case BPF_MISC | BPF_TXA:
        m.a = m.x;
        return Step::Done;
    default:
        return Step::NotMine;
    }
}

// A jump: how many instructions it skips, or nothing for an instruction that is not one.
std::optional<uint32_t> jump(const Machine& m, const sock_filter& f)
{
    auto skip = [&](bool cond) -> uint32_t { return cond ? f.jt : f.jf; };
    switch (f.code) {
    case BPF_JMP | BPF_JA:
        return f.k;
    case BPF_JMP | BPF_JEQ | BPF_K:
        return skip(m.a == f.k);
    case BPF_JMP | BPF_JGT | BPF_K:
        return skip(m.a > f.k);
    case BPF_JMP | BPF_JGE | BPF_K:
        return skip(m.a >= f.k);
    case BPF_JMP | BPF_JSET | BPF_K:
        return skip((m.a & f.k) != 0);
    case BPF_JMP | BPF_JEQ | BPF_X:
        return skip(m.a == m.x);
    default:
        return std::nullopt;
    }
}

// Runs a seccomp program on data as the kernel does: 32-bit words of struct seccomp_data in the
// host's byte order. Fails the test (and returns 0, SECCOMP_RET_KILL_THREAD) on an instruction
// outside seccomp's subset or a jump or load out of range, so a wrong interpreter cannot pass.
uint32_t run_filter(std::span<const sock_filter> program, const seccomp_data& data)
{
    Machine m;
    for (size_t pc = 0; pc < program.size(); ++pc) {
        const sock_filter& f = program[pc];
        if (f.code == (BPF_RET | BPF_K))
            return f.k;
        if (f.code == (BPF_RET | BPF_A))
            return m.a;
        if (const std::optional<uint32_t> skip = jump(m, f)) {
            pc += *skip;
            continue;
        }
        Step step = alu(m, f);
        if (step == Step::NotMine)
            step = load_or_store(m, f, data);
        if (step == Step::NotMine) {
            ADD_FAILURE() << "instruction " << pc << ": code 0x" << std::hex << f.code << " is not interpreted";
            return 0;
        }
        if (step == Step::OutOfRange) {
            ADD_FAILURE() << "instruction " << pc << ": load or store out of range (k=" << f.k << ")";
            return 0;
        }
    }
    ADD_FAILURE() << "the program ran off its end";
    return 0;
}

uint32_t policy(uint32_t arch, int nr, const std::array<uint64_t, 6>& args)
{
    seccomp_data data{};
    data.nr = nr;
    data.arch = arch;
    for (size_t i = 0; i < args.size(); ++i)
        data.args[i] = args[i];
    return run_filter(kDefaultPolicy, data);
}

struct Abi {
    uint32_t audit_arch;
    uint32_t scmp_arch;
    const char* name;
};
constexpr Abi kAbis[] = {{AUDIT_ARCH_X86_64, SCMP_ARCH_X86_64, "x86_64"}, {AUDIT_ARCH_I386, SCMP_ARCH_X86, "i386"}};

// A rule's call number on an ABI, or -1 where the ABI lacks it. libseccomp gives i386's socket as
// a negative "multiplexed" number; the direct call (Linux 4.3) is 359.
int number(const Rule& rule, const Abi& abi)
{
    if (rule.number >= 0)
        return rule.number;
    int nr = seccomp_syscall_resolve_name_arch(abi.scmp_arch, rule.syscall);
    if (abi.audit_arch == AUDIT_ARCH_I386 && std::string(rule.syscall) == "socket")
        return 359;
    return nr >= 0 ? nr : -1;
}

// Arguments that match rule: each compared argument holds the rule's value; the rest `fill`.
std::array<uint64_t, 6> matching(const Rule& rule, uint64_t fill)
{
    std::array<uint64_t, 6> args;
    args.fill(fill);
    for (const ArgMatch& m : rule.args)
        args[m.index] = m.value;
    return args;
}

std::array<uint64_t, 6> with_high_bits(std::array<uint64_t, 6> args)
{
    for (uint64_t& a : args)
        a = (a & 0xffffffff) | kHigh;
    return args;
}

std::string describe(const Rule& rule, const Abi& abi, const std::array<uint64_t, 6>& args)
{
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s on %s, args %#llx %#llx %#llx %#llx", rule.syscall, abi.name,
                  static_cast<unsigned long long>(args[0]), static_cast<unsigned long long>(args[1]),
                  static_cast<unsigned long long>(args[2]), static_cast<unsigned long long>(args[3]));
    return buf;
}

// What the policy should answer for a call with args: the error of a rule of that call whose
// comparisons all hold on the arguments' low 32 bits, else allowed.
uint32_t expected(const std::vector<Rule>& rules, const char* syscall, const std::array<uint64_t, 6>& args)
{
    for (const Rule& r : rules) {
        bool all = std::string(r.syscall) == syscall;
        for (const ArgMatch& m : r.args)
            all = all && (static_cast<uint32_t>(args[m.index]) & m.mask) == m.value;
        if (all)
            return error(r.error);
    }
    return kAllow;
}

TEST(SeccompPolicy, EveryRuleRefusesWithOrWithoutHighBits)
{
    const std::vector<Rule> rules = seccomp::default_rules();
    ASSERT_GE(rules.size(), 50u);
    for (const Rule& rule : rules) {
        int abis = 0;
        for (const Abi& abi : kAbis) {
            const int nr = number(rule, abi);
            if (nr < 0)
                continue;  // vm86 and vm86old are i386 calls only
            ++abis;
            // Whatever the arguments a rule does not compare hold (zero, all ones), and whatever
            // the high halves of the compared ones hold.
            for (uint64_t fill : {uint64_t{0}, ~uint64_t{0}}) {
                const auto args = matching(rule, fill);
                EXPECT_EQ(policy(abi.audit_arch, nr, args), error(rule.error)) << describe(rule, abi, args);
                const auto high = with_high_bits(args);
                EXPECT_EQ(policy(abi.audit_arch, nr, high), error(rule.error)) << describe(rule, abi, high);
            }
        }
        EXPECT_GT(abis, 0) << rule.syscall << " is a call on neither ABI";
    }
}

// A compared argument one bit away from the rule's value is allowed (where no other rule of the
// call matches it), with and without high bits.
TEST(SeccompPolicy, NonMatchingArgumentsAreAllowed)
{
    const std::vector<Rule> rules = seccomp::default_rules();
    int tried = 0;
    for (const Rule& rule : rules)
        for (const Abi& abi : kAbis) {
            const int nr = number(rule, abi);
            if (nr < 0)
                continue;
            for (const ArgMatch& m : rule.args) {
                auto args = matching(rule, 0);
                args[m.index] ^= m.mask & -m.mask;  // the mask's lowest bit flipped
                EXPECT_EQ(policy(abi.audit_arch, nr, args), expected(rules, rule.syscall, args))
                    << describe(rule, abi, args);
                const auto high = with_high_bits(args);
                EXPECT_EQ(policy(abi.audit_arch, nr, high), expected(rules, rule.syscall, high))
                    << describe(rule, abi, high);
                ++tried;
            }
        }
    EXPECT_GT(tried, 60);
}

// The rules the issue named, by value: socket(AF_VSOCK), ioctl(TIOCSTI), fchmod(04755), each with
// a high bit set, on x86_64 (their numbers from the build's own headers, not libseccomp's table).
TEST(SeccompPolicy, HighBitsDoNotPassTheNamedRules)
{
    const uint64_t bit32 = 1ULL << 32;
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_socket, {bit32 | AF_VSOCK, SOCK_STREAM, 0, 0, 0, 0}), error(EPERM));
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_socket, {AF_INET | bit32, SOCK_STREAM, 0, 0, 0, 0}), kAllow);
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_ioctl, {0, TIOCSTI | bit32, 0, 0, 0, 0}), error(EPERM));
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_fchmod, {3, bit32 | 04755, 0, 0, 0, 0}), error(EPERM));
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_fchmod, {3, bit32 | 0755, 0, 0, 0, 0}), kAllow);
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_openat2, {0, 0, 0, 0, 0, 0}), error(ENOSYS));
}

// The terminal requests that would leave the caller's terminal broken are refused, with or without
// high bits; what an interactive agent or a pty of its own needs passes.
TEST(SeccompPolicy, TerminalRequestsThatBreakTheCallersTerminalAreRefused)
{
    const uint64_t bit32 = 1ULL << 32;
    for (unsigned long request : std::initializer_list<unsigned long>{
             TIOCSETD, TIOCEXCL, TCXONC, TIOCCONS, TIOCSLCKTRMIOS, TIOCVHANGUP, 0x4B45UL /* KDSKBMODE */,
             0x4B3AUL /* KDSETMODE */, 0x5606UL /* VT_ACTIVATE */, 0x5602UL /* VT_SETMODE */})
        for (uint64_t high : {uint64_t{0}, bit32})
            EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_ioctl, {1, high | request, 0, 0, 0, 0}), error(EPERM)) << request;
    // TCGETS, TCSETS (raw mode), TCSETSW, TIOCGWINSZ, TIOCSWINSZ, TIOCSCTTY (a pty of its own),
    // TIOCNXCL, TCFLSH, TIOCGPGRP, TIOCSPGRP, FIONREAD, and V4L2's VIDIOC_QUERYCAP (type 'V').
    for (unsigned long request :
         std::initializer_list<unsigned long>{TCGETS, TCSETS, TCSETSW, TIOCGWINSZ, TIOCSWINSZ, TIOCSCTTY, TIOCNXCL,
                                              TCFLSH, TIOCGPGRP, TIOCSPGRP, FIONREAD, 0x80685600UL})
        EXPECT_EQ(policy(AUDIT_ARCH_X86_64, SYS_ioctl, {1, request, 0, 0, 0, 0}), kAllow) << request;
}

// personality: the allowed values pass with any high half; others are refused with any.
TEST(SeccompPolicy, PersonalityAllowsTheLinuxPersonaOnly)
{
    const int nrs[] = {SYS_personality, 136};  // x86_64, i386
    for (size_t i = 0; i < std::size(kAbis); ++i) {
        const Abi& abi = kAbis[i];
        ASSERT_EQ(seccomp_syscall_resolve_name_arch(abi.scmp_arch, "personality"), nrs[i]) << abi.name;
        for (uint64_t high : {uint64_t{0}, kHigh, uint64_t{1} << 32}) {
            for (uint32_t allowed : seccomp::kPersonalityAllowed)
                EXPECT_EQ(policy(abi.audit_arch, nrs[i], {high | allowed, 0, 0, 0, 0, 0}), kAllow)
                    << abi.name << " " << std::hex << (high | allowed);
            for (uint32_t refused : {0x0006U /* PER_BSD */, 0x0400000U /* READ_IMPLIES_EXEC */, 0x0100000U, 0x0200000U,
                                     0xfffffffeU, 0x0040001U})
                EXPECT_EQ(policy(abi.audit_arch, nrs[i], {high | refused, 0, 0, 0, 0, 0}), error(EPERM))
                    << abi.name << " " << std::hex << (high | refused);
        }
    }
}

// What no rule names is allowed; the x32 ABI and other architectures get ENOSYS; i386 programs
// that reach socket through socketcall(SYS_SOCKET) are refused whatever the family (libseccomp
// cannot read socketcall's arguments, which are in memory, so it refuses the call).
TEST(SeccompPolicy, EverythingElse)
{
    for (int nr : {SYS_read, SYS_write, SYS_openat, SYS_execve, SYS_clone, SYS_mount, SYS_unshare, SYS_ptrace})
        EXPECT_EQ(policy(AUDIT_ARCH_X86_64, nr, {kHigh, kHigh, kHigh, kHigh, kHigh, kHigh}), kAllow) << nr;
    for (int nr : {3 /* read */, 4 /* write */, 11 /* execve */})
        EXPECT_EQ(policy(AUDIT_ARCH_I386, nr, {0, 0, 0, 0, 0, 0}), kAllow) << nr;
    EXPECT_EQ(policy(AUDIT_ARCH_X86_64, static_cast<int>(kX32Bit | SYS_read), {0, 0, 0, 0, 0, 0}), error(ENOSYS));
    EXPECT_EQ(policy(AUDIT_ARCH_AARCH64, 63, {0, 0, 0, 0, 0, 0}), error(ENOSYS));
    EXPECT_EQ(policy(AUDIT_ARCH_I386, 102 /* socketcall */, {1 /* SYS_SOCKET */, 0, 0, 0, 0, 0}), error(EPERM));
    EXPECT_EQ(policy(AUDIT_ARCH_I386, 102, {3 /* SYS_CONNECT */, 0, 0, 0, 0, 0}), kAllow);
}

}  // namespace
}  // namespace cocoon::test
