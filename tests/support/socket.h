// Socket helpers of the relay's tests and benchmark: addresses, listeners, connections, whole
// sends and receives. Run in the test (or benchmark) process; no privilege. No GoogleTest here, so
// that tools/bench/relay.cc links it too.
#pragma once

#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/unique_fd.h"

namespace cocoon::test {

// A socket address of any family, with its length.
struct Address {
    sockaddr_storage storage{};
    socklen_t len = 0;
    const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
    int family() const { return storage.ss_family; }
};

// 127.0.0.1 (AF_INET) or ::1 (AF_INET6) at `port` (0: any free port, once bound).
Address loopback(int family = AF_INET, uint16_t port = 0);
// An IPv4 or IPv6 literal and a port; nothing for anything else.
std::optional<Address> ip_address(const std::string& host, uint16_t port);
// A Unix socket path; throws SysError(ENAMETOOLONG) where it does not fit in sun_path.
Address unix_address(const std::string& path);
// Where fd is bound (getsockname).
Address address_of(int fd);
uint16_t port_of(const Address& addr);

// Every blocking call on fd gives up after `timeout` instead of hanging the suite.
void set_timeouts(int fd, std::chrono::milliseconds timeout);

// A stream socket bound to addr and listening; `flags` such as SOCK_NONBLOCK. Throws SysError.
UniqueFd listen_on(const Address& addr, int backlog = 4096, int flags = 0);
// A blocking connection to addr whose calls time out after `timeout`; invalid, with errno set, if
// the connection failed (an expected outcome for the tests that refuse one).
UniqueFd try_connect(const Address& addr, std::chrono::milliseconds timeout = std::chrono::seconds(10));
// try_connect, or a SysError naming connect.
UniqueFd connect_to(const Address& addr, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Sends all of data; false on an error or a peer that is gone (never SIGPIPE). EINTR is retried; on
// a non-blocking socket EAGAIN waits for room, 5 s at most.
bool send_all(int fd, const void* data, size_t len);
bool send_all(int fd, std::string_view data);
// Reads exactly len bytes unless EOF or an error comes first; returns how many it read.
size_t recv_exact(int fd, void* data, size_t len);
// Reads until EOF (true) or an error (false, errno kept), handing each chunk read (at most
// `chunk` bytes) to `take`.
bool read_to_eof(int fd, const std::function<void(const char* data, size_t len)>& take, size_t chunk = 65536);
// Reads until EOF (true) or an error (false, errno kept); keeps at most `max` bytes in `out`.
bool read_to_eof(int fd, std::string& out, size_t max = size_t{1} << 20);
// One '\n'-terminated line (without it), read a byte at a time so nothing after it is consumed;
// nothing on EOF, an error or a line longer than max.
std::optional<std::string> read_line(int fd, size_t max = 4096);

// Raises the soft RLIMIT_NOFILE to at least `want` (the hard limit too, where privilege allows),
// else as far as the hard limit goes. Returns the soft limit now in force.
rlim_t raise_nofile(rlim_t want = RLIM_INFINITY);

}  // namespace cocoon::test
