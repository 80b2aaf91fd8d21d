#include "ns/seccomp_policy.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include <iterator>

#include "base/sys_error.h"

namespace cocoon::ns {
namespace {

#include "seccomp_default.inc"

void load(const sock_filter* program, size_t size)
{
    sock_fprog prog{static_cast<unsigned short>(size), const_cast<sock_filter*>(program)};
    check(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0), "Can't load the default seccomp policy");
}

}  // namespace

void load_default_seccomp_policy()
{
    load(kDefaultPolicy, std::size(kDefaultPolicy));
}

}  // namespace cocoon::ns
