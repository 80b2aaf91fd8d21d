// Network namespace setup: bringing lo up. Runs in the sandbox's first process,
// inside its new network namespace, with CAP_NET_ADMIN over it.
#pragma once

namespace cocoon::net {

// Brings lo up over rtnetlink (libnl-route); the kernel gives it 127.0.0.1/8
// and ::1. Where
// netlink is refused (EPERM on hosts whose LSM restricts user namespaces),
// falls back to the SIOCSIFFLAGS ioctl. Throws SysError naming the cause if
// lo is still not up.
void loopback_up();

// The two ways, exposed for tests. Each throws SysError on failure.
void loopback_up_netlink();
void loopback_up_ioctl();

// True when lo is up and running.
bool loopback_is_up();

}  // namespace cocoon::net
