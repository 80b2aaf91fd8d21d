// Network namespace setup: bringing lo up, inside the sandbox's new network namespace, with
// CAP_NET_ADMIN over it.
// Runs in: monitor, setup: in the first process, or where the monitor's helper made the namespace
//  (ns/launch.cc), the ioctl way there first.
#pragma once

#include <string>

namespace cocoon::net {

// Brings lo up with the SIOCSIFFLAGS ioctl (the kernel then gives it
// 127.0.0.1/8 and ::1); where the ioctl is refused or leaves lo down, falls
// back to rtnetlink (libnl-route). Throws SysError naming both causes if lo is
// still not up.
void loopback_up();

// The two ways, exposed for tests. Each throws SysError on failure. The ioctl sets IFF_UP on lo
// and returns lo's flags as the kernel reports them afterwards.
void loopback_up_netlink();
short loopback_up_ioctl();

// The ioctl way for a caller that may not throw or allocate (ns/launch.cc's helper, which makes
// the network namespace as a vfork-style child of the monitor): sets IFF_UP on lo through sock, an
// AF_INET socket of the namespace. True when lo is then up and running; where it is not, the first
// process runs loopback_up() once it has joined the namespace, with its fallback and errors.
bool loopback_up_quietly(int sock) noexcept;

// True when lo is up and running.
bool loopback_is_up();

// Adds an IPv4 address (CIDR text) to lo, scope host, over rtnetlink.
// --egress's transparent half adds one (relay/dns.h): with 127.0.0.1 alone,
// the C library's getaddrinfo(AI_ADDRCONFIG), which Node's connect uses, sees
// no IPv4 address configured and asks no DNS question at all.
void add_loopback_address(const std::string& cidr);

}  // namespace cocoon::net
