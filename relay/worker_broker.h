// The relay worker's side of its requests to the monitor (relay/worker.h): a request per client
// on the pipe, the answers in order to a FIFO of waiters. Internal to relay/worker.cc; runs in the
// confined worker.
// Runs in: worker.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <span>
#include <stdexcept>
#include <string>

#include "base/wire_rules.h"
#include "relay/egress.h"
#include "relay/fd_message.h"
#include "relay/relay.h"
#include "relay/worker_protocol.h"

namespace cocoon::relay {

// The worker's end of the request pipe and of the answer socket, both
// non-blocking: a request per client goes out and the loop goes on; the answers, in the same
// order, go to whoever waits at the head of a FIFO: a --relay client (Relay::connected, which
// keeps its own order) or an --egress client (Egress::upstream_answered, by id). At most
// kMaxInFlight requests are unanswered, so the monitor's answers always fit the socket's queue; a
// client past that waits (a --relay client as for a full backlog, an --egress one for the next
// answer).
class Broker {
public:
    static constexpr unsigned kMaxInFlight = 64;
    // requests: the pipe's write end; answers: the answer socket's end. Both non-blocking.
    Broker(size_t buffer_size, int requests, int answers)
        : m_buffer_size(buffer_size), m_requests(requests), m_answers(answers)
    {
    }

    int request_connect(uint32_t target)
    {
        wire::Request msg;
        msg.kind = wire::kConnect;
        msg.target = target;
        return send(msg, {Waiter::Relay, 0});
    }

    int request_upstream(uint64_t client, const std::string& name, const sockaddr_storage& address)
    {
        wire::Request msg;
        msg.kind = wire::kUpstream;
        msg.family = address.ss_family;
        if (address.ss_family == AF_INET) {
            const auto& in4 = reinterpret_cast<const sockaddr_in&>(address);
            msg.port = ntohs(in4.sin_port);
            std::memcpy(msg.address, &in4.sin_addr, sizeof in4.sin_addr);
        } else {
            const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
            msg.port = ntohs(in6.sin6_port);
            std::memcpy(msg.address, &in6.sin6_addr, sizeof in6.sin6_addr);
        }
        if (name.size() > sizeof msg.name)
            return EINVAL;
        msg.name_size = static_cast<uint8_t>(name.size());
        std::memcpy(msg.name, name.data(), name.size());
        return send(msg, {Waiter::Egress, client});
    }

    // Every answer that has come. False once the monitor's end is gone or broken (the order is
    // lost: every request out fails, and no more are sent).
    // A message the table does not allow throws (the worker ends: the monitor is trusted, so that
    // is a bug of cocoon's).
    bool take_answers(Relay& relay, Egress* egress, WireCheck& check)
    {
        for (;;) {
            wire::Answer answer;
            UniqueFd socket;
            int err = receive_msg(m_answers, answer, std::span(&socket, 1), MSG_DONTWAIT);
            if (err == EAGAIN || err == EWOULDBLOCK)
                return true;
            if (err == 0 && !m_waiting.empty()) {
                const std::string wrong =
                    check.admit(answer.kind, wire::kWorkerServing, socket ? 1 : 0, RateBound::Clock::now());
                if (!wrong.empty())
                    throw std::runtime_error("the monitor sent " + wrong);
            }
            // A failure carries no socket; a socket answer, one.
            if (err != 0 || m_waiting.empty() || (answer.kind == wire::kFailed) == static_cast<bool>(socket)) {
                m_broken = true;
                ::shutdown(m_answers, SHUT_RDWR);
                ::close(m_requests);
                for (; !m_waiting.empty(); m_waiting.pop_front())
                    complete(m_waiting.front(), relay, egress, {}, EPIPE, wire::kNotRefused);
                return false;
            }
            const Waiter waiter = m_waiting.front();
            m_waiting.pop_front();
            err = answer.kind == wire::kFailed ? (answer.err != 0 ? answer.err : EIO) : 0;
            if (err == 0 && waiter.kind == Waiter::Relay) {  // the Unix socket to a --relay's host socket
                const int size = static_cast<int>(std::min<size_t>(2 * m_buffer_size, 1 << 30));
                ::setsockopt(socket.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
            }
            complete(waiter, relay, egress, std::move(socket), err, static_cast<wire::Refusal>(answer.refusal));
        }
    }

private:
    struct Waiter {
        enum Kind : uint8_t { Relay, Egress } kind;
        uint64_t client;  // Egress: its id
    };

    int send(const wire::Request& msg, Waiter waiter)
    {
        if (m_broken)
            return EPIPE;
        if (m_waiting.size() >= kMaxInFlight)
            return EAGAIN;
        const ssize_t n = ::write(m_requests, &msg, sizeof msg);  // whole or not at all: under PIPE_BUF
        if (n != static_cast<ssize_t>(sizeof msg))
            return n < 0 && errno == EAGAIN ? EAGAIN : EPIPE;
        m_waiting.push_back(waiter);
        return EINPROGRESS;
    }

    static void complete(const Waiter& waiter, Relay& relay, Egress* egress, UniqueFd socket, int err,
                         wire::Refusal refusal)
    {
        if (waiter.kind == Waiter::Relay)
            relay.connected(std::move(socket), err);
        else if (egress)
            egress->upstream_answered(waiter.client, std::move(socket), err, refusal);
    }

    size_t m_buffer_size;
    int m_requests, m_answers;
    std::deque<Waiter> m_waiting;
    bool m_broken = false;
};

// --relay's target as the confined worker reaches it: the monitor connects a socket of its own
// making to the pinned host socket and hands it over.
class BrokeredTarget : public Target {
public:
    BrokeredTarget(uint32_t index, std::string path, Broker& broker)
        : m_index(index), m_path(std::move(path)), m_broker(broker)
    {
    }
    bool takes_socket() const override { return false; }
    const std::string& path() const override { return m_path; }
    int connect(UniqueFd& socket) const override
    {
        socket.reset();
        return m_broker.request_connect(m_index);
    }

private:
    uint32_t m_index;
    std::string m_path;
    Broker& m_broker;
};

}  // namespace cocoon::relay
