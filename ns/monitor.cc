// The monitor's event loop: setup messages, PID 1's exit (pidfd), signals
// (signalfd), the --kill-after timer, the parent's death (--die-with-parent),
// and the status reports (--info-fd, --json-status-fd). Runs in cocoon's own
// process, outside the sandbox, with the caller's privilege.
#include "ns/monitor.h"

#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <optional>
#include <string>

#include "base/sys_error.h"
#include "ns/channel.h"
#include "ns/command_watch.h"
#include "relay/worker.h"
#include "reaper/reaper.h"
#include "reaper/status.h"

namespace cocoon::ns {
namespace {

bool is_stop_signal(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
}

void send_signal(int pidfd, int sig)
{
    ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0);
}

void write_all(int fd, const std::string& text)
{
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;  // a closed report fd must not stop the sandbox
        done += static_cast<size_t>(n);
    }
}

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

UniqueFd make_timer()
{
    return UniqueFd(static_cast<int>(check(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "timerfd_create")));
}

void arm(int timer, double seconds)
{
    itimerspec spec{};
    double whole = std::floor(seconds);
    spec.it_value.tv_sec = static_cast<time_t>(whole);
    spec.it_value.tv_nsec = static_cast<long>((seconds - whole) * 1e9);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
        spec.it_value.tv_nsec = 1;  // zero would disarm
    check(::timerfd_settime(timer, 0, &spec, nullptr), "timerfd_settime");
}

}  // namespace

sigset_t monitor_signals(const LaunchPlan& plan)
{
    sigset_t set;
    sigemptyset(&set);
    if (plan.process.forward_signals)
        set = reaper::forwarded_signals();
    if (plan.process.kill_after)
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            sigaddset(&set, sig);
    return set;
}

int monitor(const LaunchPlan& plan, pid_t pid, int pidfd, UniqueFd sock, UniqueFd parent, MonitorFds reports,
            std::optional<UsageMeter>& usage, SandboxCgroup& cgroup, LoginFiles logins, Terminals& terminals)
{
    const ProcessOptions& process = plan.process;
    sigset_t handled = monitor_signals(plan);
    UniqueFd sfd;
    if (!sigisemptyset(&handled))
        sfd.reset(static_cast<int>(check(::signalfd(-1, &handled, SFD_CLOEXEC), "signalfd")));
    UniqueFd timer = process.kill_after ? make_timer() : UniqueFd();
    // The resource report samples the sandbox's memory and tasks: every
    // 100 ms (often enough to see a peak that lasts half a second), or less
    // often where a sample costs more (UsageMeter::next_interval).
    UniqueFd sampler;
    if (reports.json_status) {
        sampler = make_timer();
        usage->sample(pid, cgroup.fd());
        arm(sampler.get(), usage->next_interval());
    }
    bool timer_armed = false;

    // --relay and --egress: a confined worker reads what the sandbox sends (relay/worker.h); the
    // monitor connects its --relay clients to the pinned host sockets.
    std::optional<relay::Worker> worker;
    if (!process.relays.empty() || process.egress) {
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
            for (const std::string& pattern : process.egress->allow)
                options.egress->allow.push_back(relay::parse_allow_rule(pattern));
            options.egress->log = std::move(reports.egress_log);
        }
        worker.emplace(std::move(options), reports.relay_sockets);
    }
    size_t listeners_received = 0;
    CommandWatch command;

    std::optional<ErrorMsg> error;
    std::optional<int> command_status;
    auto take = [&](Message& msg) {
        if (auto* err = std::get_if<ErrorMsg>(&msg)) {
            if (!error)
                error = std::move(*err);
        } else if (auto* status = std::get_if<StatusMsg>(&msg)) {
            command_status = status->wait_status;
        } else if (auto* ns = std::get_if<NamespacesMsg>(&msg)) {
            if (reports.info)
                write_all(reports.info.get(), namespace_report(pid, *ns, true));
            if (reports.json_status)
                write_all(reports.json_status.get(), namespace_report(pid, *ns, false));
        } else if (std::holds_alternative<ListenersMsg>(msg) && worker && listeners_received <= process.relays.size()) {
            // One message per --relay, in command-line order, as the pinned sockets are; then
            // the --egress listeners.
            const auto index = static_cast<uint32_t>(listeners_received++);
            for (UniqueFd& fd : std::get<ListenersMsg>(msg).fds)
                worker->add_listener(std::move(fd), index == process.relays.size(), index);
        } else if (auto* own = std::get_if<PidfdMsg>(&msg); own && !own->first_process && command.pidfd() < 0) {
            command.watch(std::move(own->fd));  // PID 2's own (ns/command_watch.h)
        } else if (auto* tmpfs = std::get_if<TmpfsMsg>(&msg)) {
            if (usage)
                usage->add_tmpfs(std::move(tmpfs->fds));
        } else if (auto* dir = std::get_if<LoginDirMsg>(&msg)) {
            logins.add_sandbox_dir(dir->index, std::move(dir->fd));
            // The sandbox holds the command until DEST is watched (launch.cc).
            if (::send(sock.get(), "W", 1, MSG_NOSIGNAL) != 1)
                throw SysError(errno, "--login-file: can't tell the sandbox DEST is watched");
        }
    };

    enum {
        kSock,
        kPid1,
        kSignals,
        kTimer,
        kParent,
        kWorker,
        kSampler,
        kLogin,
        kLoginTimer,
        kCommand,
        kCommandGrace,
        kCount
    };
    pollfd fds[kCount] = {{sock.get(), POLLIN, 0},
                          {pidfd, POLLIN, 0},
                          {sfd.get(), POLLIN, 0},
                          {timer.get(), POLLIN, 0},
                          {parent.get(), POLLIN, 0},
                          {worker ? worker->fd() : -1, POLLIN, 0},
                          {sampler.get(), POLLIN, 0},
                          {logins.inotify_fd(), POLLIN, 0},
                          {logins.timer_fd(), POLLIN, 0},
                          {-1, POLLIN, 0},
                          {-1, POLLIN, 0}};
    for (;;) {
        if (::poll(fds, kCount, -1) < 0) {
            if (errno == EINTR)
                continue;
            throw SysError(errno, "poll");
        }
        if (fds[kSock].revents & POLLIN) {
            if (auto msg = receive_queued_message(sock.get()))
                take(*msg);
            else if (fds[kSock].revents & POLLHUP)
                fds[kSock].fd = -1;  // EOF: no setup process holds the channel now
        } else if (fds[kSock].revents) {
            fds[kSock].fd = -1;
        }
        if (fds[kSignals].revents & POLLIN) {
            signalfd_siginfo info;
            if (::read(sfd.get(), &info, sizeof info) == sizeof info) {
                int sig = static_cast<int>(info.ssi_signo);
                if (process.forward_signals)
                    send_signal(pidfd, sig);
                if (process.kill_after && is_stop_signal(sig) && !timer_armed) {
                    arm(timer.get(), *process.kill_after);
                    timer_armed = true;
                }
            }
        }
        if (fds[kTimer].revents & POLLIN) {
            // --kill-after ran out: the kernel kills every process of the
            // sandbox once its PID 1 dies. What they used is sampled first:
            // no wait of the monitor's counts a process killed with PID 1.
            if (sampler)
                usage->sample(pid, cgroup.fd(), true);
            send_signal(pidfd, SIGKILL);
            fds[kTimer].fd = -1;
        }
        if (fds[kParent].revents) {
            // Security: --die-with-parent; nothing of the sandbox may outlive
            // the process that started cocoon.
            send_signal(pidfd, SIGKILL);
            fds[kParent].fd = -1;
        }
        if (fds[kWorker].revents && !worker->serve())
            fds[kWorker].fd = -1;  // it ended: stop() says how
        if (fds[kSampler].revents & POLLIN) {
            uint64_t ticks;
            if (::read(sampler.get(), &ticks, sizeof ticks) == sizeof ticks) {
                usage->sample(pid, cgroup.fd());
                arm(sampler.get(), usage->next_interval());  // its cost sets the next one's time
            }
        }
        // --login-file: changes to DEST (and to SRC), then the quiet period.
        if (fds[kLogin].revents)
            logins.on_events();
        if (fds[kLoginTimer].revents)
            logins.on_timer();
        if (fds[kCommand].revents) {
            command.on_exit();
            fds[kCommandGrace].fd = command.timer_fd();
        }
        if (fds[kCommandGrace].revents) {
            fds[kCommandGrace].fd = -1;
            if (auto status = command.on_timer()) {
                // The command ended and PID 1 did not reap it: stopped by the agent. The
                // sandbox ends with the command, with the command's status.
                if (!command_status)
                    command_status = *status;
                write_all(STDERR_FILENO, plan.log_prefix +
                                             "cocoon: the command exited but the sandbox's PID 1 did not end; "
                                             "ending the sandbox (was PID 1 frozen?)\n");
                send_signal(pidfd, SIGKILL);
            }
        }
        if (fds[kPid1].revents)
            break;
        fds[kCommand].fd = command.pidfd();
        fds[kLogin].fd = logins.inotify_fd();  // -1 while its events rest
    }

    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED) < 0)
        if (errno != EINTR)
            throw SysError(errno, "waitid");
    // Whatever a sandbox without a PID namespace left in its cgroup goes now.
    cgroup.empty_out();
    // The sandbox's processes are gone: the caller's terminal as it was.
    if (std::string failed = terminals.restore(); !failed.empty())
        write_all(STDERR_FILENO, plan.log_prefix + "cocoon: " + failed + "\n");
    while (auto msg = receive_queued_message(sock.get()))
        take(*msg);
    // Every relayed connection ends with the sandbox; the egress log gets each connection's
    // line, then the summary.
    if (worker)
        worker->stop(plan.log_prefix);
    if (error)
        rethrow(*error);
    // --login-file: the last changes, saved before cocoon reports the exit.
    logins.finish();

    int status =
        command_status.value_or(info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8 : info.si_status & 0x7f);
    reaper::ExitStatus exit = reaper::exit_status(status);
    if (reports.json_status) {
        std::string line = "{ \"exit-code\": " + std::to_string(exit.code);
        if (exit.signal)
            line += ", \"exit-signal\": " + std::to_string(exit.signal);
        Usage used = usage->finish();
        cgroup.account(used);
        line += UsageMeter::json_members(used);
        write_all(reports.json_status.get(), line + " }\n");
    }
    return exit.code;
}

}  // namespace cocoon::ns
