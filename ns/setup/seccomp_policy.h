// cocoon's default seccomp policy (on unless --no-default-seccomp): the calls no agent needs and
// that reach the host or the kernel's riskiest interfaces, refused with EPERM on x86_64 and i386
// (ENOSYS for openat2 and setxattrat, whose arguments are in memory; ENOSYS for every x32 call).
// The rules and their reasons: ns/setup/seccomp_rules.h and SECURITY.md.
// Runs in: pid1, pid2: PID 1 loads the default policy for the command to inherit where it waits
//  for the monitor's message (ns/setup/command.h, confine_for_command); PID 2 loads the rest.
#pragma once

#include <linux/filter.h>

#include <span>
#include <string>

namespace cocoon::ns {

// Loads the policy into the calling thread (and what it execs). Needs no_new_privs or
// CAP_SYS_ADMIN. Throws SysError.
void load_default_seccomp_policy();

// Loads one seccomp program as load_default_seccomp_policy does (prctl, as bwrap does, so a filter
// that lets the next one load need only allow prctl(PR_SET_SECCOMP)). Throws SysError(errno, what).
void load_seccomp_program(std::span<const sock_filter> program, const std::string& what);

}  // namespace cocoon::ns
