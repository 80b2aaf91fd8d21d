// Pinning a --relay's host socket at start. Runs in cocoon's own process before the sandbox
// exists, with the caller's privilege.
// Runs in: caller, monitor: the caller pins --relay SOCKET; the monitor connects to it.
#include "relay/host_socket.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cerrno>
#include <cstring>

#include <sys/socket.h>

#include "base/sys.h"
#include "base/sys_error.h"

namespace cocoon::relay {

HostSocket::HostSocket(const std::string& path, bool no_follow, const std::string& what) : m_path(path)
{
    // Security: the check and the open are one call, so nothing can swap a component between
    // them; what was checked is the inode every connection reaches.
    int err = sys::try_openat2(AT_FDCWD, path, O_PATH, no_follow ? RESOLVE_NO_SYMLINKS : 0, 0, m_fd);
    if (err == -ELOOP && no_follow)
        throw UsageError(what + ": a component is a symbolic link (refused by --no-follow-sources)");
    if (err < 0)
        throw SysError(-err, what);
    struct stat pinned;
    check(::fstat(m_fd.get(), &pinned), what);
    if (!S_ISSOCK(pinned.st_mode))
        throw UsageError(what + ": not a Unix socket");

    // connect(2) takes only a path: the fd's magic link in /proc, which leads to the inode itself
    // (a bound socket is found by its inode, whatever name it has now, or none). That needs the
    // caller's /proc to be a procfs that shows this process: checked once here. The monitor's
    // mount namespace is the caller's, which the sandbox cannot change.
    const std::string link = "/proc/self/fd/" + std::to_string(m_fd.get());
    struct statfs fs {};
    struct stat seen;
    if (::statfs("/proc/self/fd", &fs) < 0 || fs.f_type != PROC_SUPER_MAGIC || ::stat(link.c_str(), &seen) < 0 ||
        seen.st_dev != pinned.st_dev || seen.st_ino != pinned.st_ino)
        throw UsageError(what + ": /proc is not a procfs that shows cocoon's own fds (the relay connects through it)");
    m_address.sun_family = AF_UNIX;
    std::memcpy(m_address.sun_path, link.data(), link.size());
    m_address_length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + link.size() + 1);
}

int HostSocket::connect(UniqueFd& socket) const
{
    if (!socket)
        socket.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!socket || ::connect(socket.get(), address(), address_length()) < 0)
        return errno;
    return 0;
}

}  // namespace cocoon::relay
