// Capability sets for the command (pure resolution) and their application in
// the sandbox's setup processes, which still hold every capability. libcap
// names the capabilities and knows the kernel's last one; the sets are written
// with capset and prctl directly (see apply_caps).
// Runs in: caller, setup, pid1, pid2: the caller decides the sets; set-up, PID 1 and PID 2 drop to
//  them.
#include "ns/setup/caps.h"

#include <sys/capability.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "base/sys_error.h"

namespace cocoon::ns {

int parse_cap(const std::string& name)
{
    std::string lower = name;
    std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower.rfind("cap_", 0) != 0)
        lower = "cap_" + lower;
    cap_value_t cap;
    if (cap_from_name(lower.c_str(), &cap) < 0 || cap < 0 || cap >= 64)
        throw UsageError("Unknown capability " + name);
    return cap;
}

CapSet apply_cap_ops(CapSet start, const std::vector<CapOp>& ops)
{
    CapSet caps = start;
    for (const CapOp& op : ops) {
        CapSet bits = op.name == "ALL" || op.name == "all" ? kAllCaps : CapSet{1} << parse_cap(op.name);
        caps = op.add ? caps | bits : caps & ~bits;
    }
    return caps;
}

// One system call per capability to drop from the bounding set (the kernel has
// no call that drops several), one capset, one call for the ambient set. libcap's
// cap_set_proc and cap_reset_ambient would add a capget and one prctl per
// capability (PR_CAP_AMBIENT_IS_SET) in each of the two processes that call this,
// on the start-up path of every sandbox.
void drop_bounding(CapSet keep, CapSet bounding)
{
    const int last = static_cast<int>(cap_max_bits()) - 1;
    // Security: the bounding set caps what any later exec (a setuid binary,
    // file capabilities) could ever grant; clear what the command may not have.
    for (int cap = 0; cap <= last; ++cap)
        if (((bounding & ~keep) >> cap) & 1 && ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
            throw SysError(errno, "Can't drop capability " + std::to_string(cap) + " from the bounding set");
}

void apply_caps(CapSet keep, bool ambient, CapSet bounding)
{
    const int last = static_cast<int>(cap_max_bits()) - 1;
    drop_bounding(keep, bounding);

    // The kernel's bits past the last capability it knows must stay clear.
    const CapSet known = last >= 63 ? kAllCaps : (CapSet{1} << (last + 1)) - 1;
    const CapSet sets = keep & known;
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    for (int i = 0; i < 2; ++i) {
        const auto word = static_cast<__u32>(sets >> (32 * i));
        data[i].permitted = word;
        data[i].effective = word;
        // Ambient capabilities must also be inheritable.
        data[i].inheritable = ambient ? word : 0;
    }
    check(capset(&header, data), "Can't set capabilities");

    // Security: no ambient capability survives unless explicitly asked for.
    check(::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "Can't clear ambient capabilities");
    if (ambient)
        for (int cap = 0; cap <= last; ++cap)
            if ((keep >> cap) & 1)
                check(::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0), "Can't raise ambient capability");
}

}  // namespace cocoon::ns
