// The confined relay worker (relay/worker.h): the monitor's half (Worker) and the worker's own
// (worker_main: confine, then the relay and egress loop).
#include "relay/worker.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <span>
#include <sstream>

#include "base/sys.h"
#include "base/sys_error.h"
#include "relay/egress_log.h"
#include "relay/fd_message.h"
#include "relay/host_socket.h"
#include "relay/upstream.h"
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

// The fds the exec'd worker starts with, at these numbers (0 and 1 are /dev/null, 2 the pipe the
// monitor forwards, relay/worker_stderr.h). kEgressLogFd is /dev/null without --egress-log: the
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

[[noreturn]] void fail(const std::string& prefix, const std::string& what, int err)
{
    const std::string line = prefix + "cocoon: relay worker: " + what + ": " + std::strerror(err) + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(1);
}

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
        fail(prefix, std::string("can't write ") + path + " in its root", errno);
}

// Whether the user namespace's uid_map or gid_map (`path`) maps `id`.
bool maps_id(const char* path, uint32_t id)
{
    std::istringstream map(read_small_file(path));
    for (uint64_t inside, outside, count; map >> inside >> outside >> count;)
        if (inside <= id && id - inside < count)
            return true;
    return false;
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
        fail(prefix, "unshare", errno);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0)
        fail(prefix, "mount(MS_PRIVATE)", errno);
    // /proc is a directory every host has; the tmpfs on it becomes the root.
    if (::mount("cocoon-relay", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=2m,nr_inodes=16,mode=0755") <
        0)
        fail(prefix, "mount(tmpfs)", errno);
    if (::chdir("/proc") < 0)
        fail(prefix, "chdir", errno);
    if (config.egress) {
        if (::mkdir("etc", 0755) < 0)
            fail(prefix, "mkdir(etc)", errno);
        write_new_file("etc/hosts", hosts, prefix);
        write_new_file("etc/resolv.conf", resolv, prefix);
    }
    if (::syscall(SYS_pivot_root, ".", ".") < 0)
        fail(prefix, "pivot_root", errno);
    if (::umount2(".", MNT_DETACH) < 0)
        fail(prefix, "umount2(old root)", errno);
    if (::chdir("/") < 0 ||
        ::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0)
        fail(prefix, "remount(/, ro)", errno);
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap)
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            fail(prefix, "PR_CAPBSET_DROP", errno);
    const uint32_t id = config.worker_id;
    if (root && (::setgroups(0, nullptr) < 0 || ::setresgid(id, id, id) < 0 || ::setresuid(id, id, id) < 0))
        fail(prefix, "setresuid(" + std::to_string(id) + ")", errno);
    cap_t none = cap_init();
    if (!none || cap_set_proc(none) < 0)
        fail(prefix, "cap_set_proc", errno);
    cap_free(none);
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
        ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        fail(prefix, "prctl", errno);
    // A new uid clears the parent-death signal: set after it.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        fail(prefix, "PR_SET_PDEATHSIG", errno);
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
        fail(prefix, "sigaction(SIGSYS)", errno);
    sock_fprog prog{static_cast<unsigned short>(std::size(kWorkerAllowlist)),
                    const_cast<sock_filter*>(kWorkerAllowlist)};
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
        fail(prefix, "seccomp", errno);
}

[[noreturn]] void worker_main(const WorkerConfig& config, WorkerOptions options)
{
    const std::string& prefix = options.log_prefix;
#ifdef COCOON_TEST_HOOKS
    const std::optional<test_hook::Hook> hook = test_hook::parse(config.test_hook, config.monitor);
#endif
    confine(config, prefix);
    try {
        if (!prefix.empty())
            options.relay.log = [prefix](const std::string& line) {
                const std::string text = prefix + line + "\n";
                (void)!::write(STDERR_FILENO, text.data(), text.size());
            };
        Relay relay(options.relay);
        Broker broker(options.relay.buffer_size, kRequestFd, kAnswerFd);
        std::vector<std::shared_ptr<const Target>> targets;
        for (size_t i = 0; i < options.relay_names.size(); ++i)
            targets.push_back(
                std::make_shared<BrokeredTarget>(static_cast<uint32_t>(i), options.relay_names[i], broker));
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
            fail(prefix, "fcntl(O_NONBLOCK)", errno);
        load_allowlist(prefix);
        // One wait for everything: the relay's sockets, the monitor's two, the egress proxy's.
        relay.watch(kAnswerFd, [&] {
            if (!broker.take_answers(relay, egress ? &*egress : nullptr, check))
                relay.unwatch(kAnswerFd);
        });
        if (egress)
            relay.watch(egress->epoll_fd(), [&] { egress->run_once(); });
#ifdef COCOON_TEST_HOOKS
        // Test-only (relay/worker_test_hook.h): the worker misbehaves, confined, after the delay.
        UniqueFd hook_timer;
        if (hook) {
            hook_timer.reset(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC));
            const long ms = hook->delay_ms > 0 ? hook->delay_ms : 1;
            const itimerspec at{{0, 0}, {ms / 1000, ms % 1000 * 1000000}};
            ::timerfd_settime(hook_timer.get(), 0, &at, nullptr);
            relay.watch(hook_timer.get(), [&] {
                relay.unwatch(hook_timer.get());
                test_hook::misbehave(*hook, {kControlFd, kAnswerFd, kRequestFd, kEgressLogFd}, prefix);
            });
        }
#endif
        relay.watch(kControlFd, [&] {
            wire::Control msg;
            UniqueFd fd;
            const int err = receive_msg(kControlFd, msg, std::span(&fd, 1));
            if (err == ECONNRESET)
                ::_exit(0);  // the monitor is gone
            if (err != 0)
                fail(prefix, "a malformed message from the monitor", err);
            if (std::string wrong = check.admit(msg.kind, phase, fd ? 1 : 0, RateBound::Clock::now()); !wrong.empty())
                fail(prefix, "the monitor sent " + wrong, EBADMSG);
            if (msg.kind == wire::kNameServer) {
                if (egress)
                    egress->add_name_server(std::move(fd));
                return;
            }
            phase = wire::kWorkerServing;
            if (msg.kind == wire::kStop) {
                // What the sandbox sent before it ended and the relay has not yet moved goes
                // first (bounded: 64 rounds of what is ready now), then every connection ends.
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
            const auto kind = static_cast<ListenerKind>(msg.kind);
            if (kind == ListenerKind::Relay && msg.index < targets.size())
                relay.add_listener(std::move(fd), targets[msg.index]);
            else if (kind == ListenerKind::EgressProxy && egress)
                egress->add_listener(std::move(fd), false);
            else if (kind == ListenerKind::Transparent && egress)
                egress->add_listener(std::move(fd), true);
            else if (kind == ListenerKind::Resolver && egress)
                egress->add_resolver(std::move(fd));
        });
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
            fail("", "can't read its options (fd " + std::to_string(kConfigFd) + ")", errno);
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

Worker::Worker(WorkerOptions options, std::vector<std::shared_ptr<const HostSocket>> targets, int cgroup)
    : m_targets(std::move(targets))
{
    // Security: the monitor can receive no fd from the worker, by construction (a worker taken
    // over could send it fds to fill its fd table, or a TCP socket whose close blocks in the kernel,
    // which an fd the kernel discards unread closes in the receiver too, freezing the stop path).
    // Its requests come through a pipe, which carries none; the two sockets carry fds to the
    // worker only: the monitor's ends are shut for reading before the worker exists, so nothing
    // the worker sends on them is ever queued to the monitor (sendmsg fails with EPIPE).
    int control[2], answers[2], requests[2], err[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control), "socketpair");
    UniqueFd control0(control[0]), control1(control[1]);
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, answers), "socketpair");
    UniqueFd answers0(answers[0]), answers1(answers[1]);
    check(::pipe2(requests, O_CLOEXEC), "pipe2");
    UniqueFd requests0(requests[0]), requests1(requests[1]);
    check(::shutdown(control0.get(), SHUT_RD), "shutdown(SHUT_RD)");
    check(::shutdown(answers0.get(), SHUT_RD), "shutdown(SHUT_RD)");
    // Security: no file description of the caller's reaches the worker (one it could seek, make
    // blocking, or write through as the caller's terminal). Its stderr is a pipe the monitor
    // forwards (relay/worker_stderr.h), non-blocking at both ends; stdin and stdout /dev/null.
    check(::pipe2(err, O_CLOEXEC | O_NONBLOCK), "pipe2");
    UniqueFd err0(err[0]), err1(err[1]);
    UniqueFd null(sys::check_fd(::open("/dev/null", O_RDWR | O_CLOEXEC), "relay worker: can't open /dev/null"));
    // A pipe or terminal as --egress-log gets a file description of cocoon's own, O_NONBLOCK
    // (the caller's stays as it was), opened here: the worker has no /proc (relay/egress_log.h).
    // A regular file has one already, O_WRONLY | O_APPEND (tools/cocoon/entry.cc): checked again here.
    if (options.egress && options.egress->log) {
        struct stat st {};
        check(::fstat(options.egress->log.get(), &st), "--egress-log: fstat");
        if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
            UniqueFd own(::open(("/proc/self/fd/" + std::to_string(options.egress->log.get())).c_str(),
                                O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
            if (own)
                options.egress->log = std::move(own);
        } else if (S_ISREG(st.st_mode) &&
                   (::fcntl(options.egress->log.get(), F_GETFL) & (O_APPEND | O_ACCMODE)) != (O_APPEND | O_WRONLY)) {
            throw SysError(EBADF, "--egress-log: the relay worker would write the file through a description that "
                                  "is not O_WRONLY | O_APPEND of cocoon's own");
        }
    }
    if (options.egress && options.egress->log)
        m_log.reset(::fcntl(options.egress->log.get(), F_DUPFD_CLOEXEC, 3));  // for the kill's line
    m_log_prefix = options.log_prefix;
    m_stderr_lines = StderrLines(options.log_prefix);

    // The options, for the exec'd image (relay/worker_config.h).
    WorkerConfig config;
    config.relay = options.relay;
    config.relay.log = nullptr;
    config.log_prefix = options.log_prefix;
    config.relay_names = options.relay_names;
    if (options.egress) {
        config.egress = true;
        config.egress_allow = options.egress_allow;
        config.head_timeout = options.egress->head_timeout;
        config.max_pending = options.egress->max_pending;
        config.egress_log = static_cast<bool>(options.egress->log);
    }
    // A root caller's worker takes ids of its own, where its user namespace maps them (the
    // initial one maps all); any other caller's (and a root's in a user namespace that maps only a
    // few ids, as before the ids were the run's own) gets a user namespace of its own.
    const uid_t caller_uid = ::getuid();
    const gid_t caller_gid = ::getgid();
    const uint32_t own_id = kWorkerIdBase + static_cast<uint32_t>(::getpid());
    config.own_user_namespace =
        !(::geteuid() == 0 && maps_id("/proc/self/uid_map", own_id) && maps_id("/proc/self/gid_map", own_id));
    config.worker_id = config.own_user_namespace ? 0 : own_id;
    config.monitor = ::getpid();
#ifdef COCOON_TEST_HOOKS
    // Test-only: the worker's environment is empty, so the monitor reads the hook's variable.
    if (const char* spec = std::getenv(test_hook::kEnv))
        config.test_hook = spec;
#endif
    const std::string blob = serialize(config);
    if (blob.size() > kMaxWorkerConfig)
        throw SysError(E2BIG, "relay worker: its options (--relay, --egress-allow) are over " +
                                  std::to_string(kMaxWorkerConfig) + " bytes");
    UniqueFd options_fd(
        sys::check_fd(static_cast<int>(::syscall(SYS_memfd_create, "cocoon-relay-options", MFD_CLOEXEC)),
                      "relay worker: memfd_create"));
    if (!sys::write_all(options_fd.get(), blob) || ::lseek(options_fd.get(), 0, SEEK_SET) != 0)
        throw SysError(errno, "relay worker: can't write its options");
    // cocoon's own binary, which the worker runs as a fresh image (sshd's re-exec): its memory is
    // then none of the monitor's (the caller's environment, what the monitor read). Security and
    // robustness: /proc/self/exe names the image this process runs whatever became of its path
    // since (deleted, or replaced by a rename: the link opens the old inode), and execveat runs
    // that inode through the fd, with no path to resolve in the child. O_PATH: execute permission
    // is checked at the exec, in the child's user namespace, where the maps written below keep
    // the file's owner and the caller what they were.
    UniqueFd exe(
        sys::check_fd(::open("/proc/self/exe", O_PATH | O_CLOEXEC), "relay worker: can't open /proc/self/exe"));

    // Security: the worker is cloned into a PID namespace of its own (owned by its own user
    // namespace, for a caller that is not root): tgkill(2), which its allowlist keeps for abort,
    // names only itself, never the monitor (a stopped monitor enforces no --kill-after,
    // --forward-signals or --die-with-parent) nor any other process of the caller's uid (kill(2)
    // is outside the allowlist). It still dies with the monitor (PR_SET_PDEATHSIG), which reaps it
    // through the pidfd.
    // Security: and into an empty network namespace (lo alone, down): it reaches no address of the
    // host's; the monitor connects for it (relay/upstream.h).
    sys::Cloned child =
        sys::clone3(CLONE_NEWPID | CLONE_NEWNET | (config.own_user_namespace ? CLONE_NEWUSER : 0), cgroup);
    if (child.pid == 0) {
        const std::string& prefix = options.log_prefix;
        // Its user namespace's maps, before the exec: the caller's ids become 0 there, so the new
        // image (root of its namespace: execve keeps its capabilities) can confine itself; a
        // process the namespace does not map as 0 would lose them at the exec, and a map can be
        // written only with them.
        if (config.own_user_namespace) {
            try {
                sys::write_file("/proc/self/setgroups", "deny");
                sys::write_file("/proc/self/uid_map", "0 " + std::to_string(caller_uid) + " 1");
                sys::write_file("/proc/self/gid_map", "0 " + std::to_string(caller_gid) + " 1");
            } catch (const SysError& e) {
                fail(prefix, "its user namespace", e.code());
            }
        }
        // Only what the worker needs crosses, at fixed numbers: /dev/null, its stderr pipe, its
        // two sockets, the --egress-log (or /dev/null), its request pipe, its options, and the
        // binary's fd (CLOEXEC: gone at the exec). Each is first copied above them all, so that
        // no dup2 overwrites one not yet placed.
        const int log = options.egress && options.egress->log ? options.egress->log.get() : null.get();
        const int from[] = {null.get(),     null.get(), err1.get(),      control1.get(),
                            answers1.get(), log,        requests1.get(), options_fd.get()};
        int high[std::size(from)];
        for (size_t i = 0; i < std::size(from); ++i)
            if ((high[i] = ::fcntl(from[i], F_DUPFD_CLOEXEC, 64)) < 0)
                fail(prefix, "fcntl(F_DUPFD)", errno);
        const int exe_fd = ::fcntl(exe.get(), F_DUPFD_CLOEXEC, 64);
        for (size_t i = 0; i < std::size(from); ++i)
            if (::dup2(high[i], static_cast<int>(i)) < 0)  // dup2: the copy is not CLOEXEC
                fail(prefix, "dup2", errno);
        if (exe_fd < 0)
            fail(prefix, "fcntl(F_DUPFD)", errno);
        // Every other fd goes at the exec (the copies above and the binary's among them).
        ::close_range(kConfigFd + 1, ~0U, CLOSE_RANGE_CLOEXEC);
        // The relay's splice(2) into a host socket whose proxy went away raises SIGPIPE.
        ::signal(SIGPIPE, SIG_IGN);
        // A terminal's ^C or a SIGTERM to cocoon's process group is the monitor's to act on (it
        // forwards, or ends, and then stops the worker, which writes the egress summary): the
        // worker blocks them; the monitor's death is its SIGKILL (PR_SET_PDEATHSIG). Both the
        // ignored SIGPIPE and the mask survive the exec, so the new image is never without them.
        sigset_t stops;
        sigemptyset(&stops);
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT})
            sigaddset(&stops, sig);
        ::sigprocmask(SIG_BLOCK, &stops, nullptr);
        char* argv[] = {const_cast<char*>("cocoon-relay"), const_cast<char*>(kWorkerMode), nullptr};
        char* envp[] = {nullptr};
        ::syscall(SYS_execveat, exe_fd, "", argv, envp, AT_EMPTY_PATH);
        fail(prefix, "can't run as a fresh image (execveat)", errno);
    }
    m_pid = child.pid;
    m_pidfd = std::move(child.pidfd);
    m_control = std::move(control0);
    m_answers = std::move(answers0);
    m_requests = std::move(requests0);
    m_stderr = std::move(err0);
    ::fcntl(m_answers.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(m_requests.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(m_control.get(), F_SETFL, O_NONBLOCK);
    if (options.egress)
        start_upstream(options.egress_allow);
}

void Worker::start_upstream(const std::vector<std::string>& patterns)
{
    // The same rules the worker parses from the same text (relay/worker_config.h).
    std::vector<AllowRule> rules;
    for (const std::string& pattern : patterns)
        rules.push_back(parse_allow_rule(pattern));
    m_upstream.emplace(std::move(rules));
    std::string error;
    for (UniqueFd& socket : name_server_sockets(error))
        if (!send_msg(m_control.get(), wire::Control{wire::kNameServer, 0}, socket.get()))
            break;  // the worker is gone; serve() sees it
    if (!error.empty()) {
        const std::string line = m_log_prefix + "cocoon: warning: --egress: " + error + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
}

void Worker::forward_stderr()
{
    // At its end the pipe is no longer polled, and closed by stop(), as the worker's other fds.
    if (m_stderr_open && !m_stderr_lines.forward(m_stderr.get()))
        m_stderr_open = false;
}

Worker::~Worker()
{
    if (m_pidfd) {
        ::syscall(SYS_pidfd_send_signal, m_pidfd.get(), SIGKILL, nullptr, 0);
        siginfo_t info{};
        while (::waitid(P_PIDFD, static_cast<id_t>(m_pidfd.get()), &info, WEXITED) < 0 && errno == EINTR) {}
    }
}

bool Worker::serve()
{
    if (!m_pidfd || !m_killed_for.empty())
        return false;
    // Bounded: a worker that asks faster than this is answered on the next round. A worker keeps
    // at most Broker::kMaxInFlight (64) requests unanswered, so its queue always takes the answers.
    wire::Request batch[64];
    ssize_t n;
    do
        n = ::read(m_requests.get(), batch, sizeof batch);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN;
    if (n == 0)
        return false;  // every write end is closed: the worker ended
    // Security: requests are written whole (under PIPE_BUF), so an honest worker's always read
    // whole; anything else, like a kind or a --relay that does not exist, is a worker taken
    // over: it is killed, not answered (OpenSSH's monitor: fatal() on an unexpected request).
    if (n % static_cast<ssize_t>(sizeof(wire::Request)) != 0)
        return kill_for("a request of a wrong size (" + std::to_string(n % sizeof(wire::Request)) + " bytes over)");
    for (const wire::Request& msg : std::span(batch, static_cast<size_t>(n) / sizeof(wire::Request)))
        if (!answer(msg))
            return false;
    return true;
}

bool Worker::answer(const wire::Request& msg)
{
    if (std::string wrong = m_check.admit(msg.kind, m_phase, 0, RateBound::Clock::now()); !wrong.empty())
        return kill_for(wrong);
    wire::Answer answer;
    UniqueFd socket;
    if (msg.kind == wire::kConnect) {
        if (msg.target >= m_targets.size())
            return kill_for("a request for --relay number " + std::to_string(msg.target) + " of " +
                            std::to_string(m_targets.size()));
        answer.err = m_targets[msg.target]->connect(socket);
    } else {
        if (!m_upstream)
            return kill_for("an upstream request without --egress");
        std::string malformed;
        UpstreamAnswer decided = m_upstream->decide(msg, malformed);
        if (!malformed.empty())
            return kill_for(malformed);
        answer.err = decided.err;
        answer.refusal = decided.refusal;
        socket = std::move(decided.socket);
    }
    answer.kind = answer.err == 0 ? wire::kSocket : wire::kFailed;
    // Never blocks (non-blocking); the monitor's copy of the socket closes right after.
    if (send_msg(m_answers.get(), answer, answer.err == 0 ? socket.get() : -1))
        return true;
    // An honest worker keeps at most 64 requests unanswered, which its queue always holds.
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return kill_for("more requests than its answers' queue holds (it does not read them)");
    return false;  // the worker is gone
}

bool Worker::kill_for(const std::string& what)
{
    ::syscall(SYS_pidfd_send_signal, m_pidfd.get(), SIGKILL, nullptr, 0);
    m_killed_for = what;
    const std::string line = m_log_prefix + "cocoon: the relay worker sent the monitor " + what +
                             ": killed it; the sandbox runs on without --relay and --egress\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    if (m_log) {
        // Never blocks: a pipe or terminal is cocoon's own O_NONBLOCK description, a pipe that
        // was not is written only with room (POLLOUT takes PIPE_BUF whole), a socket MSG_DONTWAIT.
        const std::string entry =
            "{ \"relay-worker\": \"killed\", \"note\": " + json_string("it sent the monitor " + what) + " }\n";
        pollfd room{m_log.get(), POLLOUT, 0};
        if (entry.size() <= PIPE_BUF && ::poll(&room, 1, 0) == 1 && (room.revents & POLLOUT) &&
            ::send(m_log.get(), entry.data(), entry.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == ENOTSOCK)
            (void)!::write(m_log.get(), entry.data(), entry.size());
    }
    return false;
}

void Worker::add_listener(UniqueFd listener, ListenerKind kind, uint32_t index)
{
    if (!m_killed_for.empty())
        return;
    wire::Control msg{static_cast<uint32_t>(kind), index};
    if (send_msg(m_control.get(), msg, listener.get()))
        return;
    // Security: the monitor's end is non-blocking: a worker that does not read its control
    // messages is killed, not waited for.
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        kill_for("no room for a listener (it does not read its control messages)");
        return;
    }
    throw SysError(errno, "relay worker: can't hand over a listener");
}

void Worker::stop(const std::string& log_prefix)
{
    if (!m_pidfd)
        return;
    m_phase = wire::kMonitorStopping;
    // A worker whose control queue is full gets no Stop: it is killed at once, not waited for.
    const bool told = m_killed_for.empty() && send_msg(m_control.get(), wire::Control{wire::kStop, 0});
    if (!told)
        ::syscall(SYS_pidfd_send_signal, m_pidfd.get(), SIGKILL, nullptr, 0);
    pollfd p{m_pidfd.get(), POLLIN, 0};
    // While it closes, it may still ask for a connection it accepted: answered (then closed); what
    // it writes to stderr is forwarded.
    pollfd both[3] = {p, {m_killed_for.empty() ? m_requests.get() : -1, POLLIN, 0}, {stderr_fd(), POLLIN, 0}};
    for (int waited = 0; waited < 2000;) {
        if (::poll(both, 3, 50) > 0) {
            if (both[0].revents)
                break;
            if (both[1].revents && !serve())
                both[1].fd = -1;
            if (both[2].revents) {
                forward_stderr();
                both[2].fd = stderr_fd();
            }
        }
        waited += 50;
    }
    if (!(both[0].revents & POLLIN))
        ::syscall(SYS_pidfd_send_signal, m_pidfd.get(), SIGKILL, nullptr, 0);
    siginfo_t info{};
    // The system call's fifth argument, which glibc's waitid leaves out: the worker's rusage.
    rusage used{};
    long reaped;
    while ((reaped = ::syscall(SYS_waitid, P_PIDFD, m_pidfd.get(), &info, WEXITED, &used)) < 0 && errno == EINTR) {}
    m_pidfd.reset();
    // Its last lines: what the pipe holds (its writer is gone; at most the pipe's size).
    if (m_stderr_open)
        m_stderr_lines.forward(m_stderr.get(), size_t{1} << 20);
    m_stderr_open = false;
    m_stderr.reset();
    const std::string last = m_stderr_lines.finish(RateBound::Clock::now());
    (void)!::write(STDERR_FILENO, last.data(), last.size());
    auto us = [](const timeval& t) {
        return static_cast<uint64_t>(t.tv_sec) * 1000000 + static_cast<uint64_t>(t.tv_usec);
    };
    if (reaped == 0)
        m_cpu_us = us(used.ru_utime) + us(used.ru_stime);
    std::string how;
    if (info.si_code == CLD_EXITED && info.si_status != 0)
        how = "exited with status " + std::to_string(info.si_status);
    else if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED)
        how = "was killed by signal " + std::to_string(info.si_status) +
              (info.si_status == SIGSYS ? " (a system call outside its allowlist)" : "");
    if (!how.empty() && m_killed_for.empty()) {  // killed for a message: said then
        const std::string line = log_prefix + "cocoon: the relay worker " + how + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
}

}  // namespace cocoon::relay
