// The confined relay worker's own side (relay/worker.h): its entry reads its options, then
// worker_main confines it and runs the relay and egress loop. The monitor's side, which starts it
// and answers its requests, is ns/monitor/relay_worker.cc.
// Runs in: worker: the exec'd image, from its first line (worker_entry) to its exit.
#include "relay/worker.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <span>

#include "relay/egress_log.h"
#include "relay/fd_message.h"
#include "relay/worker_broker.h"
#include "relay/worker_protocol.h"
#ifdef COCOON_TEST_HOOKS
#include <sys/timerfd.h>

#include "relay/worker_test_hook.h"
#endif
#include "relay/worker_config.h"

namespace cocoon::relay {
namespace {

#include "worker_seccomp.inc"

// Not sys::read_small: /etc/resolv.conf is often a link (systemd-resolved's stub), which its
// O_NOFOLLOW refuses; these are the host's files, read before the worker confines itself.
std::string read_small_file(const char* path)
{
    UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
    std::string text;
    char buf[4096];
    for (ssize_t n; fd && text.size() < (size_t{1} << 20) && (n = ::read(fd.get(), buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<size_t>(n));
    return text;
}

void write_new_file(const char* path, const std::string& text, const std::string& prefix)
{
    UniqueFd fd(::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
        worker_fail(prefix, std::string("can't write ") + path + " in its root", errno);
}

// Security: the worker gives up every right before it reads a byte of the sandbox's. Its root
// becomes an empty read-only tmpfs (with a copy of the host's /etc/hosts and /etc/resolv.conf
// for --egress's resolver), in a mount namespace of its own (in the user namespace it was cloned
// into, for a caller that is not root: the child mapped the caller's ids to 0 there before its
// exec, so the new image has the capabilities to do this); a root caller's worker becomes uid
// and gid kWorkerIdBase + the monitor's pid; then no capability, bounding set included,
// no_new_privs, not dumpable, and killed with the monitor.
void confine(const WorkerConfig& config, const std::string& prefix)
{
    const std::string hosts = config.egress ? read_small_file("/etc/hosts") : "";
    const std::string resolv = config.egress ? read_small_file("/etc/resolv.conf") : "";
    const bool root = !config.own_user_namespace;
    if (::unshare(CLONE_NEWNS) < 0)
        worker_fail(prefix, "unshare", errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0)
        worker_fail(prefix, "mount(MS_PRIVATE)", errno);
    // /proc is a directory every host has; the tmpfs on it becomes the root.
    if (::mount("cocoon-relay", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=2m,nr_inodes=16,mode=0755") <
        0)
        worker_fail(prefix, "mount(tmpfs)", errno);
    if (::chdir("/proc") < 0)
        worker_fail(prefix, "chdir", errno);
    if (config.egress) {
        if (::mkdir("etc", 0755) < 0)
            worker_fail(prefix, "mkdir(etc)", errno);
        write_new_file("etc/hosts", hosts, prefix);
        write_new_file("etc/resolv.conf", resolv, prefix);
    }
    if (::syscall(SYS_pivot_root, ".", ".") < 0)
        worker_fail(prefix, "pivot_root", errno);
    if (::umount2(".", MNT_DETACH) < 0)
        worker_fail(prefix, "umount2(old root)", errno);
    if (::chdir("/") < 0 ||
        ::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0)
        worker_fail(prefix, "remount(/, ro)", errno);
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap)
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            worker_fail(prefix, "PR_CAPBSET_DROP", errno);
    const uint32_t id = config.worker_id;
    if (root && (::setgroups(0, nullptr) < 0 || ::setresgid(id, id, id) < 0 || ::setresuid(id, id, id) < 0))
        worker_fail(prefix, "setresuid(" + std::to_string(id) + ")", errno);
    cap_t none = cap_init();
    if (!none || cap_set_proc(none) < 0)
        worker_fail(prefix, "cap_set_proc", errno);
    cap_free(none);
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        worker_fail(prefix, "prctl", errno);
    // A new uid clears the parent-death signal: set after it.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        worker_fail(prefix, "PR_SET_PDEATHSIG", errno);
    // A monitor that ended before that line sent no signal; its end of the control socket is then
    // closed (getppid() cannot tell: the monitor is outside the worker's PID namespace).
    pollfd monitor{kControlFd, 0, 0};
    if (::poll(&monitor, 1, 0) != 0 && (monitor.revents & (POLLHUP | POLLERR | POLLNVAL)))
        ::_exit(1);
}

// The allowlist (relay/worker_seccomp_gen.cc), for every thread (the resolver's was started).
// SIGSYS: a call outside the allowlist, which the kernel did not make. Named on stderr (only
// async-signal-safe calls: the number by hand), then the worker ends.
void on_refused_call(int, siginfo_t* info, void*)
{
    char text[96] = "cocoon: relay worker: system call ";
    size_t n = std::strlen(text);
    char digits[12];
    size_t d = 0;
    for (unsigned nr = static_cast<unsigned>(info->si_syscall); d == 0 || nr; nr /= 10)
        digits[d++] = static_cast<char>('0' + nr % 10);
    while (d)
        text[n++] = digits[--d];
    const char tail[] = " is outside its seccomp allowlist\n";
    std::memcpy(text + n, tail, sizeof tail - 1);
    (void)!::write(STDERR_FILENO, text, n + sizeof tail - 1);
    ::_exit(70);
}

void load_allowlist(const std::string& prefix)
{
    struct sigaction action {};
    action.sa_sigaction = on_refused_call;
    action.sa_flags = SA_SIGINFO;
    if (::sigaction(SIGSYS, &action, nullptr) < 0)
        worker_fail(prefix, "sigaction(SIGSYS)", errno);
    sock_fprog prog{static_cast<unsigned short>(std::size(kWorkerAllowlist)),
                    const_cast<sock_filter*>(kWorkerAllowlist)};
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
        worker_fail(prefix, "seccomp", errno);
}

// The relay's lines go to the worker's stderr, after --level-prefix's prefix.
void log_to_stderr(RelayOptions& relay, const std::string& prefix)
{
    if (!prefix.empty())
        relay.log = [prefix](const std::string& line) {
            const std::string text = prefix + line + "\n";
            (void)!::write(STDERR_FILENO, text.data(), text.size());
        };
}

// Each --relay's target: a request to the monitor, which connects its pinned host socket.
std::vector<std::shared_ptr<const Target>> brokered_targets(const std::vector<std::string>& names, Broker& broker)
{
    std::vector<std::shared_ptr<const Target>> targets;
    for (size_t i = 0; i < names.size(); ++i)
        targets.push_back(std::make_shared<BrokeredTarget>(static_cast<uint32_t>(i), names[i], broker));
    return targets;
}

#ifdef COCOON_TEST_HOOKS
// Test-only (relay/worker_test_hook.h): the worker misbehaves, confined, after the delay.
void arm_hook(Relay& relay, UniqueFd& hook_timer, const test_hook::Hook& hook, const std::string& prefix)
{
    hook_timer.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
    const long ms = hook.delay_ms > 0 ? hook.delay_ms : 1;
    const itimerspec at{{0, 0}, {ms / 1000, ms % 1000 * 1000000}};
    ::timerfd_settime(hook_timer.get(), 0, &at, nullptr);
    relay.watch(hook_timer.get(), [&relay, &hook_timer, &hook, &prefix] {
        relay.unwatch(hook_timer.get());
        test_hook::misbehave(hook, {kControlFd, kAnswerFd, kRequestFd, kEgressLogFd}, prefix);
    });
}
#endif

// The monitor's Stop: what the sandbox sent before it ended and the relay has not yet moved goes
// first (bounded: 64 rounds of what is ready now), then every connection ends.
[[noreturn]] void stop_and_exit(Relay& relay, std::optional<Egress>& egress)
{
    relay.unwatch(kControlFd);
    relay.unwatch(kAnswerFd);
    if (egress)
        relay.unwatch(egress->epoll_fd());
    for (int round = 0; round < 64; ++round) {
        pollfd ready{relay.epoll_fd(), POLLIN, 0};
        if (::poll(&ready, 1, 0) != 1)
            break;
        relay.run_once(0);
    }
    relay.close_all();
    if (egress)
        egress->close_all();
    ::_exit(0);
}

// What the worker's loop holds: the engines and the monitor's messages' check.
struct Loop {
    Relay& relay;
    std::optional<Egress>& egress;
    const std::vector<std::shared_ptr<const Target>>& targets;
    WireCheck& check;
    uint32_t& phase;
    const std::string& prefix;
};

// One control message from the monitor, checked against the boundary's table
// (relay/worker_protocol.h): a name server, a listener, or Stop.
void on_control(const Loop& loop)
{
    wire::Control msg;
    UniqueFd fd;
    const int err = receive_msg(kControlFd, msg, std::span(&fd, 1));
    if (err == ECONNRESET)
        ::_exit(0);  // the monitor is gone
    if (err != 0)
        worker_fail(loop.prefix, "a malformed message from the monitor", err);
    if (std::string wrong = loop.check.admit(msg.kind, loop.phase, fd ? 1 : 0, RateBound::Clock::now()); !wrong.empty())
        worker_fail(loop.prefix, "the monitor sent " + wrong, EBADMSG);
    std::optional<Egress>& egress = loop.egress;
    if (msg.kind == wire::kNameServer) {
        if (egress)
            egress->add_name_server(std::move(fd));
        return;
    }
    loop.phase = wire::kWorkerServing;
    if (msg.kind == wire::kStop)
        stop_and_exit(loop.relay, egress);
    const auto kind = static_cast<ListenerKind>(msg.kind);
    if (kind == ListenerKind::Relay && msg.index < loop.targets.size())
        loop.relay.add_listener(std::move(fd), loop.targets[msg.index]);
    else if (kind == ListenerKind::EgressProxy && egress)
        egress->add_listener(std::move(fd), false);
    else if (kind == ListenerKind::Transparent && egress)
        egress->add_listener(std::move(fd), true);
    else if (kind == ListenerKind::Resolver && egress)
        egress->add_resolver(std::move(fd));
}

[[noreturn]] void worker_main(const WorkerConfig& config, WorkerOptions options)
{
    const std::string& prefix = options.log_prefix;
#ifdef COCOON_TEST_HOOKS
    const std::optional<test_hook::Hook> hook = test_hook::parse(config.test_hook, config.monitor);
#endif
    confine(config, prefix);
    try {
        log_to_stderr(options.relay, prefix);
        Relay relay(options.relay);
        Broker broker(options.relay.buffer_size, kRequestFd, kAnswerFd);
        const std::vector<std::shared_ptr<const Target>> targets = brokered_targets(options.relay_names, broker);
        std::optional<Egress> egress;
        if (options.egress)
            egress.emplace(std::move(*options.egress), relay,
                           [&broker](uint64_t id, const std::string& name, const sockaddr_storage& address) {
                               return broker.request_upstream(id, name, address);
                           });
        // The monitor's messages, checked against the boundary's table (relay/worker_protocol.h).
        WireCheck check(wire::rules());
        uint32_t phase = wire::kWorkerStarting;
        if (::fcntl(kAnswerFd, F_SETFL, O_NONBLOCK) < 0 || ::fcntl(kRequestFd, F_SETFL, O_NONBLOCK) < 0)
            worker_fail(prefix, "fcntl(O_NONBLOCK)", errno);
        load_allowlist(prefix);
        // One wait for everything: the relay's sockets, the monitor's two, the egress proxy's.
        relay.watch(kAnswerFd, [&] {
            if (!broker.take_answers(relay, egress ? &*egress : nullptr, check))
                relay.unwatch(kAnswerFd);
        });
        if (egress)
            relay.watch(egress->epoll_fd(), [&] { egress->run_once(); });
#ifdef COCOON_TEST_HOOKS
        UniqueFd hook_timer;
        if (hook)
            arm_hook(relay, hook_timer, *hook, prefix);
#endif
        const Loop loop{relay, egress, targets, check, phase, prefix};
        relay.watch(kControlFd, [&loop] { on_control(loop); });
        for (;;)
            relay.run_once(-1);
    } catch (const std::exception& e) {
        const std::string line = prefix + "cocoon: relay worker: " + e.what() + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
        ::_exit(1);
    }
}

}  // namespace

bool is_worker_mode(const std::vector<std::string>& args)
{
    return args.size() == 1 && args[0] == kWorkerMode;
}

// The exec'd image (tools/cocoon/entry.cc): a fresh copy of cocoon's binary, with an empty environment
// and the fds above. It reads its options (relay/worker_config.h), then confines itself and runs.
[[noreturn]] void worker_entry()
{
    // First of all, as PID 1's re-exec does (ns/setup/first_process.cc): nothing may ptrace this image.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ::prctl(PR_SET_NAME, "cocoon-relay", 0, 0, 0);
    std::string blob;
    char buf[16384];
    for (;;) {
        const ssize_t n = ::read(kConfigFd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            worker_fail("", "can't read its options (fd " + std::to_string(kConfigFd) + ")", errno);
        if (n == 0)
            break;
        blob.append(buf, static_cast<size_t>(n));
        if (blob.size() > kMaxWorkerConfig)
            break;  // the parser refuses it
    }
    ::close(kConfigFd);
    WorkerConfig config;
    WorkerOptions options;
    try {
        config = parse_worker_config(blob);
        options.relay = config.relay;
        options.log_prefix = config.log_prefix;
        options.relay_names = config.relay_names;
        if (config.egress) {
            options.egress.emplace();
            for (const std::string& pattern : config.egress_allow)
                options.egress->allow.push_back(parse_allow_rule(pattern));
            options.egress->head_timeout = config.head_timeout;
            options.egress->max_pending = config.max_pending;
            if (config.egress_log)
                options.egress->log.reset(kEgressLogFd);
        }
    } catch (const std::exception& e) {
        const std::string line = "cocoon: relay worker: malformed options: " + std::string(e.what()) + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
        ::_exit(1);
    }
    worker_main(config, std::move(options));
}

}  // namespace cocoon::relay
