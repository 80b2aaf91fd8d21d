// Capabilities of the command: which set it keeps (pure) and dropping the rest
// (capset, prctl). Applied in the sandbox's processes just before they exec or serve.
// Runs in: caller, setup, pid1, pid2: the caller decides the sets; set-up, PID 1 and PID 2 drop to
//  them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cocoon::ns {

using CapSet = std::uint64_t;  // bit N = capability N
constexpr CapSet kAllCaps = ~CapSet{0};

struct CapOp {
    bool add;  // --cap-add, else --cap-drop
    std::string name;  // "ALL", "CAP_NET_ADMIN" or "net_admin"
};

// --cap-add/--cap-drop applied in order to `start` (bwrap's rule: what a
// root caller holds, nothing for anyone else). Throws UsageError for an
// unknown name.
CapSet apply_cap_ops(CapSet start, const std::vector<CapOp>& ops);

// Parses one capability name as libcap spells it, with or without "CAP_",
// any case. Throws UsageError naming it when unknown.
int parse_cap(const std::string& name);

// Drops from the bounding set each capability of `bounding` (what it holds
// now) that is not in `keep`: one system call each, the kernel has no bulk
// drop. Needs CAP_SETPCAP in the effective set.
void drop_bounding(CapSet keep, CapSet bounding = kAllCaps);

// Bounding, permitted, effective and inheritable sets become `keep`; ambient
// too when `ambient` (so a non-root uid keeps them across exec), else empty.
// `bounding`: what the bounding set holds now (a process forked after
// drop_bounding passes what was kept). Needs CAP_SETPCAP (held by the
// namespace's creator or root).
void apply_caps(CapSet keep, bool ambient, CapSet bounding = kAllCaps);

}  // namespace cocoon::ns
