// Relay listeners: TCP sockets on 127.0.0.1:PORT and [::1]:PORT, made inside
// the sandbox's network namespace by its first process (before privileges drop).
// Runs in: setup.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::net {

// Listening, non-blocking, CLOEXEC sockets on 127.0.0.1:port and, where the
// kernel has IPv6, [::1]:port (IPV6_V6ONLY). Throws SysError naming the
// option ("--relay", "--egress") and the port.
std::vector<UniqueFd> listen_loopback(uint16_t port, const std::string& option);

// --egress's transparent half (relay/dns.h): a listener on 0.0.0.0:port for
// each port, which in the sandbox's namespace (loopback only) takes every
// 127.x.y.z the resolver hands out.
std::vector<UniqueFd> listen_transparent(const std::vector<uint16_t>& ports);

// The synthetic addresses' network (relay/dns.h's SyntheticNames gives out
// 127.16.X.Y), added to lo by the sandbox's first process (add_loopback_address).
inline constexpr char kTransparentNet[] = "127.16.0.1/16";

// --egress's resolver inside: a UDP socket on 127.0.0.1:53.
UniqueFd dns_socket();

}  // namespace cocoon::net
