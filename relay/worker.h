// The confined relay worker: the process that reads what the sandbox sends (the --relay
// streams, the --egress proxy's requests, the names it resolves) holds no right worth taking, and
// nothing of the monitor's either. This header is the worker's own side (its entry; relay/worker.cc
// confines it and runs its loop); the monitor's side, which starts it, answers its requests and
// stops it, is ns/monitor/relay_worker.h (class ns::RelayWorker).
// Runs in: monitor, worker: WorkerOptions is what the monitor hands ns::RelayWorker and what the
// worker's entry rebuilds from its memfd; the rest is the worker's.
// The monitor clones it before any such byte arrives, and the child runs cocoon's own binary
// again as a fresh image (sshd's re-exec: execveat of /proc/self/exe, argv[1] an internal marker,
// tools/cocoon/entry.cc), with an empty environment and only its fds at fixed numbers: /dev/null as
// stdin and stdout, a pipe as stderr (the monitor forwards it, bounded: ns/monitor/worker_stderr.h),
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
//                                 (ns/monitor/upstream.h); Failed {errno, refusal}
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

#include <optional>
#include <string>
#include <vector>

#include "relay/egress.h"
#include "relay/relay.h"

namespace cocoon::relay {

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

}  // namespace cocoon::relay
