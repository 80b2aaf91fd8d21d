// PID 2's birth (ns/setup/spawn.h), and the monitor's network namespace helper's.
// Runs in: monitor, pid1, pid2: PID 1 calls it, and the child returns from it as PID 2; the monitor
//  calls it for its network namespace helper (ns/launch.cc).
#include "ns/setup/spawn.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COCOON_SPAWN_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define COCOON_SPAWN_ASAN 1
#endif

#if defined(__x86_64__) && !defined(COCOON_SPAWN_ASAN)
// As glibc's vfork: the return address is popped into a register the kernel keeps across the
// system call (rdx; clone3 takes rdi and rsi), so that the child, returning first on the shared
// stack, does not leave the parent a return address it has overwritten; each pushes it back
// before its own return. The kernel copies the parent's registers to the child (rax = 0).
// Without a user shadow stack (CET): the static glibc 2.36 cocoon links never enables one. With
// one, the child's return would pop the shared shadow stack, and the parent's return would need
// glibc's path for it (a jump, not a ret).
asm(R"(
    .text
    .globl cocoon_clone3
    .type cocoon_clone3, @function
cocoon_clone3:
    .cfi_startproc
    endbr64
    popq %rdx
    .cfi_adjust_cfa_offset -8
    .cfi_register rip, rdx
    movl $435, %eax
    syscall
    pushq %rdx
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset rip, 0
    ret
    .cfi_endproc
    .size cocoon_clone3, .-cocoon_clone3
)");
static_assert(SYS_clone3 == 435, "the asm above names clone3's number");
#else
extern "C" long cocoon_clone3(clone_args* args, size_t size)
{
    args->flags &= ~static_cast<unsigned long long>(CLONE_VM | CLONE_VFORK);
    long pid = ::syscall(SYS_clone3, args, size);
    return pid < 0 ? -errno : pid;
}
#endif
