// cocoon --check's words for a refused call: what refused it (a kernel without it, a seccomp
// filter, a missing capability or an LSM policy), from its errno, the running kernel and whether
// a seccomp filter is in force; never "needs Linux X" on a kernel that has X. Pure; unit-tested.
// Runs in: caller.
#pragma once

#include <string>

namespace cocoon::tools {

struct KernelVersion {
    unsigned major = 0, minor = 0;
    friend bool operator<(KernelVersion a, KernelVersion b)
    {
        return a.major != b.major ? a.major < b.major : a.minor < b.minor;
    }
};

// "6.18.44-fc-v1300" -> {6, 18}; {0, 0} for a text that does not start with two numbers.
KernelVersion parse_kernel_version(const std::string& release);
std::string to_string(KernelVersion v);

// A call a probe made, and its errno (0: it worked). `since` is the release that brought it.
struct Outcome {
    int err = 0;
    std::string call;
    KernelVersion since;
};

// What --check knows of its own process.
struct ProcessFacts {
    KernelVersion kernel;
    bool seccomp = false;  // a seccomp filter is in force (/proc/self/status: "Seccomp:\t2")
};

// Why the call failed, after "no   FEATURE: ":
// - ENOSYS, or EINVAL (a flag it does not know), on a kernel before `since`: "CALL needs Linux X.Y
//   or later (this is A.B)";
// - ENOSYS on a kernel that has it: a seccomp filter answers for it (or the kernel was built
//   without it, when none is in force);
// - EPERM or EACCES: refused, by this process's seccomp filter or a missing capability (with a
//   filter in force), else by a missing capability or an LSM policy;
// - anything else: the call and its error.
std::string refusal(const Outcome& o, const ProcessFacts& facts);

// What to change so that the call works, for the report's last line.
std::string remedy(const Outcome& o, const ProcessFacts& facts);

}  // namespace cocoon::tools
