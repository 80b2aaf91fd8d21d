// What the monitor tells the relay worker it starts (relay/worker.h): the worker is a fresh image
// of cocoon's binary (execveat, an empty environment), so its options cannot be a copy of the
// monitor's memory; they come as this small blob on a memfd at a fixed fd, read once, before the
// worker confines itself.
//
// The format: a first line "cocoon-relay-worker 1", then one record per field, in a fixed order,
// each "KEY LENGTH BYTES\n" (LENGTH the decimal count of BYTES, so a path holding a newline or a
// space is carried as it is). A list is its key repeated, in order (each --relay's name, each
// --egress-allow pattern). Numbers are plain decimal digits, range-checked.
//
// Security: the monitor is trusted, and writes the blob before the worker exists; the parser is
// strict anyway (a key out of its place, a number with a sign or out of range, a byte after the
// last record, a blob over kMaxWorkerConfig: refused whole), because the worker's entry is also
// reachable by anyone who runs cocoon with its internal marker by hand (relay/worker_protocol.h,
// kWorkerMode, says why that gains nothing), and a malformed blob must end the worker, not half-configure it.
//
// --egress-allow's rules cross as their pattern text, which the worker parses again with
// parse_allow_rule (relay/egress_policy.h): the same code that accepted them on the command
// line, rather than a second format for sockaddrs; a pattern it refuses is a malformed blob.
// Runs in: monitor, worker: the monitor writes the worker's options; the exec'd worker parses them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "relay/relay.h"
#include "relay/worker_protocol.h"

namespace cocoon::relay {

// The blob's bound: the worker reads at most this many bytes (and one more, to see that there
// is no more); the monitor refuses to start a worker whose options do not fit.
inline constexpr size_t kMaxWorkerConfig = size_t{1} << 20;

struct WorkerConfig {
    RelayOptions relay;  // but log, which the worker sets from log_prefix
    std::string log_prefix;
    std::vector<std::string> relay_names;  // each --relay's socket path, for messages
    bool egress = false;  // --egress; then:
    std::vector<std::string> egress_allow;  // --egress-allow patterns, parsed again by the worker
    std::chrono::milliseconds head_timeout{10'000};
    uint64_t max_pending = 512;
    bool egress_log = false;  // whether the worker's fd 5 is --egress-log
    // Who the worker becomes (relay/worker.cc, confine): in a user namespace of its own (whose
    // map the child wrote before its exec; worker_id 0), or, for a root caller, worker_id as uid
    // and gid (kWorkerIdBase + the monitor's pid).
    bool own_user_namespace = true;
    uint32_t worker_id = 0;
    pid_t monitor = 0;  // the monitor's pid, as cocoon knew it before the clone (the test hook's)
    std::string test_hook;  // COCOON_TEST_HOOKS builds only: relay/worker_test_hook.h's spec
};

class WorkerConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

std::string serialize(const WorkerConfig& config);
// Throws WorkerConfigError naming what is wrong.
WorkerConfig parse_worker_config(std::string_view blob);

}  // namespace cocoon::relay
