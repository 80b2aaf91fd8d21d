// A /proc the kernel will not mount again: a container's runtime masks paths of the /proc it gives
// (binds /dev/null over /proc/kcore, a tmpfs over /proc/acpi, /proc/sys read-only), and Linux then
// refuses a new procfs in a user namespace (EPERM: the new mount would show what the masks hide,
// fs/namespace.c's mount_too_revealing). Found from the mount table, never guessed: --proc's
// failure (mount/apply.cc) and `--check` (tools/cocoon/check.cc) say the same line.
// Runs in: caller, setup: --check asks it before any sandbox; set-up when a proc mount fails.
#pragma once

#include <string>
#include <string_view>

#include "base/unique_fd.h"

namespace cocoon::mount {

// The first path mounted over below a procfs mount point in a mountinfo text, preferring a mask
// (a mount of another filesystem: "/proc/kcore") to a procfs bound on itself ("/proc/sys"); ""
// when there is none. /proc/sys/fs/binfmt_misc is passed over: the kernel keeps that directory
// empty, so a mount there hides nothing and never makes a new procfs refused. Pure.
std::string masked_proc_path(std::string_view mountinfo);

// What to do about it, after "Operation not permitted: ": what the kernel refused and why, naming
// `path`, and each runtime's option that unmasks /proc. Pure.
std::string masked_proc_advice(const std::string& path);

// Whether this process's user namespace is another than the initial one (its uid_map is not the
// whole identity map): only there does Linux refuse a procfs for being masked.
bool in_user_namespace();

// A new procfs for --proc at dest (nosuid, nodev, noexec). Where Linux refuses it (EPERM) in a
// user namespace and this process's mount table shows a masked /proc, throws UsageError with one
// line: bwrap's words, then masked_proc_advice; else SysError, as new_mount does.
UniqueFd new_proc(const std::string& dest);

}  // namespace cocoon::mount
