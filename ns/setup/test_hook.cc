// Test-only misbehaviour of the sandbox's set-up on the setup channel (ns/setup/test_hook.h):
// compiled only with -DCOCOON_TEST_HOOKS=ON, never in a shipped build.
// Runs in: monitor, setup, pid1: test builds only: set-up and PID 1 misbehave; the monitor pauses
//  after refusing it.
#include "ns/setup/test_hook.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "base/unique_fd.h"
#include "ns/channel.h"

namespace cocoon::ns::test_hook {
namespace {

void say(const std::string& what)
{
    const std::string line = "cocoon: setup test hook: " + what + "\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
}

void sleep_ms(int ms)
{
    timespec t{ms / 1000, (ms % 1000) * 1000000L};
    while (::nanosleep(&t, &t) < 0 && errno == EINTR) {}
}

// One datagram, as set-up's encoder would not write it: `data` with `fds` in one SCM_RIGHTS.
ssize_t send_raw(int sock, const std::string& data, const std::vector<int>& fds, int flags = 0)
{
    iovec iov{const_cast<char*>(data.data()), data.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 64)] = {};
    if (!fds.empty()) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    return ::sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
}

void result(const std::string& what, ssize_t sent)
{
    say(what + ": " + (sent < 0 ? std::strerror(errno) : "sent"));
}

UniqueFd root_fd()
{
    return UniqueFd(::open("/", O_PATH | O_CLOEXEC));
}

}  // namespace

std::optional<SetupHook> setup_hook_from_env()
{
    const char* text = std::getenv(kSetupEnv);
    if (!text)
        return std::nullopt;
    const std::string spec = text;
    const size_t colon = spec.find(':');
    SetupHook hook{spec.substr(0, colon), 0};
    if (colon != std::string::npos)
        hook.delay_ms = std::atoi(spec.c_str() + colon + 1);
    return hook;
}

void misbehave(const SetupHook& hook, int sock, bool in_pid1)
{
    if ((hook.mode.rfind("late-", 0) == 0) != in_pid1 || hook.mode == "slow-pid1")
        return;
    sleep_ms(hook.delay_ms);
    const std::string& mode = hook.mode;
    if (mode == "repeat") {
        std::vector<UniqueFd> fds;
        fds.push_back(root_fd());
        send_message(sock, TmpfsMsg{std::move(fds)});
        result("a second tmpfs message", 0);
    } else if (mode == "bad-kind") {
        result("a datagram of kind 0x7f", send_raw(sock, "\x7f", {}));
    } else if (mode == "extra-fd") {
        const UniqueFd fd = root_fd();
        result("a status message with an fd", send_raw(sock, std::string("S\0\0\0\0\0", 6), {fd.get()}));
    } else if (mode == "unplanned-listener" || mode == "late-listener") {
        std::vector<UniqueFd> fds;
        fds.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        send_message(sock, ListenersMsg{Wire::EgressProxy, 0, std::move(fds)});
        result(std::string("an --egress proxy listener") + (in_pid1 ? " from PID 1" : ""), 0);
    } else if (mode == "flood") {
        const UniqueFd fd = root_fd();
        const std::vector<int> fds(64, fd.get());
        size_t sent = 0;
        ssize_t n = 0;
        while (sent < 100000 && (n = send_raw(sock, "T", fds, MSG_DONTWAIT)) >= 0)
            ++sent;
        result("a flood of " + std::to_string(sent) + " tmpfs messages of 64 fds", n < 0 && sent == 0 ? -1 : 0);
    } else {
        say("unknown mode " + mode);
    }
    // A set-up taken over goes no further: the monitor must end it (else the test sees cocoon
    // wait 30 s). PID 1 reaps on: the command runs until the monitor ends the sandbox.
    if (!in_pid1)
        sleep_ms(30000);
}

void pause_pid1(const SetupHook& hook)
{
    if (hook.mode != "slow-pid1")
        return;
    say("PID 1 waits " + std::to_string(hook.delay_ms) + " ms after the fork");
    sleep_ms(hook.delay_ms);
}

void monitor_refused(const std::string& prefix)
{
    if (!std::getenv(kSetupEnv))
        return;
    const std::string line = prefix + "cocoon: setup test hook: the monitor refused the setup channel; holding on\n";
    (void)!::write(STDERR_FILENO, line.data(), line.size());
    sleep_ms(1500);
}

}  // namespace cocoon::ns::test_hook
