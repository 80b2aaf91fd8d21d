// Loading the sandbox's seccomp policy: the BPF ns/setup/seccomp_gen.cc compiled, or --seccomp FD's.
// Runs in: pid1, pid2: PID 1 loads the default policy for the command to inherit where it waits
//  for the monitor's message (ns/setup/command.h, confine_for_command); PID 2 loads the rest.
#include "ns/setup/seccomp_policy.h"

#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "base/sys_error.h"

namespace cocoon::ns {
namespace {

#include "seccomp_default.inc"

}  // namespace

void load_default_seccomp_policy()
{
    load_seccomp_program(kDefaultPolicy, "Can't load the default seccomp policy");
}

void load_seccomp_program(std::span<const sock_filter> program, const std::string& what)
{
    sock_fprog prog{static_cast<unsigned short>(program.size()), const_cast<sock_filter*>(program.data())};
    check(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), what);
}

}  // namespace cocoon::ns
