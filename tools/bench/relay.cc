// Relay benchmark driver: cocoon's relay::Relay against socat and a direct Unix connection, on
// one stand-in proxy. Standalone; runs as its caller, on 127.0.0.1 and Unix sockets only. This
// file holds the options, main and its phases, and the report; relay_servers.cc the servers and
// relay_clients.cc the clients (relay_bench.h).
//
// usage: cocoon_bench_relay [--mib N] [--pings N] [--seconds S] [--clients N] [--idle N]
//                           [--buffer-size BYTES] [--socat PATH] [--no-socat]
//                           [--tests streams,rtt,rate,idle] [--rounds N] [--settle MS]
//                           [--copy-upload] [--pipe-size BYTES] [--in-process]
//
// Processes: this one (the clients), the stand-in proxy (an epoll server on a Unix socket), the
// relay as cocoon runs it (a child of its own standing for the monitor, and the confined worker
// it forks, relay/worker.h: RSS, CPU and fds are the two's; --in-process: relay::Relay alone in
// the child), socat (exec'd, a process per connection). Every loop is bounded by a count or a deadline.
// Runs in: dev.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "relay/worker.h"
#include "tests/support/socket.h"
#include "tools/bench/relay_bench.h"

using namespace cocoon::test;
using namespace std::chrono_literals;

namespace cocoon::bench {
namespace {

// ---- Options -------------------------------------------------------------------------------

long parse_number(std::string_view flag, const char* text, long min)
{
    long value = 0;
    std::string_view s = text;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || value < min)
        die(std::string(flag) + ": expected an integer >= " + std::to_string(min) + ", got '" + s.data() + "'");
    return value;
}

Options parse(int argc, char** argv)
{
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string_view arg = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc)
                die(std::string(arg) + " needs a value");
            return argv[++i];
        };
        if (arg == "--mib")
            o.mib = static_cast<size_t>(parse_number(arg, value(), 1));
        else if (arg == "--pings")
            o.pings = static_cast<int>(parse_number(arg, value(), 10));
        else if (arg == "--seconds")
            o.seconds = static_cast<double>(parse_number(arg, value(), 1));
        else if (arg == "--clients")
            o.clients = static_cast<int>(parse_number(arg, value(), 1));
        else if (arg == "--idle")
            o.idle = static_cast<int>(parse_number(arg, value(), 0));
        else if (arg == "--buffer-size")
            o.buffer_size = static_cast<size_t>(parse_number(arg, value(), 4096));
        else if (arg == "--socat")
            o.socat = value();
        else if (arg == "--no-socat")
            o.with_socat = false;
        else if (arg == "--tests")
            o.tests = value();
        else if (arg == "--rounds")
            o.rounds = static_cast<int>(parse_number(arg, value(), 1));
        else if (arg == "--settle")
            o.settle_ms = static_cast<int>(parse_number(arg, value(), 0));
        else if (arg == "--copy-upload")
            o.copy_upload = true;
        else if (arg == "--in-process")
            o.in_process = true;
        else if (arg == "--pipe-size")
            o.pipe_size = static_cast<size_t>(parse_number(arg, value(), 4096));
        else
            die("unknown argument: " + std::string(arg) +
                "\nusage: cocoon_bench_relay [--mib N] [--pings N] [--seconds S] [--clients N] [--idle N] "
                "[--buffer-size BYTES] [--socat PATH] [--no-socat] [--tests streams,rtt,rate,idle] "
                "[--rounds N] [--settle MS] [--copy-upload] [--pipe-size BYTES] [--in-process]");
    }
    return o;
}

// ---- Report --------------------------------------------------------------------------------

std::string cell(double v, int precision = 0)
{
    if (v <= 0 || std::isnan(v))
        return "-";
    char s[32];
    std::snprintf(s, sizeof s, "%.*f", precision, v);
    return s;
}

std::string ratio(double a, double b)
{
    if (a <= 0 || b <= 0)
        return "-";
    char s[32];
    std::snprintf(s, sizeof s, "%.2fx", a / b);
    return s;
}

// What one path gave over every round.
struct Measured {
    double up_seconds = 0, down_seconds = 0;  // summed over rounds
    size_t up_bytes = 0, down_bytes = 0;
    bool streams_failed = false;
    std::vector<double> rtt_us;
    std::vector<double> rtt_one_cpu_us;  // every process on one CPU
    bool rtt_failed = false;
    Rate rate;
    double up_cpu_ms = 0, down_cpu_ms = 0;  // the relay process's CPU time during the streams
    double rate_cpu_ms = 0;  // and during the connections,
    double rate_worker_cpu_ms = 0;  // of which the worker's

    double up() const
    {
        return streams_failed || up_seconds == 0 ? 0 : static_cast<double>(up_bytes) / kMiB / up_seconds;
    }
    double down() const
    {
        return streams_failed || down_seconds == 0 ? 0 : static_cast<double>(down_bytes) / kMiB / down_seconds;
    }
    double rtt_percentile(double p, bool one_cpu = false) const
    {
        const std::vector<double>& samples = one_cpu ? rtt_one_cpu_us : rtt_us;
        if (rtt_failed || samples.empty())
            return 0;
        std::vector<double> sorted = samples;
        std::sort(sorted.begin(), sorted.end());
        return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())))];
    }
    double connections_per_second() const
    {
        return rate.seconds > 0 ? static_cast<double>(rate.done) / rate.seconds : 0;
    }
};

// One line of the table: the five paths, the three ratios, the target. `lower`: a smaller figure
// is better (round trips), for the split's bound against the engine.
struct Paths {
    double relay, engine, socat, direct, tcp;
};
void row(const char* name, const Paths& p, int precision, bool lower, const std::string& target, bool met)
{
    // The split (relay/worker.h) may cost at most 10% of the engine's figure.
    const bool split_met = p.engine <= 0 || (lower ? p.relay <= 1.1 * p.engine : p.relay >= 0.9 * p.engine);
    std::printf("%-22s %9s %9s %9s %9s %9s %12s %12s %13s   %-28s %s%s\n", name, cell(p.relay, precision).c_str(),
                cell(p.engine, precision).c_str(), cell(p.socat, precision).c_str(), cell(p.direct, precision).c_str(),
                cell(p.tcp, precision).c_str(), ratio(p.relay, p.engine).c_str(), ratio(p.relay, p.socat).c_str(),
                ratio(p.relay, p.direct).c_str(), target.c_str(),
                target.empty() || p.relay <= 0 ? ""
                : met                          ? "met"
                                               : "MISSED",
                split_met ? "" : " (split > 10%)");
}

// A listening socket on 127.0.0.1 and a free port; its address lands in `addr`.
UniqueFd tcp_listen(Address& addr)
{
    try {
        UniqueFd fd = listen_on(loopback());
        addr = address_of(fd.get());
        return fd;
    } catch (const std::exception& e) {
        die(std::string("listen(127.0.0.1): ") + e.what());
    }
}

// ---- main's phases -------------------------------------------------------------------------

// A run: its options, the servers' processes, and the paths measured through them. Not copied:
// `targets` points into it.
struct Run {
    Run() = default;
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;

    Options o;
    int requested_idle = 0;
    std::string dir;  // the temp dir, holding
    std::string path;  // the proxy's Unix socket
    pid_t proxy = -1, relay = -1, engine = -1, socat = -1;
    Target direct, tcp, through_relay, through_socat, through_engine;
    // In the order of the results: direct, tcp, relay, then socat and the engine where they run.
    std::vector<const Target*> targets;

    // The relay process behind a target, whose CPU is counted; -1 for the others.
    pid_t relay_pid(const Target* t) const { return t == &through_relay ? relay : t == &through_engine ? engine : -1; }
};

// Fewer idle connections where RLIMIT_NOFILE cannot be raised far enough.
void fit_idle_to_fd_limit(Options& o)
{
    // The relay holds two fds per connection, plus a few of its own.
    const rlim_t want_fds = static_cast<rlim_t>(o.idle) * 2 + 64;
    const rlim_t have_fds = raise_nofile(want_fds);
    if (have_fds < want_fds) {
        const int fit = static_cast<int>((have_fds - 64) / 2);
        std::fprintf(stderr,
                     "relay_bench: RLIMIT_NOFILE allows %llu fds (a higher hard limit needs CAP_SYS_RESOURCE): %d "
                     "idle connections instead of %d\n",
                     static_cast<unsigned long long>(have_fds), fit, o.idle);
        o.idle = std::max(fit, 0);
    }
}

// socat listening on a free port of 127.0.0.1, a process per connection to the proxy at `path`.
pid_t start_socat(const Options& o, const std::string& path, Address& socat_addr)
{
    // A free port: bound to 0, read, let go; socat binds it again with reuseaddr.
    tcp_listen(socat_addr);
    const std::string listen_arg =
        "TCP-LISTEN:" + std::to_string(port_of(socat_addr)) + ",bind=127.0.0.1,fork,reuseaddr";
    const std::string connect_arg = "UNIX-CONNECT:" + path;
    return spawn([&] {
        ::execlp(o.socat.c_str(), o.socat.c_str(), listen_arg.c_str(), connect_arg.c_str(), nullptr);
        std::fprintf(stderr, "relay_bench: exec %s: %s\n", o.socat.c_str(), std::strerror(errno));
        ::_exit(127);
    });
}

// The proxy, the relay, the engine alone beside it (so the split's cost is a ratio of one run)
// and socat, each a process; then the paths through them.
void start_servers(Run& run)
{
    char tmpl[] = "/tmp/cocoon-bench-relay.XXXXXX";
    if (!::mkdtemp(tmpl))
        die_errno("mkdtemp");
    run.dir = tmpl;
    run.path = run.dir + "/proxy.sock";
    const std::string& path = run.path;
    const Options& o = run.o;

    // Listeners are made here so their ports are known; the children take them.
    Address proxy_addr, relay_addr, socat_addr, engine_addr;
    UniqueFd proxy_tcp = tcp_listen(proxy_addr);
    run.proxy = spawn([&] { serve_proxy(path, std::move(proxy_tcp)); });
    proxy_tcp.reset();
    for (int i = 0; i < 500 && !std::filesystem::exists(path); ++i)
        std::this_thread::sleep_for(2ms);

    UniqueFd listener = tcp_listen(relay_addr);
    run.relay = spawn([&] { run_relay(std::move(listener), path, o); });
    listener.reset();
    if (!o.in_process) {
        UniqueFd engine_listener = tcp_listen(engine_addr);
        Options engine_options = o;
        engine_options.in_process = true;
        run.engine = spawn([&] { run_relay(std::move(engine_listener), path, engine_options); });
    }
    if (o.with_socat)
        run.socat = start_socat(o, path, socat_addr);

    run.direct = {"direct", unix_address(path)};
    run.tcp = {"tcp", proxy_addr};
    run.through_relay = {"relay", relay_addr};
    run.through_socat = {"socat", socat_addr};
    run.through_engine = {"engine", engine_addr};
    run.targets = {&run.direct, &run.tcp, &run.through_relay};
    if (o.with_socat)
        run.targets.push_back(&run.through_socat);
    if (run.engine > 0)
        run.targets.push_back(&run.through_engine);
}

// Each path must answer an echo before anything is measured.
void wait_for_answers(const Run& run)
{
    for (const Target* t : run.targets) {
        bool up = false;
        for (int i = 0; i < 500 && !up; ++i) {
            UniqueFd fd = t->connect();
            char c = 'E';
            up = fd && send_all(fd.get(), &c, 1) && recv_exact(fd.get(), &c, 1) == 1;
            if (!up)
                std::this_thread::sleep_for(10ms);
        }
        if (!up)
            die(t->label + " does not answer");
    }
}

void print_heading(const Options& o)
{
    std::printf("cocoon relay benchmark: %zu MiB streams, %d round trips of %zu bytes, %d clients x %.0f s of "
                "connections, %d idle connections; relay buffers of %zu bytes; %d CPUs\n",
                o.mib, o.pings, kMessage, o.clients, o.seconds, o.idle, o.buffer_size, usable_cpus());
    std::printf("relay: cocoon's Relay, 127.0.0.1 -> Unix socket; socat: socat fork (a process per "
                "connection); direct: the Unix socket itself; tcp: 127.0.0.1 to the proxy itself, the "
                "floor of any TCP relay\n\n");
    std::fflush(stdout);
}

// Each test is a phase of its own. Within it, rounds interleave the paths, so drift on the host
// (other guests, other jobs) hits them alike, and every measurement starts after a pause on a
// quiet machine: right after a 1 GiB stream, the scheduler's load figures for the process that
// moved it (decaying over ~100 ms) changed where the next round trip's wake-ups ran and
// doubled the relay's round trip (120-170 us against 70-85 us after a pause).
void each_round(const Run& run, const char* test, std::vector<Measured>& results,
                const std::function<void(size_t, Measured&, int)>& measure)
{
    if (!run.o.runs(test))
        return;
    for (int round = 0; round < run.o.rounds; ++round)
        for (size_t i = 0; i < run.targets.size(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(run.o.settle_ms));
            measure(i, results[i], round);
        }
}

void measure_streams(const Run& run, std::vector<Measured>& results)
{
    const size_t bytes = run.o.mib * kMiB;
    const size_t round_bytes = std::max<size_t>(kMiB, bytes / static_cast<size_t>(run.o.rounds)) / kMiB * kMiB;
    each_round(run, "streams", results, [&](size_t i, Measured& m, int) {
        const pid_t pid = run.relay_pid(run.targets[i]);
        double cpu = pid > 0 ? cpu_ms(pid) : 0;
        auto up = upload(*run.targets[i], round_bytes);
        if (pid > 0)
            m.up_cpu_ms += cpu_ms(pid) - cpu;
        cpu = pid > 0 ? cpu_ms(pid) : 0;
        auto down = download(*run.targets[i], round_bytes);
        if (pid > 0)
            m.down_cpu_ms += cpu_ms(pid) - cpu;
        m.streams_failed = m.streams_failed || !up || !down;
        m.up_seconds += up.value_or(0);
        m.down_seconds += down.value_or(0);
        m.up_bytes += round_bytes;
        m.down_bytes += round_bytes;
    });
}

void measure_round_trips(const Run& run, std::vector<Measured>& results)
{
    const Options& o = run.o;
    each_round(run, "rtt", results, [&](size_t i, Measured& m, int round) {
        if (!round_trips(*run.targets[i], round == 0 ? o.warmup_pings : 50, o.pings / o.rounds, m.rtt_us))
            m.rtt_failed = true;
    });
    // The same on one CPU for every process: no wake-up crosses CPUs, so what is left is each
    // path's own cost, whatever the scheduler would have placed where.
    if (o.runs("rtt")) {
        const std::vector<pid_t> servers{run.proxy, run.relay, run.socat, run.engine};
        pin(servers, true);
        each_round(run, "rtt", results, [&](size_t i, Measured& m, int round) {
            if (!round_trips(*run.targets[i], round == 0 ? o.warmup_pings : 50, o.pings / o.rounds, m.rtt_one_cpu_us))
                m.rtt_failed = true;
        });
        pin(servers, false);
    }
}

void measure_rate(const Run& run, std::vector<Measured>& results)
{
    each_round(run, "rate", results, [&](size_t i, Measured& m, int) {
        const pid_t pid = run.relay_pid(run.targets[i]);
        const double cpu = pid > 0 ? cpu_ms(pid) : 0, own = pid > 0 ? cpu_ms_of(pid) : 0;
        Rate rate = connection_rate(*run.targets[i], run.o.clients, run.o.seconds / run.o.rounds);
        if (pid > 0) {
            m.rate_cpu_ms += cpu_ms(pid) - cpu;
            m.rate_worker_cpu_ms += (cpu_ms(pid) - cpu) - (cpu_ms_of(pid) - own);
        }
        m.rate.done += rate.done;
        m.rate.failed += rate.failed;
        m.rate.seconds += rate.seconds;
    });
}

// What each path gave, in the order of run.targets; a line each to stderr.
std::vector<Measured> measure(const Run& run)
{
    std::vector<Measured> results(run.targets.size());
    measure_streams(run, results);
    measure_round_trips(run, results);
    measure_rate(run, results);
    for (size_t i = 0; i < run.targets.size(); ++i) {
        const Measured& m = results[i];
        std::fprintf(stderr,
                     "relay_bench: %-6s up %.0f MiB/s, down %.0f MiB/s, rtt %.1f/%.1f us, %.0f conn/s (%zu failed)\n",
                     run.targets[i]->label.c_str(), m.up(), m.down(), m.rtt_percentile(0.5), m.rtt_percentile(0.99),
                     m.connections_per_second(), m.rate.failed);
    }
    return results;
}

// The results by path; a path that did not run reads as nothing measured.
struct Results {
    Measured direct, tcp, relay, socat, engine;
};

Results by_path(const Run& run, const std::vector<Measured>& results)
{
    return {results[0], results[1], results[2], run.o.with_socat ? results[3] : Measured{},
            run.engine > 0 ? results.back() : Measured{}};
}

void print_table(const Results& m)
{
    const Measured &r = m.relay, &e = m.engine, &s = m.socat, &d = m.direct, &t = m.tcp;
    std::printf("%-22s %9s %9s %9s %9s %9s %12s %12s %13s   %s\n", "", "relay", "engine", "socat", "direct", "tcp",
                "relay/engine", "relay/socat", "relay/direct", "target");
    row("upload MiB/s", {r.up(), e.up(), s.up(), d.up(), t.up()}, 0, false, ">= 6x socat, >= 0.5x direct",
        s.up() > 0 && r.up() >= 6 * s.up() && r.up() >= 0.5 * d.up());
    row("download MiB/s", {r.down(), e.down(), s.down(), d.down(), t.down()}, 0, false, ">= 6x socat, >= 0.5x direct",
        s.down() > 0 && r.down() >= 6 * s.down() && r.down() >= 0.5 * d.down());
    auto rtt = [](const Measured& x, double p, bool one_cpu = false) { return x.rtt_percentile(p, one_cpu); };
    row("round trip median us", {rtt(r, 0.5), rtt(e, 0.5), rtt(s, 0.5), rtt(d, 0.5), rtt(t, 0.5)}, 1, true,
        "<= 1.5x direct", rtt(r, 0.5) <= 1.5 * rtt(d, 0.5));
    row("round trip p99 us", {rtt(r, 0.99), rtt(e, 0.99), rtt(s, 0.99), rtt(d, 0.99), rtt(t, 0.99)}, 1, true, "", true);
    row("1 CPU: round trip us",
        {rtt(r, 0.5, true), rtt(e, 0.5, true), rtt(s, 0.5, true), rtt(d, 0.5, true), rtt(t, 0.5, true)}, 1, true, "",
        true);
    row("connections/s",
        {r.connections_per_second(), e.connections_per_second(), s.connections_per_second(), d.connections_per_second(),
         t.connections_per_second()},
        0, false, ">= 15x socat",
        s.connections_per_second() > 0 && r.connections_per_second() >= 15 * s.connections_per_second());
}

// The relay process's CPU per GiB and per connection, against the engine's and the anchor's.
void print_relay_cpu(const Options& o, const Results& m)
{
    const Measured &r = m.relay, &e = m.engine;
    if (o.runs("streams"))
        std::printf("\nrelay process CPU per GiB relayed: upload %.0f ms, download %.0f ms\n",
                    r.up_cpu_ms * kMiB * 1024 / static_cast<double>(r.up_bytes),
                    r.down_cpu_ms * kMiB * 1024 / static_cast<double>(r.down_bytes));
    if (!o.runs("rate") || r.rate.done == 0)
        return;
    std::printf("relay process CPU per connection: %.1f us (the worker's %.1f us)",
                r.rate_cpu_ms * 1000 / static_cast<double>(r.rate.done),
                r.rate_worker_cpu_ms * 1000 / static_cast<double>(r.rate.done));
    if (e.rate.done > 0)
        std::printf("; engine alone %.1f us", e.rate_cpu_ms * 1000 / static_cast<double>(e.rate.done));
    const Exchange x = fd_exchanges(20000);
    std::printf("\nanchor: a request and an fd in answer between two processes (SOCK_SEQPACKET, both "
                "polling): %.1f us of CPU, %.1f us round trip\n",
                x.cpu_us, x.wall_us);
    // The split's floor: any design that keeps connect() in the privileged process (issue 22)
    // pays the anchor per connection, beside the engine's own cost.
    if (e.rate.done > 0) {
        const double engine_us = e.rate_cpu_ms * 1000 / static_cast<double>(e.rate.done);
        const double relay_us = r.rate_cpu_ms * 1000 / static_cast<double>(r.rate.done);
        std::printf("split's cost per connection: %.1f us of CPU over the engine's %.1f us (+%.0f%%); its floor, "
                    "the anchor, alone is +%.0f%%\n",
                    relay_us - engine_us, engine_us, 100 * (relay_us - engine_us) / engine_us,
                    100 * x.cpu_us / engine_us);
    }
}

void print_idle(const Run& run, const IdleResult& idle, const IdleResult& engine_idle)
{
    if (!run.o.runs("idle"))
        return;
    const int requested = run.requested_idle;
    const double growth_mib = static_cast<double>(idle.rss_after_kib - idle.rss_before_kib) / 1024;
    const bool all = idle.open == requested;
    std::printf("\nidle connections through the relay: %d of %d (opened in %.2f s); relay RSS %.1f -> %.1f "
                "MiB, growth %.1f MiB (%.0f bytes per connection); relay fds %zu\ntarget: %d connections, "
                "RSS growth <= 32 MiB: %s\n",
                idle.open, requested, idle.seconds, static_cast<double>(idle.rss_before_kib) / 1024,
                static_cast<double>(idle.rss_after_kib) / 1024, growth_mib,
                idle.open ? growth_mib * kMiB / idle.open : 0.0, idle.relay_fds, requested,
                growth_mib > 32 ? "MISSED"
                : all           ? "met"
                                : "growth met, count MISSED (RLIMIT_NOFILE)");
    if (engine_idle.open > 0)
        std::printf("the engine alone: %d open, RSS growth %.1f MiB\n", engine_idle.open,
                    static_cast<double>(engine_idle.rss_after_kib - engine_idle.rss_before_kib) / 1024);
}

void print_report(const Run& run, const Results& m, const IdleResult& idle, const IdleResult& engine_idle)
{
    print_table(m);
    print_relay_cpu(run.o, m);
    print_idle(run, idle, engine_idle);
    const Measured &r = m.relay, &s = m.socat, &d = m.direct, &t = m.tcp;
    if (r.rate.failed || d.rate.failed || s.rate.failed || t.rate.failed)
        std::printf("failed connections: relay %zu, socat %zu, direct %zu, tcp %zu\n", r.rate.failed, s.rate.failed,
                    d.rate.failed, t.rate.failed);
}

void stop_servers(const Run& run)
{
    stop(run.socat);
    if (run.engine > 0)
        stop(run.engine);
    stop(run.relay);
    stop(run.proxy);
    std::filesystem::remove_all(run.dir);
}

}  // namespace
}  // namespace cocoon::bench

int main(int argc, char** argv)
{
    using namespace cocoon::bench;
    // The confined worker runs this binary again as a fresh image, as it runs cocoon's
    // (relay/worker.h): the image must know it, as cocoon's entry does.
    if (cocoon::relay::is_worker_mode(std::vector<std::string>(argv + std::min(argc, 1), argv + argc)))
        cocoon::relay::worker_entry();
    Run run;
    run.o = parse(argc, argv);
    if (!run.o.runs("idle"))
        run.o.idle = 0;
    run.requested_idle = run.o.idle;
    fit_idle_to_fd_limit(run.o);
    start_servers(run);
    // A closed stdout (| head) must not kill this process before it cleans up. Set after the
    // children started: they keep the default.
    ::signal(SIGPIPE, SIG_IGN);
    wait_for_answers(run);
    print_heading(run.o);

    const std::vector<Measured> results = measure(run);
    const IdleResult idle = idle_connections(run.through_relay, run.o.idle, run.relay);
    const IdleResult engine_idle =
        run.engine > 0 && run.o.idle > 0 ? idle_connections(run.through_engine, run.o.idle, run.engine) : IdleResult{};
    print_report(run, by_path(run, results), idle, engine_idle);
    stop_servers(run);
    return 0;
}
