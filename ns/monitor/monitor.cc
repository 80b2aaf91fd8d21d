// The monitor: its event sources (ns/monitor/event_loop.h) in one loop until PID 1 exits, then
// the end in order and the reports (--info-fd, --json-status-fd). Runs in cocoon's own
// process, outside the sandbox, with the caller's privilege; what reads the sandbox's bytes is
// the relay worker's (relay/worker.h; the monitor's side of it: ns/monitor/relay_worker.h).
// Runs in: monitor.
#include "ns/monitor/monitor.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <optional>
#include <string>

#include "base/sys.h"
#include "base/sys_error.h"
#include "ns/channel.h"
#include "ns/monitor/command_watch.h"
#include "ns/monitor/event_loop.h"
#include "ns/monitor/relay_worker.h"
#include "ns/monitor/setup_rules.h"
#include "ns/monitor/stop.h"
#include "reaper/status.h"
#ifdef COCOON_TEST_HOOKS
#include "ns/setup/test_hook.h"
#endif

namespace cocoon::ns {
namespace {

// bwrap's report: the sandbox's first pid and the inodes of its new namespaces.
std::string namespace_report(pid_t pid, const NamespacesMsg& ns, bool pretty)
{
    std::string out = pretty ? "{\n    \"child-pid\": " : "{ \"child-pid\": ";
    out += std::to_string(pid);
    for (size_t i = 0; i < kReportedNamespaces.size(); ++i) {
        if (!ns.inodes[i])
            continue;
        out += pretty ? ",\n    \"" : ", \"";
        out += std::string(kReportedNamespaces[i].name) + "-namespace\": " + std::to_string(ns.inodes[i]);
    }
    out += pretty ? "\n}\n" : " }\n";
    return out;
}

// A report to --info-fd or --json-status-fd, if given: a write that fails is said, with the
// file the fd holds (the monitor's number may be a copy's), and the run goes on.
void report(Warnings& warnings, int fd, const char* option, const std::string& text)
{
    if (fd < 0 || sys::write_all(fd, text))
        return;
    const int err = errno;
    char file[PATH_MAX] = "";
    (void)!::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), file, sizeof file - 1);
    warnings.say(SysError("report", err, std::string("can't write ") + option + "'s report to", file));
}

// What the setup channel told, and what serves the sandbox meanwhile.
struct SetupState {
    Warnings warnings;  // the reports' and the terminal's
    std::optional<ErrorMsg> error;
    std::optional<int> command_status;
    std::optional<RelayWorker> worker;
    bool worker_gone = false;
    CommandWatch command;
    std::optional<SetupCheck> check;  // the setup channel's table, for this run
    // What the setup channel sent that its table refused: the monitor stopped reading it and
    // ended the sandbox; cocoon fails with it.
    std::optional<std::string> refused;
};

// What this run's set-up sends (ns/monitor/setup_rules.h).
SetupExpects setup_expects(const Supervised& s)
{
    const ProcessOptions& process = s.plan.process;
    SetupExpects e;
    e.relays = static_cast<uint32_t>(process.relays.size());
    e.egress = process.egress.has_value();
    e.transparent = process.egress ? static_cast<uint32_t>(process.egress->transparent_ports.size()) : 0;
    e.login_files = static_cast<uint32_t>(process.login_files.size());
    e.namespaces = s.reports.info || s.reports.json_status;
    e.tmpfs = static_cast<bool>(s.reports.json_status);
    e.own_pidfd = s.plan.fork_command && s.cgroup.pid1_movable();  // as launch() tells the sandbox
    return e;
}

// The relay worker's kind for a listener message's.
relay::ListenerKind listener_kind(Wire::Kind kind)
{
    using Kind = relay::ListenerKind;
    return kind == Wire::RelayListener ? Kind::Relay
           : kind == Wire::EgressProxy ? Kind::EgressProxy
           : kind == Wire::Transparent ? Kind::Transparent
                                       : Kind::Resolver;
}

// --relay and --egress: the confined worker that reads what the sandbox sends (relay/worker.h,
// ns/monitor/relay_worker.h);
// the monitor connects its --relay clients to the pinned host sockets. Cloned into the sandbox's
// cgroup (its leaf for the worker) where the sandbox has one: what the agent makes it spend counts
// against the sandbox's CPU and memory.
void start_worker(const LaunchPlan& plan, MonitorFds& reports, const SandboxCgroup& cgroup,
                  std::optional<RelayWorker>& worker)
{
    const ProcessOptions& process = plan.process;
    if (process.relays.empty() && !process.egress)
        return;
    relay::WorkerOptions options;
    rlimit fds{};
    if (::getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur != RLIM_INFINITY)
        options.relay.max_connections = relay::Relay::connections_within(fds.rlim_cur, 16, options.relay);
    options.log_prefix = plan.log_prefix;
    for (const auto& socket : reports.relay_sockets)
        options.relay_names.push_back(socket->path());
    // --egress: the proxy's handshakes; the relay engine moves the bytes after.
    if (process.egress) {
        options.egress.emplace();
        options.egress_allow = process.egress->allow;  // the worker parses them (relay/worker_config.h)
        options.egress->log = std::move(reports.egress_log);
    }
    worker.emplace(std::move(options), reports.relay_sockets, cgroup.worker_fd());
}

// The setup channel's messages: set-up's error, the command's status, the namespaces to
// report, listeners for the relay worker, PID 2's pidfd, tmpfs fds for the report, login-file
// directories. Security: each is checked against the run's table first (setup_rules.h); one it
// refuses throws ProtocolError, and its fds close with it.
void take_message(Message& msg, Supervised& s, SetupState& state)
{
    if (std::string why = state.check->admit(msg, std::chrono::steady_clock::now()); !why.empty())
        throw ProtocolError(why);
    if (auto* err = std::get_if<ErrorMsg>(&msg)) {
        if (!state.error)
            state.error = std::move(*err);
    } else if (auto* status = std::get_if<StatusMsg>(&msg)) {
        state.command_status = status->wait_status;
        if (status->answer) {
            // PID 1 waits to kill what the command left: a writer of DEST among them would be cut
            // short. What DEST became until now is read; nothing changed after is saved. A command
            // a signal killed was stopped by someone the monitor did not see (finish() below).
            s.logins.stop_begins(WIFSIGNALED(status->wait_status));
            (void)::send(s.sock.get(), &kLeftoversAnswer, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
    } else if (auto* ns = std::get_if<NamespacesMsg>(&msg)) {
        for (size_t i = 0; i < kReportedNamespaces.size(); ++i)
            if (kReportedNamespaces[i].clone_flag == CLONE_NEWNET && s.netns_inode)
                ns->inodes[i] = s.netns_inode;
        report(state.warnings, s.reports.info.get(), "--info-fd", namespace_report(s.pid, *ns, true));
        report(state.warnings, s.reports.json_status.get(), "--json-status-fd", namespace_report(s.pid, *ns, false));
    } else if (auto* listeners = std::get_if<ListenersMsg>(&msg)) {
        // The table admits listeners only when the plan has --relay or --egress: the worker exists.
        for (UniqueFd& fd : listeners->fds)
            state.worker->add_listener(std::move(fd), listener_kind(listeners->kind), listeners->index);
    } else if (auto* own = std::get_if<PidfdMsg>(&msg)) {
        state.command.watch(std::move(own->fd));  // PID 2's own (ns/monitor/command_watch.h)
    } else if (auto* tmpfs = std::get_if<TmpfsMsg>(&msg)) {
        s.usage->add_tmpfs(std::move(tmpfs->fds));  // admitted with --json-status-fd only: usage exists
    } else if (auto* dir = std::get_if<LoginDirMsg>(&msg)) {
        s.logins.add_sandbox_dir(dir->index, std::move(dir->fd));
        // The sandbox holds the command until DEST is watched (launch.cc).
        if (::send(s.sock.get(), "W", 1, MSG_NOSIGNAL) != 1)
            throw SysError(errno, "--login-file: can't tell the sandbox DEST is watched");
    }
}

// Security: a datagram the setup channel's table refused (or its decoder): the monitor reads the
// channel no more and ends the sandbox, whatever phase it is in; finish() then ends in order and
// cocoon fails with the reason (SECURITY.md, "The setup channel").
void refuse(Supervised& s, SetupState& state, const std::string& why)
{
    if (state.refused)
        return;
    state.refused = why;
    send_signal(s.pidfd, SIGKILL);
#ifdef COCOON_TEST_HOOKS
    test_hook::monitor_refused(s.plan.log_prefix);
#endif
}

// The exit line of --json-status-fd, and cocoon's exit code.
int report_exit(Supervised& s, SetupState& state, const reaper::ExitStatus& exit)
{
    if (s.reports.json_status) {
        std::string line = "{ \"exit-code\": " + std::to_string(exit.code);
        if (exit.signal)
            line += ", \"exit-signal\": " + std::to_string(exit.signal);
        Usage used = s.usage->finish();
        s.cgroup.account(used);
        if (state.worker)
            used.relay_worker_cpu_us = state.worker->cpu_us();
        line += UsageMeter::json_members(used);
        report(state.warnings, s.reports.json_status.get(), "--json-status-fd", line + " }\n");
    }
    return exit.code;
}

// After PID 1 (its end seen at pid1_seen): the end in order, then the report.
int finish(Supervised& s, SetupState& state, std::chrono::steady_clock::time_point pid1_seen)
{
    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(s.pidfd), &info, WEXITED) < 0)
        if (errno != EINTR)
            throw SysError(errno, "waitid");
    // What PID 1 and PID 2 sent before they ended, unless the channel was refused already.
    try {
        while (!state.refused)
            if (auto msg = receive_queued_message(s.sock.get()))
                take_message(*msg, s, state);
            else
                break;
    } catch (const ProtocolError& e) {
        refuse(s, state, e.what());
    }
    // Every relayed connection ends with the sandbox; the egress log gets each connection's
    // line, then the summary. Before the cgroup is emptied: the worker is in it, and would die
    // before its summary (stop() waits 2 s at most, then kills it).
    if (state.worker)
        state.worker->stop(s.plan.log_prefix);
    // Whatever a sandbox without a PID namespace left in its cgroup goes now.
    s.cgroup.empty_out();
    // The sandbox's processes are gone: the caller's terminal as it was.
    if (std::optional<SysError> failed = s.terminals.restore())
        state.warnings.say(*failed);
    if (state.refused)
        throw ProtocolError("the setup channel: " + *state.refused + ": ended the sandbox");
    if (state.error)
        rethrow(*state.error);
    const reaper::ExitStatus exit = reaper::exit_status(state.command_status.value_or(
        info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8 : info.si_status & 0x7f));
    // --login-file: the last changes, saved before cocoon reports the exit. A command a signal
    // killed was stopped, by the monitor or by someone it did not see.
    s.logins.finish(exit.signal ? std::optional(pid1_seen) : std::nullopt);
    return report_exit(s, state, exit);
}

// The setup channel's source: one message a wake. One the table refuses ends the sandbox, and the
// channel is read no more; at EOF no set-up process holds it now.
void on_setup_channel(short revents, Supervised& s, SetupState& state, bool& open)
{
    if (revents & POLLIN) {
        try {
            if (auto msg = receive_queued_message(s.sock.get()))
                return take_message(*msg, s, state);
        } catch (const ProtocolError& e) {
            refuse(s, state, e.what());
            open = false;
            return;
        }
    }
    if (revents & (POLLHUP | POLLERR | POLLNVAL))
        open = false;
}

// The command's grace period is over (ns/monitor/command_watch.h).
void on_grace_over(Supervised& s, SetupState& state)
{
    if (auto status = state.command.on_timer()) {
        // The command ended and PID 1 did not reap it: stopped by the agent. The sandbox ends
        // with the command, with the command's status.
        if (!state.command_status)
            state.command_status = *status;
        sys::write_all(STDERR_FILENO, s.plan.log_prefix +
                                          "cocoon: the command exited but the sandbox's PID 1 did not end; "
                                          "ending the sandbox (was PID 1 frozen?)\n");
        send_signal(s.pidfd, SIGKILL);
    }
}

}  // namespace

int monitor(Supervised s)
{
    // Security: the setup channel is closed by cocoon's exit, never before: a datagram still queued
    // on it (a flood the monitor stopped reading) may hold a lingering TCP socket, whose release
    // with the channel would block the monitor in the kernel; an exiting process's does not.
    struct ClosedAtExit {
        UniqueFd& fd;
        ~ClosedAtExit() { (void)fd.release(); }
    } channel{s.sock};
    const LaunchPlan& plan = s.plan;
    SetupState state;
    state.warnings = Warnings(plan.log_prefix);
    state.check.emplace(setup_expects(s));
    start_worker(plan, s.reports, s.cgroup, state.worker);
    // The resource report samples the sandbox's memory and tasks: every 100 ms (often enough to
    // see a peak that lasts half a second), or less often where a sample costs more
    // (UsageMeter::next_interval).
    UniqueFd sampler;
    if (s.reports.json_status) {
        sampler = make_timer();
        s.usage->sample(s.pid, s.cgroup.fd());
        arm(sampler.get(), s.usage->next_interval());
    }
    StopPath stop(
        plan, s.pidfd, std::move(s.parent), [&] { s.logins.stop_begins(); },
        [&] {
            if (sampler)
                s.usage->sample(s.pid, s.cgroup.fd(), true);
        });
    bool setup_open = true, grace = false;
    std::optional<std::chrono::steady_clock::time_point> pid1_exited;  // when its end was seen
    // The stop path first: nothing waits behind it in a round.
    std::vector<EventSource> sources = stop.sources();
    const std::vector<EventSource> others = {
        {"PID 1's exit", [&] { return s.pidfd; }, [&](short) { pid1_exited = std::chrono::steady_clock::now(); }},
        {"setup channel", [&] { return setup_open ? s.sock.get() : -1; },
         [&](short revents) { on_setup_channel(revents, s, state, setup_open); }},
        {"the command's exit", [&] { return state.command.pidfd(); },
         [&](short) {
             state.command.on_exit();
             grace = true;
         }},
        {"the command's grace period", [&] { return grace ? state.command.timer_fd() : -1; },
         [&](short) {
             grace = false;
             on_grace_over(s, state);
         }},
        {"relay worker", [&] { return state.worker && !state.worker_gone ? state.worker->fd() : -1; },
         [&](short) {
             if (!state.worker->serve())
                 state.worker_gone = true;  // it ended: stop() says how
         }},
        // What the worker writes to stderr, bounded and never waited for (ns/monitor/worker_stderr.h).
        {"relay worker's stderr", [&] { return state.worker ? state.worker->stderr_fd() : -1; },
         [&](short) { state.worker->forward_stderr(); }},
        {"usage sampler", [&] { return sampler.get(); },
         [&](short) {
             uint64_t ticks;
             if (::read(sampler.get(), &ticks, sizeof ticks) == sizeof ticks) {
                 s.usage->sample(s.pid, s.cgroup.fd());
                 arm(sampler.get(), s.usage->next_interval());  // its cost sets the next one's time
             }
         }},
        // --login-file: changes to DEST (and to SRC), then the quiet period.
        {"login sync", [&] { return s.logins.inotify_fd(); }, [&](short) { s.logins.on_events(); }},
        {"login sync timer", [&] { return s.logins.timer_fd(); }, [&](short) { s.logins.on_timer(); }},
    };
    sources.insert(sources.end(), others.begin(), others.end());
    run_events(sources, [&] { return pid1_exited.has_value(); });
    return finish(s, state, *pid1_exited);
}

}  // namespace cocoon::ns
