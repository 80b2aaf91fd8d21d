// The default seccomp policy's rules as data: compiled by the build-time generator
// (ns/setup/seccomp_gen.cc, libseccomp) into the BPF cocoon loads, and read by the unit test that runs
// that BPF against every rule (tests/unit/seccomp_policy_test.cc). No process of cocoon runs this.
//
// SECURITY.md ("Default seccomp policy") has the table of these rules with their reasons and
// tests; keep the two in step.
// Runs in: build.
#pragma once

#include <fcntl.h>
#include <linux/personality.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace cocoon::seccomp {

// One comparison on an argument: (low 32 bits of the argument & mask) == value.
// Security: the high 32 bits are never compared. Every argument a rule looks at is an int, an
// unsigned int or a mode to the kernel, which reads only the low 32 bits (or fewer); a rule that
// compared all 64 would be passed by setting a high bit (socket((1UL << 32) | AF_VSOCK, ...);
// CVE-2019-7303's TIOCSTI). The type holds 32 bits, so no rule can say otherwise.
struct ArgMatch {
    unsigned index;  // 0..5
    uint32_t mask;
    uint32_t value;
};

struct Rule {
    const char* syscall;  // libseccomp's name
    int error = EPERM;  // the errno the call fails with
    std::vector<ArgMatch> args{};  // all must match; empty: every call
    // Calls newer than the libseccomp cocoon builds with (2.5): their number, the same on x86_64
    // and i386 (calls from 403 on have one number on every architecture). -1: resolved by name.
    int number = -1;
};

constexpr uint32_t kAll = 0xffffffff;

// struct vfs_cap_data's sizes (linux/capability.h), the only value sizes the kernel takes for a
// security.capability attribute: revision 2 (XATTR_CAPS_SZ_2) and 3, with a root uid
// (XATTR_CAPS_SZ_3). setxattr refuses any other size for that name with EINVAL.
constexpr uint32_t kCapsSizeV2 = 20, kCapsSizeV3 = 24;

// The virtual console's ioctl requests (linux/kd.h KDGETLED 0x4B31 ... and linux/vt.h
// VT_OPENQRY 0x5600 ...): plain numbers, type 'K' or 'V' with no size or direction bits, so the
// whole group is the request with its low byte masked. Requests of other drivers with those type
// letters (V4L2's 'V') carry size bits and do not match.
constexpr uint32_t kRequestGroupMask = 0xffffff00, kKdRequests = 0x4b00, kVtRequests = 0x5600;

inline std::vector<Rule> default_rules()
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
        out.push_back({name});
    // Terminal input injection (CVE-2017-5226): TIOCSTI pushes bytes into a terminal's input queue,
    // TIOCLINUX (subcode 2 and others) reads or selects console text. The request is an unsigned
    // int to the kernel: a request with high bits set is still TIOCSTI (CVE-2019-7303).
    for (uint32_t request : {static_cast<uint32_t>(TIOCSTI), static_cast<uint32_t>(TIOCLINUX)})
        out.push_back({"ioctl", EPERM, {{1, kAll, request}}});
    // The caller's terminal, shared with the command, left broken after the sandbox: another line
    // discipline (N_NULL: the terminal is dead), exclusive mode (the caller can no longer open
    // it), output stopped or input sent a STOP character (TCXONC: the caller's next write
    // blocks), the console redirected to it (TIOCCONS), its termios fields locked
    // (TIOCSLCKTRMIOS), a hang-up (TIOCVHANGUP), and a virtual console's keyboard, display and
    // switching (the KD* and VT_* requests: numbers 0x4Bxx and 0x56xx with no size or direction
    // bits). No agent needs these, and a pty of its own needs none of them either. What an agent
    // may change (raw mode, window size) is put back at the end (ns/monitor/terminal.h).
    for (uint32_t request :
         {static_cast<uint32_t>(TIOCSETD), static_cast<uint32_t>(TIOCEXCL), static_cast<uint32_t>(TCXONC),
          static_cast<uint32_t>(TIOCCONS), static_cast<uint32_t>(TIOCSLCKTRMIOS), static_cast<uint32_t>(TIOCVHANGUP)})
        out.push_back({"ioctl", EPERM, {{1, kAll, request}}});
    for (uint32_t group : {kKdRequests, kVtRequests})
        out.push_back({"ioctl", EPERM, {{1, kRequestGroupMask, group}}});
    // AF_VSOCK reaches the hypervisor and other guests' services, outside any network namespace.
    // The family is an int: socket((1UL << 32) | AF_VSOCK, ...) is a vsock socket.
    out.push_back({"socket", EPERM, {{0, kAll, AF_VSOCK}}});
    // Setuid and setgid files: a command that runs as the caller's uid can make a file it owns
    // setuid with chmod, no capability needed; for a root caller (even with --cap-drop ALL) that
    // file is setuid-root on the host, for any user who runs it from a read-write bind. No agent
    // needs to make one. The mode argument is compared on its S_ISUID and S_ISGID bits; creating
    // calls only with O_CREAT or O_TMPFILE.
    for (uint32_t bit : {static_cast<uint32_t>(S_ISUID), static_cast<uint32_t>(S_ISGID)}) {
        out.push_back({"chmod", EPERM, {{1, bit, bit}}});
        out.push_back({"fchmod", EPERM, {{1, bit, bit}}});
        out.push_back({"fchmodat", EPERM, {{2, bit, bit}}});
        out.push_back({"fchmodat2", EPERM, {{2, bit, bit}}});
        out.push_back({"creat", EPERM, {{1, bit, bit}}});
        out.push_back({"mknod", EPERM, {{1, bit, bit}}});
        out.push_back({"mknodat", EPERM, {{2, bit, bit}}});
        for (uint32_t create : {static_cast<uint32_t>(O_CREAT), static_cast<uint32_t>(__O_TMPFILE)}) {
            out.push_back({"open", EPERM, {{1, create, create}, {2, bit, bit}}});
            out.push_back({"openat", EPERM, {{2, create, create}, {3, bit, bit}}});
        }
    }
    // openat2 carries its flags and mode in a struct open_how in memory, which no filter can read,
    // so openat2(O_CREAT, 04755) would make a setuid file. It fails with ENOSYS, what a kernel
    // before 5.6 answers: programs (glibc, systemd, cocoon itself) then fall back to openat, which
    // the rules above see.
    out.push_back({"openat2", ENOSYS});
    // File capabilities: a command holding CAP_SETFCAP in a user namespace whose root is the host's
    // uid 0 (a root caller's sandbox, unless --cap-drop takes it) writes a security.capability
    // attribute with root uid 0, which the host honours: the file grants its capabilities to any
    // host user who runs it. A filter cannot read the attribute's name, but the kernel takes only
    // two value sizes for it: those sizes are refused for every name (a user.* attribute of exactly
    // 20 or 24 bytes too). The size is a size_t; its low 32 bits are compared, so a size with high
    // bits set is refused as well (the kernel would refuse it anyway: E2BIG).
    for (const char* name : {"setxattr", "lsetxattr", "fsetxattr"})
        for (uint32_t size : {kCapsSizeV2, kCapsSizeV3})
            out.push_back({name, EPERM, {{3, kAll, size}}});
    // setxattrat (Linux 6.13) carries its value and size in a struct xattr_args in memory: ENOSYS,
    // as on an older kernel, so programs fall back to the calls above.
    out.push_back({"setxattrat", ENOSYS, {}, 463});
    // personality: see kPersonalityAllowed.
    return out;
}

// personality(2) keeps the Linux persona: 0, PER_LINUX32 (8, for 32-bit builds), either with
// ADDR_NO_RANDOMIZE (which gdb and setarch -R set; it weakens only the sandbox's own processes),
// and the 0xffffffff query. Everything else is refused with EPERM: other operating systems'
// personas, and the flags that weaken memory protection for every later exec (READ_IMPLIES_EXEC,
// MMAP_PAGE_ZERO, the old address layouts). The argument is an unsigned int: its low 32 bits
// are compared.
constexpr uint32_t kPersonalityAllowed[] = {0, PER_LINUX32, ADDR_NO_RANDOMIZE,
                                            uint32_t{ADDR_NO_RANDOMIZE} | uint32_t{PER_LINUX32}, 0xffffffff};

}  // namespace cocoon::seccomp
