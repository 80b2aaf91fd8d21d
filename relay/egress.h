// --egress PORT: an HTTP proxy outside the sandbox. The sandbox's clients speak HTTP proxy to
// 127.0.0.1:PORT and [::1]:PORT (CONNECT host:port for HTTPS, absolute-URI requests for plain
// HTTP); the proxy checks each target against --egress-allow, resolves it (through the host's name
// servers, on sockets the monitor made), asks the monitor to connect to the address it checked
// (the monitor checks again and connects: ns/monitor/upstream.h), and hands both sockets to the relay
// engine. Runs in the confined relay worker (relay/worker.h), which has no network of its own.
//
// The parts that decide (the request parser, relay/proxy_request.h; the allowlist and the address
// classes, relay/egress_policy.h) are pure functions, unit-tested and fuzzed; Egress is the event
// loop around them.
// Runs in: caller, monitor, worker: the caller and the monitor make EgressOptions; the worker runs
//  the proxy.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/unique_fd.h"
#include "relay/dns.h"
#include "relay/egress_log.h"
#include "relay/egress_policy.h"
#include "relay/proxy_request.h"
#include "relay/worker_protocol.h"
#include "base/rate_bound.h"

namespace cocoon::relay {

class Relay;
class Resolver;

struct EgressOptions {
    std::vector<AllowRule> allow;
    UniqueFd log;  // --egress-log: one JSON line per connection, and a summary at the end
    std::chrono::milliseconds head_timeout{10'000};  // a client must send its request head in this
    size_t max_pending = 512;  // clients in their handshake at once; past it, accepting waits
};

// The handshake phase of each client: read and parse the head, check, resolve, connect, answer;
// then the relay engine moves the bytes. Owns an epoll fd that the worker's loop polls; resolution runs
// on a thread of its own (Resolver), and the log never blocks (EgressLog), so nothing here blocks.
// Security: each client in its handshake holds a reservation of the relay's connection budget
// (Relay::reserve: its two fds), so handshakes and relayed connections together stay within the
// fds the worker has; at the limit, or after accept4 fails for want of fds, the listeners leave
// the epoll set (no spinning on a readable listener) and are looked at again on the next 250 ms
// tick, or when a handshake ends.
// Security: what the sandbox makes the worker write and answer is bounded too. Every refusal's
// line (proxy, transparent connection, DNS question) comes out of one RateBound: past it the
// refusal is tallied and counted, not written (the summary's "not-written"); the log has a byte
// cap (EgressLog). The resolver answers at most kQuestionsPerSecond: past that its socket leaves
// the epoll set until the tick, the questions wait unread, and the kernel drops what the socket's
// queue does not hold (the sender pays for that, in the sandbox's CPU); the socket's drop count
// and what is left unread at the end are the summary's "questions-dropped".
class Egress {
public:
    // The bound every refusal's line shares: a burst (an agent trying a handful of hosts in a
    // loop gets every line), then this many a second.
    static constexpr double kRefusalLinesPerSecond = 200;
    static constexpr double kRefusalLineBurst = 2000;
    // Questions the resolver reads and answers: as many as connections it accepts.
    static constexpr double kQuestionsPerSecond = 2000;
    static constexpr double kQuestionBurst = 2000;

    // Asks the monitor for a socket connecting to `address` (its port set) for client `id`, on
    // behalf of `name` (empty for an IP literal): EINPROGRESS (the answer comes to
    // upstream_answered, in order), EAGAIN (too many asked: asked again later) or an errno.
    using AskUpstream = std::function<int(uint64_t id, const std::string& name, const sockaddr_storage& address)>;

    Egress(EgressOptions options, Relay& relay, AskUpstream ask);
    ~Egress();
    Egress(const Egress&) = delete;
    Egress& operator=(const Egress&) = delete;

    // A listening TCP socket from the sandbox: the proxy's (127.0.0.1:PORT or [::1]:PORT), or
    // (transparent) one on 0.0.0.0:PORT whose clients came to an address of the resolver's.
    void add_listener(UniqueFd listener, bool transparent = false);
    // The transparent resolver's UDP socket on the sandbox's 127.0.0.1:53 (relay/dns.h).
    void add_resolver(UniqueFd socket);
    // A UDP socket the monitor connected to one of the host's name servers (Resolver).
    void add_name_server(UniqueFd socket);
    // The monitor's answer to client `id`'s upstream request: a socket whose connect is in
    // progress, or err (EACCES with `refusal`: the monitor refused the address).
    void upstream_answered(uint64_t id, UniqueFd socket, int err, wire::Refusal refusal);
    int epoll_fd() const { return m_epoll.get(); }
    void run_once();
    // Ends every handshake and writes the summary line to the log.
    void close_all();

private:
    struct Client;  // relay/egress_client.h
    using Clock = std::chrono::steady_clock;
    static constexpr uint64_t kResolverSocketToken = 4;

    void on_listener(size_t index);
    void on_client(uint64_t token, uint32_t events);
    // Transparent egress (egress_transparent.cc): a client of a transparent listener is a
    // CONNECT to the name its address stands for; the resolver's questions.
    void start_transparent(Client& c);
    void on_resolver_socket();
    std::string answer_question(std::string_view packet);
    // The resolver's socket in the epoll set or out of it (its questions past the rate wait).
    void watch_resolver(bool want);
    // Adds the questions the kernel dropped since the last look (SO_MEMINFO's drop count); with
    // at_end, those still queued too (read and discarded, bounded by the socket's queue).
    void count_dropped_questions(bool at_end);
    void on_resolved();
    void on_timer();
    void read_head(Client& c);
    void decide(Client& c);
    void start_connect(Client& c);
    bool ask(Client& c);
    // Asks again for the clients whose request did not fit (EAGAIN).
    void ask_waiting();
    void on_connected(Client& c);
    bool upstream_ready(Client& c);
    void hand_over(Client& c);
    // Answers `status` with `reason` (a transparent client: a reset), logs `result` and ends
    // the client.
    void refuse(Client& c, int status, EgressResult result, const std::string& reason);
    void finish(uint64_t id);
    // Writes c's line, stamped now: lines are written in the order of their "time".
    void log_line(const Client& c, EgressResult result, const std::string& reason, uint64_t up, uint64_t down);
    void sync_listeners();
    void sync_log();

    EgressOptions m_options;
    EgressPolicy m_policy;
    EgressLog m_log;
    bool m_log_in_epoll = false, m_log_watched = false;
    Relay& m_relay;
    AskUpstream m_ask;
    std::deque<uint64_t> m_waiting;  // clients to ask for again: the monitor had too many requests
    UniqueFd m_epoll, m_timer;
    std::vector<UniqueFd> m_listeners;
    std::vector<bool> m_transparent;  // by listener index
    UniqueFd m_resolver_socket;
    SyntheticNames m_names;
    bool m_listening = true;
    Clock::time_point m_paused_until{};  // accept4 failed for want of fds: not before then
    std::map<uint64_t, std::unique_ptr<Client>> m_clients;
    uint64_t m_next_id = 1;
    std::unique_ptr<Resolver> m_resolver;
    EgressTally m_tally;  // "host:port" -> what happened, for the summary
    RateBound m_refusal_lines{kRefusalLinesPerSecond, kRefusalLineBurst};
    uint64_t m_lines_held = 0;  // refusals past m_refusal_lines: counted, not written
    RateBound m_questions{kQuestionsPerSecond, kQuestionBurst};
    bool m_resolver_watched = false;
    uint32_t m_kernel_drops = 0;  // the socket's drop count when last looked at (it wraps)
    uint64_t m_questions_dropped = 0;
    bool m_closed = false;
    size_t m_accepted_this_second = 0;
    Clock::time_point m_second_started = Clock::now();
};

}  // namespace cocoon::relay
