// --egress's upstreams (relay/egress.h): each candidate address is asked of the monitor, which
// checks it again and answers with a socket whose connect it started, or a refusal
// (ns/monitor/upstream.h). Runs in the confined relay worker, in the handshake loop (egress.cc).
// Runs in: worker.
#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "relay/egress.h"
#include "relay/egress_client.h"

namespace cocoon::relay {

namespace {

// The reason the log gives for the monitor's refusal of `address` for `host`: the words
// EgressPolicy uses.
std::string refusal_text(const std::string& host, bool literal, const sockaddr_storage& address, uint16_t port,
                         wire::Refusal refusal)
{
    const std::string where = address_text(address);
    switch (refusal) {
    case wire::kInternal:
        return host + " resolves to " + where + ", a " + internal_address_class(address) +
               " address that is not on the allowlist";
    case wire::kOwnAddress:
        return host + " resolves to " + where + ", an address of this host that is not on the allowlist";
    default:
        return literal ? "the address " + host + " port " + std::to_string(port) + " is not on the allowlist"
                       : host + " port " + std::to_string(port) + " is not on the allowlist";
    }
}

}  // namespace

// Asks the monitor for a socket connecting to the next candidate address; upstream_answered
// takes the answer, on_connected the connect's outcome.
void Egress::start_connect(Client& c)
{
    if (c.candidates.empty()) {
        // Every address was refused by the monitor (an address of the host's, which the worker
        // cannot see) or failed.
        if (!c.failed && !c.refused.empty())
            refuse(c, 403, EgressResult::Refused, c.refused);
        else
            refuse(c, 502, EgressResult::Unreachable, "can't connect to " + c.key());
        return;
    }
    c.state = Client::State::Asking;
    c.deadline = Clock::now() + m_options.head_timeout;
    if (!ask(c))
        m_waiting.push_back(c.id);
}

// False when the monitor has too many requests (EAGAIN): ask again later.
bool Egress::ask(Client& c)
{
    const bool literal = parse_ip_literal(c.request.host, 0).has_value();
    const int err = m_ask(c.id, literal ? std::string() : c.request.host, c.candidates.front());
    if (err == EAGAIN)
        return false;
    c.target = c.candidates.front();
    c.candidates.erase(c.candidates.begin());
    if (err != EINPROGRESS)
        refuse(c, 502, EgressResult::Unreachable, std::string("no connection to the monitor: ") + std::strerror(err));
    return true;
}

void Egress::ask_waiting()
{
    while (!m_waiting.empty()) {
        auto it = m_clients.find(m_waiting.front());
        if (it != m_clients.end() && it->second->state == Client::State::Asking && !it->second->candidates.empty() &&
            !ask(*it->second))
            return;
        m_waiting.pop_front();
    }
}

void Egress::upstream_answered(uint64_t id, UniqueFd socket, int err, wire::Refusal refusal)
{
    auto it = m_clients.find(id);
    if (it != m_clients.end() && it->second->state == Client::State::Asking) {
        Client& c = *it->second;
        epoll_event ev{};
        ev.events = EPOLLOUT | EPOLLRDHUP;
        ev.data.u64 = c.id | kUpstreamBit;
        if (socket && ::epoll_ctl(m_epoll.get(), EPOLL_CTL_ADD, socket.get(), &ev) == 0) {
            c.upstream = std::move(socket);
            c.state = Client::State::Connecting;
        } else {
            if (!socket && err == EACCES && refusal != wire::kNotRefused) {
                if (c.refused.empty())
                    c.refused = refusal_text(c.request.host, parse_ip_literal(c.request.host, 0).has_value(), c.target,
                                             c.request.port, refusal);
            } else {
                c.failed = true;
            }
            start_connect(c);
        }
    }
    // Else the client went while it waited: the socket closes here.
    ask_waiting();
}

}  // namespace cocoon::relay
