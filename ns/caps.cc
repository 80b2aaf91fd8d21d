// Capability sets for the command (pure resolution) and their application with
// libcap in the sandbox's setup processes, which still hold every capability.
#include "ns/caps.h"

#include <sys/capability.h>

#include <cctype>
#include <memory>

#include "base/sys_error.h"

namespace cocoon::ns {

int parse_cap(const std::string& name)
{
    std::string lower;
    for (char c : name)
        lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.rfind("cap_", 0) != 0)
        lower = "cap_" + lower;
    cap_value_t cap;
    if (cap_from_name(lower.c_str(), &cap) < 0 || cap < 0 || cap >= 64)
        throw UsageError("Unknown capability " + name);
    return cap;
}

CapSet resolve_caps(bool caller_is_root, const std::vector<CapOp>& ops)
{
    CapSet caps = caller_is_root ? kAllCaps : 0;
    for (const CapOp& op : ops) {
        CapSet bits = op.name == "ALL" || op.name == "all" ? kAllCaps : CapSet{1} << parse_cap(op.name);
        caps = op.add ? caps | bits : caps & ~bits;
    }
    return caps;
}

void apply_caps(CapSet keep, bool ambient)
{
    const int last = static_cast<int>(cap_max_bits()) - 1;
    auto wanted = [&](int cap) { return (keep >> cap) & 1; };

    // Security: the bounding set caps what any later exec (a setuid binary,
    // file capabilities) could ever grant; clear what the command may not have.
    for (int cap = 0; cap <= last; ++cap)
        if (!wanted(cap) && cap_drop_bound(static_cast<cap_value_t>(cap)) < 0)
            throw SysError(errno, "Can't drop capability " + std::to_string(cap) + " from the bounding set");

    std::unique_ptr<std::remove_pointer_t<cap_t>, int (*)(void*)> caps(cap_init(), cap_free);
    if (!caps)
        throw SysError(errno, "cap_init");
    for (int cap = 0; cap <= last; ++cap) {
        if (!wanted(cap))
            continue;
        cap_value_t value = static_cast<cap_value_t>(cap);
        for (cap_flag_t flag : {CAP_PERMITTED, CAP_EFFECTIVE})
            check(cap_set_flag(caps.get(), flag, 1, &value, CAP_SET), "cap_set_flag");
        // Ambient capabilities must also be inheritable.
        if (ambient)
            check(cap_set_flag(caps.get(), CAP_INHERITABLE, 1, &value, CAP_SET), "cap_set_flag");
    }
    check(cap_set_proc(caps.get()), "Can't set capabilities");

    // Security: no ambient capability survives unless explicitly asked for.
    check(cap_reset_ambient(), "Can't clear ambient capabilities");
    if (ambient)
        for (int cap = 0; cap <= last; ++cap)
            if (wanted(cap))
                check(cap_set_ambient(static_cast<cap_value_t>(cap), CAP_SET), "Can't raise ambient capability");
}

}  // namespace cocoon::ns
