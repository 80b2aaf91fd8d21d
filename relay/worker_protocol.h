// The monitor <-> relay worker protocol (relay/worker.h) as one table: every message kind typed on
// the wire, in a number space per channel, and base/wire_rules.h's rule for it (in which phase of
// its receiver it may come, how often, how many fds). The monitor checks each request against it
// before acting on it (anything else kills the worker); the worker checks the monitor's control
// messages and answers the same way (anything else ends it: the monitor is trusted, so that is a
// bug of cocoon's, not an attack). Also what both sides agree on before the first message: the
// worker's argv marker, its fixed fd numbers, its ids, the kinds of listener handed over.
// Runs in: monitor, worker: the monitor (ns/monitor/relay_worker.cc) execs the worker with these
// fds and checks its requests; the worker (relay/worker.cc) finds its fds here and checks the
// monitor's messages.
#pragma once

#include <limits.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "base/wire_rules.h"
#include "relay/egress_policy.h"

namespace cocoon::relay {

// The fds the exec'd worker starts with, at these numbers (0 and 1 are /dev/null, 2 the pipe the
// monitor forwards, ns/monitor/worker_stderr.h). kEgressLogFd is /dev/null without --egress-log: the
// number stays taken, as the allowlist singles it out (relay/worker_seccomp_gen.cc). kConfigFd,
// the options' memfd, is read and closed before the worker confines itself.
constexpr int kControlFd = 3, kAnswerFd = 4, kEgressLogFd = 5, kRequestFd = 6, kConfigFd = 7;
static_assert(kEgressLogFd == 5, "relay/worker_seccomp_gen.cc's kLogFd");
// The worker's argv[1]: how the exec'd image knows it is the worker (is_worker_mode). Security: not
// an option, and nothing to gain by hand: the image then reads its options from fd 7 and confines
// itself as they say, with the fds its invoker gave it, as the invoker (cocoon refuses to run
// setuid or setgid, tools/cocoon/entry.cc), so it holds no right its invoker lacked; a missing or
// malformed blob is one line on stderr and exit status 1.
constexpr const char* kWorkerMode = "--internal-relay-worker";

// The uid and gid a root caller's worker runs as: this base plus the monitor's pid (pid_max is at
// most 2^22), so each run's worker has ids of its own, which own nothing, rather than 65534 shared
// with every other run's (one worker taken over could signal or ptrace another's). Above the
// container ranges systemd hands out (which end at 0x6FFFFFFF), below 2^31 (tools that take a uid
// for a signed int). Two monitors share one only with the same pid in different PID namespaces of
// one user namespace.
inline constexpr uint32_t kWorkerIdBase = 0x70000000;

// How the worker fails before it runs (the monitor's child before its exec, the exec'd image
// while it confines itself): one line on stderr, exit status 1. Only write(2) and _exit(2), so
// it is safe between clone and exec.
[[noreturn]] inline void worker_fail(const std::string& prefix, const std::string& what, int err)
{
    const std::string line = prefix + "cocoon: relay worker: " + what + ": " + std::strerror(err) + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(1);
}

}  // namespace cocoon::relay

namespace cocoon::relay::wire {

// control: monitor -> worker (SOCK_SEQPACKET), 0x63.. ("c").
enum ControlKind : uint32_t {
    kRelayListener = 0x63000001,  // + the index-th --relay's listener
    kEgressProxy = 0x63000002,  // + a --egress proxy listener
    kTransparent = 0x63000003,  // + a transparent egress listener
    kResolverSocket = 0x63000004,  // + the transparent resolver's UDP socket (relay/dns.h)
    kNameServer = 0x63000005,  // + a UDP socket connected to one of the host's name servers
    kStop = 0x63000006,  // the sandbox ended
};
struct Control {
    uint32_t kind = 0;
    uint32_t index = 0;
};

// requests: worker -> monitor (a pipe: it carries no fd), 0x72.. ("r"). One size for every kind,
// written whole (under PIPE_BUF), so a read of whole requests never splits one.
enum RequestKind : uint32_t {
    kConnect = 0x72000001,  // connect the target-th --relay's host socket
    kUpstream = 0x72000002,  // connect to `address` port `port`, for `name` (empty: an IP literal)
};
struct Request {
    uint32_t kind = 0;
    uint32_t target = 0;  // kConnect
    uint16_t port = 0;  // kUpstream, host order
    uint16_t family = 0;  // kUpstream: AF_INET or AF_INET6
    uint8_t address[16] = {};  // kUpstream: 4 or 16 bytes of it, network order
    uint8_t name_size = 0;  // kUpstream
    char name[kMaxHostName] = {};  // kUpstream, not NUL-terminated
    uint8_t unused[2] = {};
};
static_assert(sizeof(Request) <= PIPE_BUF, "a request is written to the pipe in one piece");
static_assert(sizeof(Request) % 4 == 0);

// answers: monitor -> worker (SOCK_SEQPACKET), in request order, 0x61.. ("a").
enum AnswerKind : uint32_t {
    kSocket = 0x61000001,  // + the socket asked for (an upstream's: its connect in progress)
    kFailed = 0x61000002,  // err: why not (a --relay's connect failed; an upstream's socket() or
                           // connect() failed at once, or the monitor refused it: EACCES + refusal)
};
// Why the monitor refused an upstream (kFailed with EACCES): the worker words the log's reason.
enum Refusal : uint32_t {
    kNotRefused = 0,
    kNotListed = 1,  // the name and port (or the address, for a literal) are not on the allowlist
    kInternal = 2,  // an internal address (loopback, private, link-local, ...) not listed
    kOwnAddress = 3,  // an address of one of the host's interfaces, not listed
};
struct Answer {
    uint32_t kind = 0;
    int32_t err = 0;
    uint32_t refusal = kNotRefused;
};

// Phases of each side, as bits (WireRule::phases).
enum Phase : uint32_t {
    kMonitorServing = 1,  // the monitor answers requests while the sandbox runs
    kMonitorStopping = 2,  // the monitor sent Stop and answers what was asked before it
    kWorkerStarting = 4,  // the worker has had no listener yet: the name servers come first
    kWorkerServing = 8,  // the worker has its first listener
};

// How often the worker may ask, a second (burst: 2 s of it). The --relay bench opens ~8,000
// connections a second and --egress accepts at most 2,000 a second (each client asks once per
// address it tries): both well under these.
constexpr double kConnectsPerSecond = 50'000;
constexpr double kUpstreamsPerSecond = 10'000;
// At most this many name servers are handed over (c-ares uses the first few anyway).
constexpr uint32_t kMaxNameServers = 8;
constexpr uint32_t kMaxListeners = 4096;

inline constexpr WireRule kRules[] = {
    // worker -> monitor
    {kConnect, "--relay connect request", kMonitorServing | kMonitorStopping, 0, kConnectsPerSecond, 0},
    {kUpstream, "--egress upstream request", kMonitorServing | kMonitorStopping, 0, kUpstreamsPerSecond, 0},
    // monitor -> worker: control
    {kNameServer, "name server", kWorkerStarting, kMaxNameServers, 0, 1},
    {kRelayListener, "--relay listener", kWorkerStarting | kWorkerServing, kMaxListeners, 0, 1},
    {kEgressProxy, "--egress listener", kWorkerStarting | kWorkerServing, kMaxListeners, 0, 1},
    {kTransparent, "transparent listener", kWorkerStarting | kWorkerServing, kMaxListeners, 0, 1},
    {kResolverSocket, "resolver socket", kWorkerStarting | kWorkerServing, 1, 0, 1},
    {kStop, "stop", kWorkerStarting | kWorkerServing, 1, 0, 0},
    // monitor -> worker: answers (no faster than the worker asks)
    {kSocket, "socket answer", kWorkerStarting | kWorkerServing, 0, kConnectsPerSecond + kUpstreamsPerSecond, 1},
    {kFailed, "failure answer", kWorkerStarting | kWorkerServing, 0, kConnectsPerSecond + kUpstreamsPerSecond, 0},
};

inline std::span<const WireRule> rules()
{
    return kRules;
}

}  // namespace cocoon::relay::wire

namespace cocoon::relay {

// What a socket handed over is for: the index-th --relay's listener, the --egress proxy's, a
// transparent egress listener, the transparent resolver's UDP socket (relay/dns.h).
enum class ListenerKind : uint32_t {
    Relay = wire::kRelayListener,
    EgressProxy = wire::kEgressProxy,
    Transparent = wire::kTransparent,
    Resolver = wire::kResolverSocket,
};

}  // namespace cocoon::relay
