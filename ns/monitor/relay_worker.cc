// The monitor's side of the confined relay worker (ns/monitor/relay_worker.h): its start (the
// channels, the options' memfd, the clone and exec of a fresh image), its requests answered, its
// stderr forwarded, its stop. The worker's own side is relay/worker.cc.
// Runs in: monitor: cocoon after the clone, with the caller's rights; the child's few lines
// between clone3 and execveat (ids, fds, signals) run in the worker's process before it is the worker.
#include "ns/monitor/relay_worker.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>
#include <sstream>

#include "base/sys.h"
#include "base/sys_error.h"
#include "relay/egress_log.h"
#include "relay/fd_message.h"
#include "relay/host_socket.h"
#include "relay/worker_config.h"
#ifdef COCOON_TEST_HOOKS
#include "relay/worker_test_hook.h"
#endif

namespace cocoon::ns {
namespace {

namespace wire = relay::wire;
using relay::kConfigFd;

// The child, before its exec, fails as the worker does: one line, status 1.
using relay::worker_fail;

// Whether the user namespace's uid_map or gid_map (`path`) maps `id`.
bool maps_id(const char* path, uint32_t id)
{
    std::istringstream map(sys::read_small(AT_FDCWD, path, size_t{1} << 20));
    for (uint64_t inside, outside, count; map >> inside >> outside >> count;)
        if (inside <= id && id - inside < count)
            return true;
    return false;
}

// The worker's channels: each pair's 0 end is the monitor's, its 1 end the worker's.
struct Channels {
    UniqueFd control0, control1, answers0, answers1, requests0, requests1, err0, err1, null;
};

Channels make_channels()
{
    // Security: the monitor can receive no fd from the worker, by construction (a worker taken
    // over could send it fds to fill its fd table, or a TCP socket whose close blocks in the kernel,
    // which an fd the kernel discards unread closes in the receiver too, freezing the stop path).
    // Its requests come through a pipe, which carries none; the two sockets carry fds to the
    // worker only: the monitor's ends are shut for reading before the worker exists, so nothing
    // the worker sends on them is ever queued to the monitor (sendmsg fails with EPIPE).
    Channels c;
    int control[2], answers[2], requests[2], err[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control), "socketpair");
    c.control0.reset(control[0]);
    c.control1.reset(control[1]);
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, answers), "socketpair");
    c.answers0.reset(answers[0]);
    c.answers1.reset(answers[1]);
    check(::pipe2(requests, O_CLOEXEC), "pipe2");
    c.requests0.reset(requests[0]);
    c.requests1.reset(requests[1]);
    check(::shutdown(c.control0.get(), SHUT_RD), "shutdown(SHUT_RD)");
    check(::shutdown(c.answers0.get(), SHUT_RD), "shutdown(SHUT_RD)");
    // Security: no file description of the caller's reaches the worker (one it could seek, make
    // blocking, or write through as the caller's terminal). Its stderr is a pipe the monitor
    // forwards (ns/monitor/worker_stderr.h), non-blocking at both ends; stdin and stdout /dev/null.
    check(::pipe2(err, O_CLOEXEC | O_NONBLOCK), "pipe2");
    c.err0.reset(err[0]);
    c.err1.reset(err[1]);
    c.null = sys::check_fd(::open("/dev/null", O_RDWR | O_CLOEXEC), "relay worker: can't open /dev/null");
    return c;
}

// A pipe or terminal as --egress-log gets a file description of cocoon's own, O_NONBLOCK
// (the caller's stays as it was), opened here: the worker has no /proc (relay/egress_log.h).
// A regular file has one already, O_WRONLY | O_APPEND (tools/cocoon/entry.cc): checked again here.
void own_egress_log(relay::WorkerOptions& options)
{
    if (!options.egress || !options.egress->log)
        return;
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

// The options, for the exec'd image (relay/worker_config.h).
relay::WorkerConfig make_config(const relay::WorkerOptions& options)
{
    relay::WorkerConfig config;
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
    // few ids, as before the ids were the run's own; and a root's without CAP_SYS_ADMIN, which can
    // make the worker's PID and network namespaces only in a user namespace of its own) gets a
    // user namespace of its own.
    const uint32_t own_id = relay::kWorkerIdBase + static_cast<uint32_t>(::getpid());
    config.own_user_namespace = !(sys::privileged_root(::geteuid(), sys::own_caps().effective) &&
                                  maps_id("/proc/self/uid_map", own_id) && maps_id("/proc/self/gid_map", own_id));
    config.worker_id = config.own_user_namespace ? 0 : own_id;
    config.monitor = ::getpid();
#ifdef COCOON_TEST_HOOKS
    // Test-only: the worker's environment is empty, so the monitor reads the hook's variable.
    if (const char* spec = std::getenv(relay::test_hook::kEnv))
        config.test_hook = spec;
#endif
    return config;
}

// The options' memfd, written and rewound: the exec'd image reads it at kConfigFd.
UniqueFd write_options(const relay::WorkerConfig& config)
{
    const std::string blob = relay::serialize(config);
    if (blob.size() > relay::kMaxWorkerConfig)
        throw SysError(E2BIG, "relay worker: its options (--relay, --egress-allow) are over " +
                                  std::to_string(relay::kMaxWorkerConfig) + " bytes");
    UniqueFd options_fd(
        sys::check_fd(static_cast<int>(::syscall(SYS_memfd_create, "cocoon-relay-options", MFD_CLOEXEC)),
                      "relay worker: memfd_create"));
    if (!sys::write_all(options_fd.get(), blob) || ::lseek(options_fd.get(), 0, SEEK_SET) != 0)
        throw SysError(errno, "relay worker: can't write its options");
    return options_fd;
}

// What the clone's child needs to become the worker.
struct ChildPlan {
    const Channels& fds;
    int log;  // the --egress-log, or /dev/null
    int options_fd;
    int exe;
    bool own_user_namespace;
    uid_t caller_uid;
    gid_t caller_gid;
    const std::string& prefix;
};

// The clone's child, before it is the worker: its user namespace's ids, its fds at their numbers,
// its signals; then the exec of cocoon's binary as the worker. Never returns.
[[noreturn]] void exec_worker(const ChildPlan& child)
{
    const std::string& prefix = child.prefix;
    // Its user namespace's maps, before the exec: the caller's ids become 0 there, so the new
    // image (root of its namespace: execve keeps its capabilities) can confine itself; a
    // process the namespace does not map as 0 would lose them at the exec, and a map can be
    // written only with them.
    if (child.own_user_namespace) {
        try {
            sys::write_file("/proc/self/setgroups", "deny");
            sys::write_file("/proc/self/uid_map", "0 " + std::to_string(child.caller_uid) + " 1");
            sys::write_file("/proc/self/gid_map", "0 " + std::to_string(child.caller_gid) + " 1");
        } catch (const SysError& e) {
            worker_fail(prefix, "its user namespace", e.code());
        }
    }
    // Only what the worker needs crosses, at fixed numbers: /dev/null, its stderr pipe, its
    // two sockets, the --egress-log (or /dev/null), its request pipe, its options, and the
    // binary's fd (CLOEXEC: gone at the exec). Each is first copied above them all, so that
    // no dup2 overwrites one not yet placed.
    const Channels& c = child.fds;
    const int from[] = {c.null.get(),     c.null.get(), c.err1.get(),      c.control1.get(),
                        c.answers1.get(), child.log,    c.requests1.get(), child.options_fd};
    int high[std::size(from)];
    for (size_t i = 0; i < std::size(from); ++i)
        if ((high[i] = ::fcntl(from[i], F_DUPFD_CLOEXEC, 64)) < 0)
            worker_fail(prefix, "fcntl(F_DUPFD)", errno);
    const int exe_fd = ::fcntl(child.exe, F_DUPFD_CLOEXEC, 64);
    for (size_t i = 0; i < std::size(from); ++i)
        if (::dup2(high[i], static_cast<int>(i)) < 0)  // dup2: the copy is not CLOEXEC
            worker_fail(prefix, "dup2", errno);
    if (exe_fd < 0)
        worker_fail(prefix, "fcntl(F_DUPFD)", errno);
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
    char* argv[] = {const_cast<char*>("cocoon-relay"), const_cast<char*>(relay::kWorkerMode), nullptr};
    char* envp[] = {nullptr};
    ::syscall(SYS_execveat, exe_fd, "", argv, envp, AT_EMPTY_PATH);
    worker_fail(prefix, "can't run as a fresh image (execveat)", errno);
}

}  // namespace

RelayWorker::RelayWorker(relay::WorkerOptions options, std::vector<std::shared_ptr<const relay::HostSocket>> targets,
                         int cgroup)
    : m_targets(std::move(targets))
{
    Channels fds = make_channels();
    own_egress_log(options);
    if (options.egress && options.egress->log)
        m_log.reset(::fcntl(options.egress->log.get(), F_DUPFD_CLOEXEC, 3));  // for the kill's line
    m_log_prefix = options.log_prefix;
    m_stderr_lines = StderrLines(options.log_prefix);
    const uid_t caller_uid = ::getuid();
    const gid_t caller_gid = ::getgid();
    const relay::WorkerConfig config = make_config(options);
    UniqueFd options_fd = write_options(config);
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
    // host's; the monitor connects for it (ns/monitor/upstream.h).
    sys::Cloned child =
        sys::clone3(CLONE_NEWPID | CLONE_NEWNET | (config.own_user_namespace ? CLONE_NEWUSER : 0), cgroup);
    if (child.pid == 0) {
        const int log = options.egress && options.egress->log ? options.egress->log.get() : fds.null.get();
        exec_worker({fds, log, options_fd.get(), exe.get(), config.own_user_namespace, caller_uid, caller_gid,
                     options.log_prefix});
    }
    m_pid = child.pid;
    m_pidfd = std::move(child.pidfd);
    m_control = std::move(fds.control0);
    m_answers = std::move(fds.answers0);
    m_requests = std::move(fds.requests0);
    m_stderr = std::move(fds.err0);
    ::fcntl(m_answers.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(m_requests.get(), F_SETFL, O_NONBLOCK);
    ::fcntl(m_control.get(), F_SETFL, O_NONBLOCK);
    if (options.egress)
        start_upstream(options.egress_allow);
}

void RelayWorker::start_upstream(const std::vector<std::string>& patterns)
{
    // The same rules the worker parses from the same text (relay/worker_config.h).
    std::vector<relay::AllowRule> rules;
    rules.reserve(patterns.size());
    for (const std::string& pattern : patterns)
        rules.push_back(relay::parse_allow_rule(pattern));
    m_upstream.emplace(std::move(rules));
    std::string error;
    for (UniqueFd& socket : name_server_sockets(error))
        if (!relay::send_msg(m_control.get(), wire::Control{wire::kNameServer, 0}, socket.get()))
            break;  // the worker is gone; serve() sees it
    if (!error.empty()) {
        const std::string line = m_log_prefix + "cocoon: warning: --egress: " + error + "\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
}

void RelayWorker::forward_stderr()
{
    // At its end the pipe is no longer polled, and closed by stop(), as the worker's other fds.
    if (m_stderr_open && !m_stderr_lines.forward(m_stderr.get()))
        m_stderr_open = false;
}

RelayWorker::~RelayWorker()
{
    if (m_pidfd) {
        ::syscall(SYS_pidfd_send_signal, m_pidfd.get(), SIGKILL, nullptr, 0);
        siginfo_t info{};
        while (::waitid(P_PIDFD, static_cast<id_t>(m_pidfd.get()), &info, WEXITED) < 0 && errno == EINTR) {}
    }
}

bool RelayWorker::serve()
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

bool RelayWorker::answer(const wire::Request& msg)
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
    if (relay::send_msg(m_answers.get(), answer, answer.err == 0 ? socket.get() : -1))
        return true;
    // An honest worker keeps at most 64 requests unanswered, which its queue always holds.
    if (errno == EAGAIN || errno == EWOULDBLOCK)
        return kill_for("more requests than its answers' queue holds (it does not read them)");
    return false;  // the worker is gone
}

bool RelayWorker::kill_for(const std::string& what)
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
            "{ \"relay-worker\": \"killed\", \"note\": " + relay::json_string("it sent the monitor " + what) + " }\n";
        pollfd room{m_log.get(), POLLOUT, 0};
        if (entry.size() <= PIPE_BUF && ::poll(&room, 1, 0) == 1 && (room.revents & POLLOUT) &&
            ::send(m_log.get(), entry.data(), entry.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == ENOTSOCK)
            (void)!::write(m_log.get(), entry.data(), entry.size());
    }
    return false;
}

void RelayWorker::add_listener(UniqueFd listener, relay::ListenerKind kind, uint32_t index)
{
    if (!m_killed_for.empty())
        return;
    wire::Control msg{static_cast<uint32_t>(kind), index};
    if (relay::send_msg(m_control.get(), msg, listener.get()))
        return;
    // Security: the monitor's end is non-blocking: a worker that does not read its control
    // messages is killed, not waited for.
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        kill_for("no room for a listener (it does not read its control messages)");
        return;
    }
    throw SysError(errno, "relay worker: can't hand over a listener");
}

void RelayWorker::stop(const std::string& log_prefix)
{
    if (!m_pidfd)
        return;
    m_phase = wire::kMonitorStopping;
    // A worker whose control queue is full gets no Stop: it is killed at once, not waited for.
    const bool told = m_killed_for.empty() && relay::send_msg(m_control.get(), wire::Control{wire::kStop, 0});
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

}  // namespace cocoon::ns
