// cocoon --check's words for a refused call (tools/cocoon/check_refusal.h). Pure.
// Runs in: caller.
#include "tools/cocoon/check_refusal.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cocoon::tools {
namespace {

// "EPERM", or the number where glibc has no name for it.
std::string errno_name(int err)
{
    const char* name = ::strerrorname_np(err);
    return name ? name : std::to_string(err);
}

bool too_old(const Outcome& o, const ProcessFacts& facts)
{
    return (o.err == ENOSYS || o.err == EINVAL) && facts.kernel < o.since;
}

}  // namespace

KernelVersion parse_kernel_version(const std::string& release)
{
    KernelVersion v;
    if (std::sscanf(release.c_str(), "%u.%u", &v.major, &v.minor) != 2)
        return {};
    return v;
}

std::string to_string(KernelVersion v)
{
    return std::to_string(v.major) + "." + std::to_string(v.minor);
}

std::string refusal(const Outcome& o, const ProcessFacts& facts)
{
    const std::string on = " on Linux " + to_string(facts.kernel);
    if (too_old(o, facts))
        return o.call + " needs Linux " + to_string(o.since) + " or later (this is " + to_string(facts.kernel) + ")";
    if (o.err == ENOSYS)
        return o.call + " answered ENOSYS" + on + ", which has it: " +
               (facts.seccomp
                    ? "this process's seccomp filter refuses it (in a container: its runtime's seccomp profile)"
                    : "this kernel was built without it");
    if (o.err == EPERM || o.err == EACCES)
        return o.call + " refused (" + errno_name(o.err) + ")" + on + ", which has it: by " +
               (facts.seccomp ? "this process's seccomp filter or a missing capability (in a container: its "
                                "runtime's seccomp profile or capabilities)"
                              : "a missing capability or an LSM policy (AppArmor, SELinux); no seccomp filter is in "
                                "force");
    return o.call + ": " + std::strerror(o.err) + " (" + errno_name(o.err) + ")";
}

std::string remedy(const Outcome& o, const ProcessFacts& facts)
{
    if (too_old(o, facts))
        return "run on Linux " + to_string(o.since) + " or later";
    if (o.err == ENOSYS && !facts.seccomp)
        return "run on a kernel built with " + o.call;
    if (o.err == ENOSYS || ((o.err == EPERM || o.err == EACCES) && facts.seccomp))
        return "let this process's seccomp filter allow " + o.call +
               " (a container: --security-opt seccomp=PROFILE with a profile that allows it, Docker and Podman; "
               "seccomp=unconfined to try)";
    if (o.err == EPERM || o.err == EACCES)
        return "give this process the capability " + o.call + " needs, or an LSM policy that allows it";
    return "see why " + o.call + " fails: " + std::strerror(o.err);
}

}  // namespace cocoon::tools
