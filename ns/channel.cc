// Setup channel encoding: one datagram per message, a type byte then the body.
// Used by the monitor (receiving) and the sandbox's setup processes (sending).
// Runs in: caller, monitor, setup, pid1, pid2: set-up, PID 1 and PID 2 send on the setup channel;
//  the monitor decodes it; the caller reads the join helper's.
#include "ns/channel.h"

#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>

#include "base/sys_error.h"

namespace cocoon::ns {
namespace {

constexpr size_t kMaxFds = 64;  // per message; the sender splits longer lists
// The most fds the kernel carries in one datagram (SCM_MAX_FD): a receiver with room for fewer
// has the rest closed by the kernel inside recvmsg, before it can disarm them (below).
constexpr size_t kMaxReceivedFds = 253;
static_assert(kMaxTmpfsReported <= kMaxFds, "TmpfsMsg is one message");

// The bytes of a T, as a message body carries them.
template <class T> std::string bytes_of(const T& value)
{
    return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

// A T from the first sizeof(T) bytes (the caller checked that there are as many).
template <class T> T read_as(std::string_view bytes)
{
    T value;
    std::memcpy(&value, bytes.data(), sizeof value);
    return value;
}

// body: bytes after the type byte (only with a single message's worth of fds).
void send_fds(int sock, char type, std::span<const UniqueFd> fds, const std::string& body = "")
{
    const std::string data = type + body;
    for (size_t first = 0; first < fds.size(); first += kMaxFds) {
        size_t n = std::min(kMaxFds, fds.size() - first);
        iovec iov{const_cast<char*>(data.data()), data.size()};
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
            out[i] = fds[first + i].get();
        check(::sendmsg(sock, &msg, MSG_NOSIGNAL), "sendmsg(fds)");
    }
}

// Security: a TCP socket with a full send queue and a long SO_LINGER blocks the close of its last
// reference in the kernel, up to the linger time. The sandbox may send one where a listener
// belongs; the receiver, whose close of a refused fd may be the last, turns lingering off first
// (a listener's sockets linger not: this changes nothing for ours). Not a socket: ENOTSOCK, fine.
void disarm(int fd)
{
    const linger off{0, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof off);
}

// recvmsg of one datagram; nullopt at EOF, or when nothing is queued and
// flags has MSG_DONTWAIT.
std::optional<Message> receive(int sock, int flags)
{
    // One byte more than a sender writes, so an oversized datagram shows as
    // MSG_TRUNC even where the kernel would not report it.
    char buf[kMaxDatagram + 1];
    for (;;) {
        iovec iov{buf, sizeof buf};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxReceivedFds)];
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && (flags & MSG_DONTWAIT))
            return std::nullopt;
        if (n < 0)
            throw SysError(errno, "Reading the setup channel");
        if (n == 0)
            return std::nullopt;
        std::vector<UniqueFd> fds;
        for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const int* in = reinterpret_cast<const int*>(CMSG_DATA(c));
                for (size_t i = 0; i < count; ++i) {
                    fds.emplace_back(in[i]);
                    disarm(in[i]);
                }
            }
        const bool truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || static_cast<size_t>(n) > kMaxDatagram;
        return decode_message(std::string_view(buf, static_cast<size_t>(n)), std::move(fds), truncated);
    }
}

}  // namespace

const std::array<ReportedNamespace, 6> kReportedNamespaces = {{{CLONE_NEWCGROUP, "cgroup"},
                                                               {CLONE_NEWIPC, "ipc"},
                                                               {CLONE_NEWNS, "mnt"},
                                                               {CLONE_NEWNET, "net"},
                                                               {CLONE_NEWPID, "pid"},
                                                               {CLONE_NEWUTS, "uts"}}};

ErrorMsg error_message(const std::exception& e, const std::string& step)
{
    if (auto* sys = dynamic_cast<const SysError*>(&e))
        return ErrorMsg{sys->code(), step, sys->context()};
    if (dynamic_cast<const UsageError*>(&e))
        return ErrorMsg{0, step, e.what()};
    return ErrorMsg{0, step, "setup step " + step + ": " + e.what()};
}

void rethrow(const ErrorMsg& msg)
{
    if (msg.err != 0)
        throw SysError(msg.step, msg.err, msg.text);
    throw UsageError(msg.text);
}

void send_message(int sock, const Message& msg)
{
    std::string data;
    const char kind = static_cast<char>(kind_of(msg));
    if (auto* listeners = std::get_if<ListenersMsg>(&msg)) {
        // One message: a listener kind's fds are never more than kMaxFds (the table bounds them).
        send_fds(sock, kind, std::span(listeners->fds).first(std::min(listeners->fds.size(), kMaxFds)),
                 bytes_of(listeners->index));
        return;
    }
    if (auto* pidfd = std::get_if<PidfdMsg>(&msg)) {
        send_fds(sock, kind, {&pidfd->fd, 1});
        return;
    }
    if (auto* tmpfs = std::get_if<TmpfsMsg>(&msg)) {
        send_fds(sock, kind, std::span(tmpfs->fds).first(std::min(tmpfs->fds.size(), kMaxTmpfsReported)));
        return;
    }
    if (auto* dir = std::get_if<LoginDirMsg>(&msg)) {
        send_fds(sock, kind, {&dir->fd, 1}, bytes_of(dir->index));
        return;
    }
    if (auto* err = std::get_if<ErrorMsg>(&msg)) {
        // type, errno, step length (one byte), step, text; cut to one datagram.
        const std::string step = err->step.substr(0, 255);
        data = kind + bytes_of(int32_t{err->err}) + static_cast<char>(step.size()) + step + err->text;
        data.resize(std::min(data.size(), kMaxDatagram));
    } else if (auto* ns = std::get_if<NamespacesMsg>(&msg)) {
        data = kind + bytes_of(ns->inodes);
    } else {
        const StatusMsg& status = std::get<StatusMsg>(msg);
        data = kind + bytes_of(status.wait_status) + static_cast<char>(status.answer ? 1 : 0);
    }
    ::send(sock, data.data(), data.size(), MSG_NOSIGNAL);
}

Wire::Kind kind_of(const Message& msg)
{
    struct Visit {
        Wire::Kind operator()(const ErrorMsg&) const { return Wire::Error; }
        Wire::Kind operator()(const StatusMsg&) const { return Wire::Status; }
        Wire::Kind operator()(const ListenersMsg& m) const { return m.kind; }
        Wire::Kind operator()(const NamespacesMsg&) const { return Wire::Namespaces; }
        Wire::Kind operator()(const PidfdMsg& m) const
        {
            return m.first_process ? Wire::FirstProcessPidfd : Wire::OwnPidfd;
        }
        Wire::Kind operator()(const LoginDirMsg&) const { return Wire::LoginDir; }
        Wire::Kind operator()(const TmpfsMsg&) const { return Wire::Tmpfs; }
    };
    return std::visit(Visit{}, msg);
}

size_t fd_count(const Message& msg)
{
    if (auto* listeners = std::get_if<ListenersMsg>(&msg))
        return listeners->fds.size();
    if (auto* tmpfs = std::get_if<TmpfsMsg>(&msg))
        return tmpfs->fds.size();
    return std::holds_alternative<PidfdMsg>(msg) || std::holds_alternative<LoginDirMsg>(msg) ? 1 : 0;
}

Message decode_message(std::string_view data, std::vector<UniqueFd> fds, bool truncated)
{
    if (truncated)
        throw ProtocolError("a setup message was cut short (" + std::to_string(data.size()) + " bytes received)");
    if (data.empty())
        throw ProtocolError("an empty setup message");
    const auto type = static_cast<Wire::Kind>(data[0]);
    const std::string_view body = data.substr(1);
    const std::string name = "'" + std::string(1, data[0]) + "'";
    const bool wants_fds = type == Wire::RelayListener || type == Wire::EgressProxy || type == Wire::Transparent ||
                           type == Wire::Resolver || type == Wire::FirstProcessPidfd || type == Wire::OwnPidfd ||
                           type == Wire::LoginDir || type == Wire::Tmpfs;
    if (!wants_fds && !fds.empty())
        throw ProtocolError("a setup message of type " + name + " carried fds");
    switch (type) {
    case Wire::RelayListener:
    case Wire::EgressProxy:
    case Wire::Transparent:
    case Wire::Resolver:
        if (body.size() == sizeof(uint32_t))
            return ListenersMsg{type, read_as<uint32_t>(body), std::move(fds)};
        break;
    case Wire::Tmpfs:
        if (body.empty())
            return TmpfsMsg{std::move(fds)};
        break;
    case Wire::FirstProcessPidfd:
    case Wire::OwnPidfd:
        if (body.empty() && fds.size() == 1)
            return PidfdMsg{type == Wire::FirstProcessPidfd, std::move(fds[0])};
        break;
    case Wire::LoginDir:
        if (body.size() == sizeof(uint32_t) && fds.size() == 1)
            return LoginDirMsg{read_as<uint32_t>(body), std::move(fds[0])};
        break;
    case Wire::Status:
        if (body.size() == sizeof(int) + 1 && static_cast<unsigned char>(body.back()) <= 1)
            return StatusMsg{read_as<int>(body.substr(0, sizeof(int))), body.back() == 1};
        break;
    case Wire::Namespaces:
        if (body.size() == sizeof(NamespacesMsg::inodes))
            return NamespacesMsg{read_as<decltype(NamespacesMsg::inodes)>(body)};
        break;
    case Wire::Error:
        if (body.size() >= sizeof(int32_t) + 1) {
            const auto code = read_as<int32_t>(body);
            const size_t step_size = static_cast<unsigned char>(body[sizeof code]);
            const std::string_view rest = body.substr(sizeof code + 1);
            if (code >= 0 && step_size <= rest.size())
                return ErrorMsg{code, std::string(rest.substr(0, step_size)), std::string(rest.substr(step_size))};
        }
        break;
    default:
        throw ProtocolError("a setup message of unknown type " + std::to_string(static_cast<unsigned char>(type)));
    }
    // The fds go with the exception's unwinding (closed: none is kept).
    throw ProtocolError("a malformed setup message of type " + name + " (" + std::to_string(data.size()) + " bytes, " +
                        std::to_string(fds.size()) + " fds)");
}

std::optional<Message> receive_message(int sock)
{
    return receive(sock, 0);
}

std::optional<Message> receive_queued_message(int sock)
{
    return receive(sock, MSG_DONTWAIT);
}

}  // namespace cocoon::ns
