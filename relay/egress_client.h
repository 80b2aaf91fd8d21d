// Egress's client in its handshake, for the two files of the handshake loop (egress.cc, and
// egress_transparent.cc for clients that ignore the proxy variables). Internal to relay/.
// Runs in: worker.
#pragma once

#include <netinet/in.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "relay/egress.h"
#include "relay/relay.h"

namespace cocoon::relay {

// A client's upstream socket's epoll token: its id with this bit.
inline constexpr uint64_t kUpstreamBit = uint64_t{1} << 62;

struct Egress::Client {
    uint64_t id = 0;
    UniqueFd fd;
    UniqueFd upstream;
    // Asking: waiting for the monitor's socket for `target`.
    enum class State { Head, Resolving, Asking, Connecting, Sending } state = State::Head;
    std::string buffer;  // the head as received, then what is still to send upstream
    size_t head_size = 0;
    ProxyRequest request;
    std::vector<sockaddr_storage> candidates;
    sockaddr_storage target{};
    std::string refused;  // why the monitor refused the first address it refused, if it did
    bool failed = false;  // an address that was not refused failed to connect
    Clock::time_point deadline;
    Clock::time_point started;
    uint64_t sent = 0;  // bytes sent upstream before the relay took over
    uint64_t upload_left = 0;  // plain HTTP: body bytes still to come from the client
    std::string_view via;  // the log's "via": empty for the proxy's clients, "transparent"
    // Its share of the relay's connection budget (two fds), given back when the client goes,
    // unless adopt took it over.
    Relay* reservation = nullptr;
    Client() = default;
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    ~Client()
    {
        if (reservation)
            reservation->release();
    }
    std::string key() const { return request.host + ":" + std::to_string(request.port); }
};

}  // namespace cocoon::relay
