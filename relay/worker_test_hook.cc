// Test-only misbehaviour of the confined relay worker (relay/worker_test_hook.h): compiled only with
// -DCOCOON_TEST_HOOKS=ON, never in a shipped build. Runs in the worker, after its seccomp allowlist.
// Runs in: worker.
#include "relay/worker_test_hook.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "relay/fd_message.h"
#include "relay/worker_protocol.h"

namespace cocoon::relay::test_hook {
namespace {

void say(const std::string& prefix, const std::string& what, int result)
{
    const std::string line = prefix + "cocoon: relay worker: test hook: " + what + ": " +
                             (result < 0 ? std::strerror(errno) : "done") + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
}

// sendmsg of an 8-byte message with `fds` in one SCM_RIGHTS.
int send_fds(int sock, const std::vector<int>& fds)
{
    uint32_t msg[2] = {1, 0};
    iovec iov{msg, sizeof msg};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    hdr.msg_control = control;
    hdr.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&hdr);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    return static_cast<int>(::sendmsg(sock, &hdr, MSG_NOSIGNAL | MSG_DONTWAIT));
}

// An upstream request for `name` (empty: an IP literal) at IPv4 `address` port `port`, written
// past the worker's own checks.
wire::Request upstream(const std::string& name, const char* address, uint16_t port)
{
    wire::Request msg;
    msg.kind = wire::kUpstream;
    msg.family = AF_INET;
    msg.port = port;
    ::inet_pton(AF_INET, address, msg.address);
    msg.name_size = static_cast<uint8_t>(name.size());
    std::memcpy(msg.name, name.data(), name.size());
    return msg;
}

// Writes `msg` and waits (1 s at most) for its answer. The worker's own loop, which would take the
// answer, is in this hook meanwhile. Returns the answer's errno (0: a socket came, in `socket`).
int ask(int requests, int answers, const wire::Request& msg, UniqueFd& socket, wire::Answer& answer)
{
    if (::write(requests, &msg, sizeof msg) != static_cast<ssize_t>(sizeof msg))
        return errno;
    pollfd ready{answers, POLLIN, 0};
    if (::poll(&ready, 1, 1000) != 1)
        return ETIMEDOUT;
    const int err = receive_msg(answers, answer, std::span(&socket, 1), MSG_DONTWAIT);
    return err != 0 ? err : answer.kind == wire::kSocket ? 0 : answer.err;
}

// A TCP socket whose close would block: one the monitor connected to 127.0.0.1:PORT (an allowed
// address) for an upstream request, its peer not reading, its send queue full and SO_LINGER
// {1, 100000}. -1 when it could not be made.
int lingering_socket(uint16_t port, int requests, int answers, const std::string& prefix)
{
    UniqueFd socket;
    wire::Answer answer;
    const int err = ask(requests, answers, upstream("", "127.0.0.1", port), socket, answer);
    if (err != 0) {
        errno = err;
        say(prefix, "an upstream socket to 127.0.0.1:" + std::to_string(port), -1);
        return -1;
    }
    const int fd = socket.release();
    pollfd connected{fd, POLLOUT, 0};
    ::poll(&connected, 1, 1000);
    const int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    static char chunk[65536];
    size_t queued = 0;
    for (ssize_t n; (n = ::send(fd, chunk, sizeof chunk, MSG_NOSIGNAL | MSG_DONTWAIT)) > 0;)
        queued += static_cast<size_t>(n);
    const linger slow{1, 100000};
    const int set = ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &slow, sizeof slow);
    say(prefix, "a TCP socket with " + std::to_string(queued) + " bytes queued and SO_LINGER {1, 100000}", set);
    return fd;
}

// connect-host: socket(2) and connect(2) to the host's 127.0.0.1:port.
void connect_host(long port, const std::string& prefix)
{
    // The host's network, directly: no socket(2) in the allowlist (SIGSYS), and none to reach
    // in the worker's network namespace.
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    say(prefix, "socket(AF_INET)", fd);
    say(prefix, "connect(127.0.0.1:" + std::to_string(port) + ")",
        ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr));
}

// ask-upstream: requests the monitor must refuse, one line per answer.
void ask_upstream(uint16_t port, int requests, int answers, const std::string& prefix)
{
    // Upstream requests an honest worker never writes: each must come back refused.
    const struct {
        const char* what;
        wire::Request msg;
    } asks[] = {
        {"127.0.0.1 (an IP literal)", upstream("", "127.0.0.1", port)},
        {"off.test (not on the allowlist) at 127.0.0.1", upstream("off.test", "127.0.0.1", port)},
        {"example.test at 127.0.0.1", upstream("example.test", "127.0.0.1", port)},
        {"example.test at 169.254.169.254", upstream("example.test", "169.254.169.254", port)},
    };
    for (const auto& each : asks) {
        UniqueFd socket;
        wire::Answer answer;
        const int err = ask(requests, answers, each.msg, socket, answer);
        const std::string line = prefix + "cocoon: relay worker: test hook: upstream " + each.what + " port " +
                                 std::to_string(port) + ": " +
                                 (err == 0 ? std::string("a socket") : std::strerror(err)) + " (refusal " +
                                 std::to_string(answer.refusal) + ")\n";
        (void)!::write(STDERR_FILENO, line.data(), line.size());
    }
    say(prefix, "upstream requests", 0);
}

// flood: refused requests as fast as they are answered.
void flood(int requests, int answers, const std::string& prefix)
{
    // Upstream requests as fast as the monitor answers them (refused: a name off the
    // allowlist), at most 32 unanswered, until the monitor kills the worker.
    const wire::Request msg = upstream("off.test", "192.0.2.1", 443);
    unsigned long sent = 0, answered = 0;
    for (;;) {
        while (sent - answered < 32) {
            if (::write(requests, &msg, sizeof msg) != static_cast<ssize_t>(sizeof msg))
                break;
            ++sent;
        }
        pollfd ready{answers, POLLIN, 0};
        if (::poll(&ready, 1, 1000) != 1) {
            say(prefix, "flood: no answer after " + std::to_string(sent) + " requests", -1);
            return;
        }
        wire::Answer answer;
        UniqueFd none;
        while (receive_msg(answers, answer, std::span(&none, 1), MSG_DONTWAIT) == 0)
            ++answered;
    }
}

}  // namespace

std::optional<Hook> parse(const std::string& spec, pid_t monitor)
{
    if (spec.empty())
        return std::nullopt;
    Hook hook;
    hook.monitor = monitor;
    const size_t colon = spec.find(':');
    hook.mode = spec.substr(0, colon);
    if (colon != std::string::npos) {
        char* end = nullptr;
        hook.delay_ms = static_cast<int>(std::strtol(spec.c_str() + colon + 1, &end, 10));
        if (end && *end == ':')
            hook.arg = std::strtol(end + 1, nullptr, 10);
    }
    return hook;
}

void misbehave(const Hook& hook, const Fds& fds, const std::string& prefix)
{
    const int control = fds.control, answers = fds.answers, requests = fds.requests;
    if (hook.mode == "two-fds") {
        const std::vector<int> two = {STDIN_FILENO, STDOUT_FILENO};
        say(prefix, "sendmsg(control, two fds)", send_fds(control, two));
        say(prefix, "sendmsg(answers, two fds)", send_fds(answers, two));
        const char wrong[3] = {1, 2, 3};
        say(prefix, "a 3-byte request", static_cast<int>(::write(requests, wrong, sizeof wrong)));
    } else if (hook.mode == "bad-kind") {
        wire::Request request;
        request.kind = 0xdeadbeef;
        say(prefix, "a request of kind 0xdeadbeef", static_cast<int>(::write(requests, &request, sizeof request)));
    } else if (hook.mode == "linger") {
        const int fd = lingering_socket(static_cast<uint16_t>(hook.arg), requests, answers, prefix);
        if (fd >= 0) {
            say(prefix, "sendmsg(control, the lingering socket)", send_fds(control, {fd}));
            say(prefix, "sendmsg(answers, the lingering socket)", send_fds(answers, {fd}));
        }
        // Kept open: the worker's own end closes it without lingering (an exiting process does not).
    } else if (hook.mode == "stop") {
        // tgkill first: the allowlist keeps it (for abort). kill(2) is outside it: the first call
        // ends the worker (SIGSYS).
        const pid_t other = static_cast<pid_t>(hook.arg);
        say(prefix, "tgkill(monitor " + std::to_string(hook.monitor) + ", SIGSTOP)",
            static_cast<int>(::syscall(SYS_tgkill, hook.monitor, hook.monitor, SIGSTOP)));
        say(prefix, "tgkill(" + std::to_string(other) + ", SIGSTOP)",
            static_cast<int>(::syscall(SYS_tgkill, other, other, SIGSTOP)));
        if (const pid_t parent = ::getppid(); parent != 0)
            say(prefix, "kill(getppid() " + std::to_string(parent) + ", SIGSTOP)", ::kill(parent, SIGSTOP));
        say(prefix, "kill(monitor " + std::to_string(hook.monitor) + ", SIGSTOP)", ::kill(hook.monitor, SIGSTOP));
    } else if (hook.mode == "connect-host") {
        connect_host(hook.arg, prefix);
    } else if (hook.mode == "ask-upstream") {
        ask_upstream(static_cast<uint16_t>(hook.arg), requests, answers, prefix);
    } else if (hook.mode == "flood") {
        flood(requests, answers, prefix);
    } else if (hook.mode == "kill-all") {
        say(prefix, "kill(-1, SIGKILL)", ::kill(-1, SIGKILL));
    } else if (hook.mode == "rewrite-log") {
        say(prefix, "lseek(log, 0, SEEK_SET)", static_cast<int>(::lseek(fds.log, 0, SEEK_SET)));
        const std::string line = "REWRITTEN BY THE WORKER\n";
        say(prefix, "write(log) after the lseek", static_cast<int>(::write(fds.log, line.data(), line.size())));
    } else if (hook.mode == "rewrite-log-flags") {
        say(prefix, "fcntl(log, F_SETFL, O_WRONLY)", ::fcntl(fds.log, F_SETFL, O_WRONLY));
    } else if (hook.mode == "stderr-flood") {
        // Non-blocking, as every line of the worker's: what the pipe does not take is lost here.
        int written = 0;
        for (int i = 0; i < 5000; ++i) {
            const std::string line = prefix + "cocoon: relay worker: test hook: flood line " + std::to_string(i) + "\n";
            written += ::write(STDERR_FILENO, line.data(), line.size()) > 0;
        }
        const timespec second{1, 0};
        ::nanosleep(&second, nullptr);  // the monitor's rate lets the next line through
        say(prefix, "stderr flood of 5000 lines, " + std::to_string(written) + " into the pipe", 0);
    } else if (hook.mode == "rewrite-log-dup") {
        say(prefix, "dup(log)", ::dup(fds.log));
    } else {
        say(prefix, "unknown mode " + hook.mode, -1);
    }
}

}  // namespace cocoon::relay::test_hook
