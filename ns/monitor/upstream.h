// The monitor's half of --egress (relay/worker.h, ns/monitor/relay_worker.h): the relay worker,
// in an empty network namespace with no socket(2) or connect(2), asks for each upstream
// connection; the monitor decides as the worker did (the same EgressPolicy from the same
// --egress-allow rules, the host's own addresses) and makes the connection itself, in the host's
// network namespace. It also hands the worker's resolver one connected UDP socket per name server
// of the host's /etc/resolv.conf.
// Security: nothing here parses a byte the sandbox chose but a name of at most 253 bytes, checked
// with valid_name; no DNS answer is read in the monitor (SECURITY.md, "What a worker taken over
// still has").
// Runs in: monitor.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "relay/egress_policy.h"
#include "relay/worker_protocol.h"

namespace cocoon::ns {

// The addresses of every interface of the host's network namespace (getifaddrs); empty when
// they cannot be read.
std::vector<sockaddr_storage> host_addresses();

struct UpstreamAnswer {
    UniqueFd socket;  // connect(2) in progress (or done): the worker waits for EPOLLOUT
    int err = 0;  // when no socket: why
    relay::wire::Refusal refusal = relay::wire::kNotRefused;
};

class UpstreamGate {
public:
    explicit UpstreamGate(std::vector<relay::AllowRule> rules) : m_policy(std::move(rules)) {}

    // The answer to an upstream request, or, for a request no honest worker writes (a family
    // other than IPv4 and IPv6, a name that is not a valid_name), empty with `malformed` saying
    // what is wrong (the worker is then killed).
    // Security: the same decision the worker made before asking: the name and port on the
    // allowlist (an IP literal listed as an address) and the address admitted (no internal
    // address nor one of the host's own, unless listed). Never blocks: the socket is non-blocking
    // and its connect(2) is left in progress; no SO_LINGER is set; the caller closes its copy as
    // soon as it is sent.
    UpstreamAnswer decide(const relay::wire::Request& request, std::string& malformed);

private:
    relay::EgressPolicy m_policy;
    std::chrono::steady_clock::time_point m_own_read{};
};

// One UDP socket per name server /etc/resolv.conf names (as c-ares reads it: at most
// relay::wire::kMaxNameServers, port included), non-blocking, connected in the host's network namespace.
// A server a socket cannot be made for is left out; `error` says why, for a warning.
std::vector<UniqueFd> name_server_sockets(std::string& error);

}  // namespace cocoon::ns
