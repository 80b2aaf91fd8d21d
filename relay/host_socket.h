// The host Unix socket of a --relay, pinned at start: opened once as an O_PATH fd and connected
// through that fd's /proc link for every connection. Made and used by the monitor (outside the
// sandbox, with the caller's privilege).
// Runs in: caller, monitor: the caller pins --relay SOCKET; the monitor connects to it.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <string>

#include "base/unique_fd.h"
#include "relay/relay.h"

namespace cocoon::relay {

// Security: SOCKET may lie in a directory the sandbox can write (a read-write bind). Connected
// by path for each connection, a link or another socket the command put at that path would make
// the monitor connect wherever the command chose (an ssh-agent, a session bus the sandbox cannot
// see). So the path is resolved once, before the sandbox exists, and every connect goes to the
// inode found then: a swap after start changes nothing. A proxy that restarts with a new socket
// file is not reached either (one that keeps its listening socket, as under systemd's socket
// activation, is).
class HostSocket : public Target {
public:
    // Opens `path` (O_PATH). With no_follow (--no-follow-sources) a symbolic link in any component
    // is refused; else links are followed, once. What it reaches must be a socket. `what` names
    // the option in messages ("--relay 3128 /run/proxy.sock"). Throws UsageError or SysError.
    HostSocket(const std::string& path, bool no_follow, const std::string& what);
    HostSocket(const HostSocket&) = delete;
    HostSocket& operator=(const HostSocket&) = delete;

    // What connect(2) takes: "/proc/self/fd/N" of the pinned fd. No length limit on path follows.
    const sockaddr* address() const { return reinterpret_cast<const sockaddr*>(&m_address); }
    socklen_t address_length() const { return m_address_length; }
    // The path as given, for messages.
    const std::string& path() const override { return m_path; }
    // Connects `socket` (made here when empty) to the pinned inode: 0 or the errno.
    int connect(UniqueFd& socket) const override;

private:
    std::string m_path;
    UniqueFd m_fd;
    sockaddr_un m_address{};
    socklen_t m_address_length = 0;
};

}  // namespace cocoon::relay
