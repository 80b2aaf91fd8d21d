// Setup channel encoding: one datagram per message, a type byte then the body.
// Used by the monitor (receiving) and the sandbox's setup processes (sending).
#include "ns/channel.h"

#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/sys_error.h"

namespace cocoon::ns {
namespace {

constexpr char kError = 'E';
constexpr char kStatus = 'S';
constexpr char kListeners = 'L';
constexpr char kNamespaces = 'N';
constexpr char kFirstProcess = 'P';
constexpr char kOtherProcess = 'O';
constexpr size_t kMaxFds = 64;  // per message; the sender splits longer lists

void send_fds(int sock, char type, const std::vector<int>& fds)
{
    for (size_t first = 0; first < fds.size(); first += kMaxFds) {
        size_t n = std::min(kMaxFds, fds.size() - first);
        iovec iov{&type, 1};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n);
        int* out = reinterpret_cast<int*>(CMSG_DATA(cmsg));
        for (size_t i = 0; i < n; ++i)
            out[i] = fds[first + i];
        check(::sendmsg(sock, &msg, MSG_NOSIGNAL), "sendmsg(fds)");
    }
}

}  // namespace

const std::array<ReportedNamespace, 6> kReportedNamespaces = {{{CLONE_NEWCGROUP, "cgroup"},
                                                               {CLONE_NEWIPC, "ipc"},
                                                               {CLONE_NEWNS, "mnt"},
                                                               {CLONE_NEWNET, "net"},
                                                               {CLONE_NEWPID, "pid"},
                                                               {CLONE_NEWUTS, "uts"}}};

void send_message(int sock, const Message& msg)
{
    std::string data;
    if (auto* listeners = std::get_if<ListenersMsg>(&msg)) {
        std::vector<int> fds;
        for (const UniqueFd& fd : listeners->fds)
            fds.push_back(fd.get());
        send_fds(sock, kListeners, fds);
        return;
    }
    if (auto* pidfd = std::get_if<PidfdMsg>(&msg)) {
        send_fds(sock, pidfd->first_process ? kFirstProcess : kOtherProcess, {pidfd->fd.get()});
        return;
    }
    if (auto* err = std::get_if<ErrorMsg>(&msg)) {
        data = kError + err->text;
    } else if (auto* ns = std::get_if<NamespacesMsg>(&msg)) {
        data.assign(1, kNamespaces);
        data.append(reinterpret_cast<const char*>(ns->inodes.data()), sizeof ns->inodes);
    } else {
        int status = std::get<StatusMsg>(msg).wait_status;
        data.assign(1, kStatus);
        data.append(reinterpret_cast<const char*>(&status), sizeof status);
    }
    ::send(sock, data.data(), data.size(), MSG_NOSIGNAL);
}

std::optional<Message> receive_message(int sock, bool blocking)
{
    char buf[4096];
    for (;;) {
        iovec iov{buf, sizeof buf};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | (blocking ? 0 : MSG_DONTWAIT));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::nullopt;
        std::vector<UniqueFd> fds;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const int* in = reinterpret_cast<const int*>(CMSG_DATA(c));
                for (size_t i = 0; i < count; ++i)
                    fds.emplace_back(in[i]);
            }
        if (buf[0] == kListeners)
            return ListenersMsg{std::move(fds)};
        if ((buf[0] == kFirstProcess || buf[0] == kOtherProcess) && fds.size() == 1)
            return PidfdMsg{buf[0] == kFirstProcess, std::move(fds[0])};
        if (buf[0] == kStatus && n == 1 + sizeof(int)) {
            int status;
            std::memcpy(&status, buf + 1, sizeof status);
            return StatusMsg{status};
        }
        if (buf[0] == kNamespaces && n == 1 + sizeof(NamespacesMsg::inodes)) {
            NamespacesMsg ns;
            std::memcpy(ns.inodes.data(), buf + 1, sizeof ns.inodes);
            return ns;
        }
        if (buf[0] == kError)
            return ErrorMsg{std::string(buf + 1, static_cast<size_t>(n - 1))};
        // Anything else is not from our setup code; ignore it.
    }
}

}  // namespace cocoon::ns
