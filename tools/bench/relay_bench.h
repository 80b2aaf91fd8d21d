// The relay benchmark's shared parts: its options, the paths it measures, and what each of its
// files offers the others. relay.cc holds the options, main and the report; relay_servers.cc the
// processes, the stand-in proxy and the relay under test; relay_clients.cc the client measurements and the
// process statistics. All run as the benchmark's caller, on 127.0.0.1 and Unix sockets only.
// Runs in: dev.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "tests/support/socket.h"

namespace cocoon::bench {

using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = size_t{1024} * 1024;
constexpr size_t kMessage = 64;
// No process of the benchmark outlives this, whatever happens.
constexpr auto kLifetime = std::chrono::minutes(20);

struct Options {
    size_t mib = 1024;
    int pings = 5000;
    int warmup_pings = 500;
    int rounds = 4;
    double seconds = 3;
    int clients = 4;
    int idle = 10000;
    size_t buffer_size = size_t{256} * 1024;
    size_t pipe_size = size_t{1} << 20;
    bool copy_upload = false;
    bool in_process = false;  // the engine alone, without the worker split cocoon runs
    int settle_ms = 300;
    std::string socat = "socat";
    bool with_socat = true;
    std::string tests = "streams,rtt,rate,idle";
    bool runs(const std::string& test) const { return ("," + tests + ",").find("," + test + ",") != std::string::npos; }
};

// ---- Processes (relay_servers.cc) ---------------------------------------------------------------

[[noreturn]] void die(const std::string& message);
[[noreturn]] void die_errno(const std::string& call);
// Forks a child that runs `body` and exits; it dies with this process.
pid_t spawn(const std::function<void()>& body);
void stop(pid_t pid);

// ---- The servers (relay_servers.cc) -------------------------------------------------------------

// The stand-in proxy on the Unix socket `path`, and on `tcp` (a listening TCP socket served alike,
// the floor of any TCP relay), until kLifetime has passed. The first byte of a connection picks
// what it does:
//   'S' sink: read to EOF, answer the byte count (8 bytes, host order), close;
//   'G' + 8-byte count: send that many bytes, close;
//   'E' echo every byte (the 'E' too) until EOF;
//   'Q' echo the first 64 bytes (the 'Q' among them), then close first.
void serve_proxy(const std::string& path, UniqueFd tcp);
// The relay under test, from `listener` to the proxy at `path`, as cocoon runs it (this process
// the monitor, a confined worker its child) or, with o.in_process, the engine alone.
void run_relay(UniqueFd listener, const std::string& path, const Options& o);

// ---- Process statistics (relay_clients.cc) ------------------------------------------------------

// The relay's process and its worker child (relay/worker.h), if any.
std::vector<pid_t> relay_processes(pid_t pid);
// utime + stime of a process, in milliseconds.
double cpu_ms_of(pid_t pid);
// Of the relay's process and its worker together.
double cpu_ms(pid_t pid);
// CPUs this process may run on (taskset narrows them).
int usable_cpus();
// Puts the servers and their children (and the calling thread) on the first CPU this process may
// use, or (`one` false) back on all of them. socat's per-connection children inherit it from socat.
void pin(const std::vector<pid_t>& pids, bool one);

// ---- Clients (relay_clients.cc) -----------------------------------------------------------------

// One path to the proxy: through a relay, or straight to it.
struct Target {
    std::string label;
    test::Address addr;  // 127.0.0.1:port or the Unix socket

    UniqueFd connect() const;
};

double seconds_since(Clock::time_point start);

// Seconds for one stream of `bytes` from the client to the proxy, until the proxy confirmed
// them all; nullopt if anything failed.
std::optional<double> upload(const Target& t, size_t bytes);
// Seconds for one stream of `bytes` from the proxy to the client, to its EOF.
std::optional<double> download(const Target& t, size_t bytes);
// `count` 64-byte round trips on one connection, after `warmup` more; appends microseconds.
bool round_trips(const Target& t, int warmup, int count, std::vector<double>& samples);

struct Rate {
    size_t done = 0;
    size_t failed = 0;
    double seconds = 0;
};
// Connections of `clients` threads for `seconds`: connect, one 64-byte echo, close.
Rate connection_rate(const Target& t, int clients, double seconds);

// The least a privilege split costs per connection: a 4-byte request from one process and an
// answer carrying an fd from another, over a SOCK_SEQPACKET pair, with the worker's own messages
// (relay/fd_message.h), each side waiting in poll(2) as the monitor's and the worker's do
// (ns/monitor/relay_worker.cc, relay/worker.cc). CPU of both per
// exchange, and the mean wall time of one.
struct Exchange {
    double cpu_us = 0, wall_us = 0;
};
Exchange fd_exchanges(int count);

struct IdleResult {
    int open = 0;
    double seconds = 0;
    long rss_before_kib = 0;
    long rss_after_kib = 0;
    size_t relay_fds = 0;
};
// Opens `count` connections through the relay, each checked with a 1-byte echo, and keeps them.
IdleResult idle_connections(const Target& t, int count, pid_t relay);

}  // namespace cocoon::bench
