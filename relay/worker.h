// The confined relay worker: the process that reads what the sandbox sends (the --relay
// streams, the --egress proxy's requests, the names it resolves) holds no right worth taking, and
// nothing of the monitor's either.
// The monitor clones it before any such byte arrives, and the child runs cocoon's own binary
// again as a fresh image (sshd's re-exec: execveat of /proc/self/exe, argv[1] an internal marker,
// tools/cocoon/entry.cc), with an empty environment and only its fds at fixed numbers: /dev/null as
// stdin and stdout, a pipe as stderr (the monitor forwards it, bounded: relay/worker_stderr.h),
// the control and answer sockets, the --egress-log (a description of cocoon's own: O_APPEND for a
// regular file, tools/cocoon/entry.cc; O_NONBLOCK for a pipe or terminal) or /dev/null, the request
// pipe, and a memfd with its options (relay/worker_config.h), read and closed first. So no copy of
// the monitor's memory (the caller's environment, which --clearenv keeps from the sandbox; what
// the monitor read) and no file description of the caller's is the worker's to take. It then
// confines itself (an empty read-only root of its own, an empty network namespace of its own, no
// capabilities, no_new_privs, a seccomp allowlist without socket(2) or connect(2), and for a root
// caller a uid and gid of its run's own, 0x70000000 + the monitor's pid) and runs the relay and
// egress engines. What needs the caller's rights or the host's network stays in the monitor,
// which it asks in small fixed-size messages, each typed on the wire and checked against one
// table (relay/worker_protocol.h: phase, how often, fds):
//
//   monitor -> worker (control):  NameServer + a UDP socket connected to a name server of the
//                                 host's (first, right after the clone, for --egress's resolver);
//                                 Listener {kind, index} + the listener's fd (SCM_RIGHTS): a
//                                 --relay's, --egress's proxy, transparent or resolver socket;
//                                 Stop {} (the sandbox ended: close everything, write the
//                                 egress summary, exit)
//   worker -> monitor (requests): Connect {target} (a --relay client was accepted);
//                                 Upstream {name, address, port} (an --egress client's checked
//                                 target), on a pipe: no fd can cross to the monitor
//   monitor -> worker (answers):  Socket + a Unix socket the monitor connected to that --relay's
//                                 pinned host socket, or a TCP socket whose non-blocking connect
//                                 to the upstream it started after checking it again
//                                 (relay/upstream.h); Failed {errno, refusal}
//
// The two sockets carry fds one way: the monitor's ends are shut for reading, and non-blocking
// (a full queue is the worker's end, never the monitor's hang). A request the table does not
// allow (a wrong size or kind, a flood past its rate, a --relay index or an address family that
// does not exist) gets the worker killed (one line on stderr and in the egress log); the sandbox
// goes on without relay and egress, as when the worker dies. A refused upstream is answered, not
// fatal: an honest worker cannot see the host's own addresses from its network namespace.
//
// The worker does not wait for an answer: answers come in request order and complete a FIFO of
// waiters (a --relay client, Relay::connected; an --egress client, Egress::upstream_answered); at
// most 64 requests are unanswered at once, so the answers always fit.
//
// No byte of the sandbox's reaches the monitor but a name of at most 253 bytes (valid_name): a
// request is an index the monitor checks against the --relay count, or a target it checks as the
// worker did; the monitor makes the socket itself (a socket of the worker's could be made
// blocking and hang the monitor's connect). ARCHITECTURE.md draws both processes.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "base/wire_rules.h"
#include "relay/egress.h"
#include "relay/relay.h"
#include "relay/upstream.h"
#include "relay/worker_protocol.h"
#include "relay/worker_stderr.h"

namespace cocoon::relay {

class HostSocket;

// What a socket handed over is for: the index-th --relay's listener, the --egress proxy's, a
// transparent egress listener, the transparent resolver's UDP socket (relay/dns.h).
enum class ListenerKind : uint32_t {
    Relay = wire::kRelayListener,
    EgressProxy = wire::kEgressProxy,
    Transparent = wire::kTransparent,
    Resolver = wire::kResolverSocket,
};

struct WorkerOptions {
    RelayOptions relay;  // log: the worker writes "PREFIX" + line to its stderr
    std::string log_prefix;  // --level-prefix's, for the relay's lines
    std::vector<std::string> relay_names;  // each --relay's socket path, for messages
    // --egress: head_timeout, max_pending and the log; the rules cross as egress_allow's text
    // (relay/worker_config.h), and the worker parses them again.
    std::optional<EgressOptions> egress;
    std::vector<std::string> egress_allow;  // each --egress-allow PATTERN
};

// The exec'd worker's entry (tools/cocoon/entry.cc, as ns::is_pid1_mode): whether argv (without argv[0])
// is the worker's internal marker, and the worker itself, which never returns.
bool is_worker_mode(const std::vector<std::string>& args);
[[noreturn]] void worker_entry();

class Worker {
public:
    // Starts the worker: a clone that runs cocoon's binary again (above). `targets`: each
    // --relay's pinned host socket, in command-line order (the monitor's to connect). cgroup: a
    // cgroup v2 directory the worker starts in
    // (CLONE_INTO_CGROUP: the sandbox's leaf for it, so what the sandbox makes it spend counts
    // against the sandbox's limits), or -1 for the monitor's own. Throws SysError when the worker
    // cannot start; the worker itself exits with status 1 and a message on stderr when it cannot
    // confine itself.
    Worker(WorkerOptions options, std::vector<std::shared_ptr<const HostSocket>> targets, int cgroup = -1);
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    pid_t pid() const { return m_pid; }
    // The worker's stderr (relay/worker_stderr.h): readable when it wrote, or ended; -1 once at
    // its end. forward_stderr() forwards what it holds, bounded, and never waits.
    int stderr_fd() const { return m_stderr_open ? m_stderr.get() : -1; }
    void forward_stderr();
    // Readable when the worker asks for a connection (serve()), or hung up (it ended).
    int fd() const { return m_requests.get(); }
    // Answers the worker's waiting requests. False once the worker is gone, or was killed for a
    // malformed request.
    bool serve();
    // Hands over a listener (kind Relay: the index-th --relay's).
    void add_listener(UniqueFd listener, ListenerKind kind, uint32_t index);
    // The sandbox ended: the worker closes every connection and writes the egress summary; waits
    // for it (2 s at most, then kills it). A warning on stderr names how it ended, if not well.
    void stop(const std::string& log_prefix);
    // The CPU the worker used, user and system, all its threads, in microseconds: known once
    // stop() reaped it.
    std::optional<uint64_t> cpu_us() const { return m_cpu_us; }

private:
    pid_t m_pid = -1;
    std::optional<uint64_t> m_cpu_us;
    UniqueFd m_pidfd, m_control, m_answers, m_requests;
    UniqueFd m_log;  // a copy of --egress-log's fd, for the line that says the worker was killed
    UniqueFd m_stderr;  // the read end of the worker's stderr
    bool m_stderr_open = true;  // not yet at its end
    StderrLines m_stderr_lines{""};
    std::string m_log_prefix;
    std::string m_killed_for;  // the malformed request the worker was killed for, if it was
    std::vector<std::shared_ptr<const HostSocket>> m_targets;
    std::optional<UpstreamGate> m_upstream;  // with --egress: the monitor's decision
    WireCheck m_check{wire::rules()};
    uint32_t m_phase = wire::kMonitorServing;

    // With --egress: the monitor's upstream decision, and the host's name servers handed to the
    // worker's resolver (relay/upstream.h), right after the clone.
    void start_upstream(const std::vector<std::string>& patterns);
    // Answers one request; false when the worker was killed for it, or is gone.
    bool answer(const wire::Request& request);

    // Kills the worker for a malformed request, and says so on stderr and in the egress log.
    // Returns false (serve()'s "gone").
    bool kill_for(const std::string& what);
};

}  // namespace cocoon::relay
