// ns tests of net/loopback.cc: each way of bringing lo up, in a fresh user+net
// namespace, checked by a real TCP connection over 127.0.0.1 and ::1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "base/sys.h"
#include "base/unique_fd.h"
#include "net/loopback.h"

using namespace cocoon;

namespace {

// Runs body in a child inside new user and network namespaces; returns its
// exit code (0: every check held).
int in_new_netns(const std::function<int()>& body)
{
    uid_t uid = getuid();
    pid_t pid = fork();
    if (pid == 0) {
        try {
            if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                _exit(90);
            sys::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n");
            _exit(body());
        } catch (const std::exception& e) {
            fprintf(stderr, "exception: %s\n", e.what());
            _exit(91);
        }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Listens on addr:0, connects to it, and accepts: true if all of it works.
bool tcp_round_trip(int family)
{
    UniqueFd listener(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET) {
        auto* a = reinterpret_cast<sockaddr_in*>(&ss);
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    } else {
        auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    }
    auto* sa = reinterpret_cast<sockaddr*>(&ss);
    if (!listener || bind(listener.get(), sa, len) < 0 || listen(listener.get(), 1) < 0 ||
        getsockname(listener.get(), sa, &len) < 0)
        return false;
    UniqueFd client(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(client.get(), sa, len) < 0)
        return false;
    UniqueFd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    return accepted.valid() && write(client.get(), "x", 1) == 1;
}

}  // namespace

TEST(Loopback, DownInAFreshNamespace)
{
    EXPECT_EQ(in_new_netns([] { return net::loopback_is_up() ? 1 : tcp_round_trip(AF_INET) ? 2 : 0; }), 0);
}

TEST(Loopback, NetlinkBringsItUp)
{
    EXPECT_EQ(in_new_netns([] {
                  net::loopback_up_netlink();
                  return !net::loopback_is_up() ? 1 : !tcp_round_trip(AF_INET) ? 2 : !tcp_round_trip(AF_INET6) ? 3 : 0;
              }),
              0);
}

// The fallback for hosts that refuse rtnetlink address changes.
TEST(Loopback, IoctlFallbackBringsItUp)
{
    EXPECT_EQ(in_new_netns([] {
                  net::loopback_up_ioctl();
                  return !net::loopback_is_up() ? 1 : !tcp_round_trip(AF_INET) ? 2 : !tcp_round_trip(AF_INET6) ? 3 : 0;
              }),
              0);
}

TEST(Loopback, FailsClearlyWithoutPrivilege)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = fork();
    if (pid == 0) {
        // New netns owned by a user namespace we create, then leave its
        // privileges behind by entering another user namespace below it.
        if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
            _exit(90);
        sys::write_file("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1\n");
        sys::write_file("/proc/self/setgroups", "deny");
        sys::write_file("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1\n");
        if (unshare(CLONE_NEWUSER) < 0)
            _exit(92);
        try {
            net::loopback_up();
        } catch (const std::exception& e) {
            std::string what = e.what();
            _exit(what.find("lo") != std::string::npos && what.find("Operation not permitted") != std::string::npos
                      ? 0
                      : 3);
        }
        _exit(4);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}
