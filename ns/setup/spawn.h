// PID 2's birth: cloned by PID 1 straight into the command's cgroup leaf, sharing PID 1's memory
// until its exec where the plan allows it (as vfork does).
// Runs in: monitor, pid1, pid2: PID 1 calls it, and the child returns from it as PID 2; the monitor
//  calls it for the helper that makes the sandbox's network namespace (ns/launch.cc).
#pragma once

#include <linux/sched.h>

#include <cstddef>

namespace cocoon::ns {

// clone3(2) with args as given, returning as the raw system call does: the child's PID in the
// parent, 0 in the child, -errno on failure. With CLONE_VM | CLONE_VFORK and no stack the child
// runs on the parent's stack until its exec, as after vfork(2): the caller's rules for vfork hold
// (the child never returns from the function that called this one, and writes nothing the parent
// reads after). Everywhere but x86-64, and in builds with AddressSanitizer (whose shadow of the
// shared stack the child would change under the parent), CLONE_VM and CLONE_VFORK are left out:
// the child then gets a copy of the memory, as after fork(2).
extern "C" long cocoon_clone3(clone_args* args, size_t size) __attribute__((returns_twice));

}  // namespace cocoon::ns
