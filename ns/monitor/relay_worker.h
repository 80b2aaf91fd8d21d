// The monitor's handle on the confined relay worker (relay/worker.h says what the worker is, what
// crosses between the two and why): it clones the worker, which runs cocoon's binary again as a
// fresh image with only its fds at fixed numbers (relay/worker_protocol.h); then it hands over the
// sandbox's listeners, answers the worker's requests (a --relay's host socket, an --egress
// upstream: ns/monitor/upstream.h), forwards its stderr (ns/monitor/worker_stderr.h), and stops it.
// Security: the worker is taken as hostile: its requests come on a pipe (no fd reaches the
// monitor), each is checked against relay/worker_protocol.h's table, and one it does not allow
// gets the worker killed, not answered.
// Runs in: monitor.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "base/wire_rules.h"
#include "ns/monitor/upstream.h"
#include "ns/monitor/worker_stderr.h"
#include "relay/worker.h"
#include "relay/worker_protocol.h"

namespace cocoon::relay {
class HostSocket;
}

namespace cocoon::ns {

class RelayWorker {
public:
    // Starts the worker: a clone that runs cocoon's binary again (relay/worker.h). `targets`: each
    // --relay's pinned host socket, in command-line order (the monitor's to connect). cgroup: a
    // cgroup v2 directory the worker starts in
    // (CLONE_INTO_CGROUP: the sandbox's leaf for it, so what the sandbox makes it spend counts
    // against the sandbox's limits), or -1 for the monitor's own. Throws SysError when the worker
    // cannot start; the worker itself exits with status 1 and a message on stderr when it cannot
    // confine itself.
    RelayWorker(relay::WorkerOptions options, std::vector<std::shared_ptr<const relay::HostSocket>> targets,
                int cgroup = -1);
    ~RelayWorker();
    RelayWorker(const RelayWorker&) = delete;
    RelayWorker& operator=(const RelayWorker&) = delete;

    pid_t pid() const { return m_pid; }
    // The worker's stderr (ns/monitor/worker_stderr.h): readable when it wrote, or ended; -1 once at
    // its end. forward_stderr() forwards what it holds, bounded, and never waits.
    int stderr_fd() const { return m_stderr_open ? m_stderr.get() : -1; }
    void forward_stderr();
    // Readable when the worker asks for a connection (serve()), or hung up (it ended).
    int fd() const { return m_requests.get(); }
    // Answers the worker's waiting requests. False once the worker is gone, or was killed for a
    // malformed request.
    bool serve();
    // Hands over a listener (kind Relay: the index-th --relay's).
    void add_listener(UniqueFd listener, relay::ListenerKind kind, uint32_t index);
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
    std::vector<std::shared_ptr<const relay::HostSocket>> m_targets;
    std::optional<UpstreamGate> m_upstream;  // with --egress: the monitor's decision
    WireCheck m_check{relay::wire::rules()};
    uint32_t m_phase = relay::wire::kMonitorServing;

    // With --egress: the monitor's upstream decision, and the host's name servers handed to the
    // worker's resolver (ns/monitor/upstream.h), right after the clone.
    void start_upstream(const std::vector<std::string>& patterns);
    // Answers one request; false when the worker was killed for it, or is gone.
    bool answer(const relay::wire::Request& request);

    // Kills the worker for a malformed request, and says so on stderr and in the egress log.
    // Returns false (serve()'s "gone").
    bool kill_for(const std::string& what);
};

}  // namespace cocoon::ns
