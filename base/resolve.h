// openat2's path resolution done in userspace, for where the kernel answers openat2 with ENOSYS
// (a seccomp policy that cannot read struct open_how, such as cocoon's own around a nested
// cocoon; a kernel before 5.6). Runs in whichever process calls sys::try_openat2.
// Runs in: caller, setup: the caller resolves bind sources, login SRC and --relay sockets; set-up
//  resolves in the new root.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/unique_fd.h"

namespace cocoon::sys {

// What openat2(dirfd, path, {flags | O_CLOEXEC, mode, resolve}) answers: 0 with the fd in out, or
// -errno. resolve may hold RESOLVE_IN_ROOT, RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS and
// RESOLVE_NO_MAGICLINKS; any other bit is answered -ENOSYS (not emulated, so refused). Every
// component is opened from a held directory fd with O_NOFOLLOW, and every symlink is read and its
// text resolved under the same rules; ".." is lexical (a stack of held fds), so a concurrent
// rename cannot take the walk above the root. try_openat2 calls it; tests call it directly to
// compare it with the kernel's.
int openat2_userspace(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode,
                      UniqueFd& out);

}  // namespace cocoon::sys
