// Relay listeners: TCP sockets on 127.0.0.1:PORT and [::1]:PORT, made inside
// the sandbox's network namespace by its first process (before privileges drop).
#pragma once

#include <cstdint>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::net {

// Listening, non-blocking, CLOEXEC sockets on 127.0.0.1:port and, where the
// kernel has IPv6, [::1]:port (IPV6_V6ONLY). Throws SysError naming the port.
std::vector<UniqueFd> listen_loopback(uint16_t port);

}  // namespace cocoon::net
