// Fixed-size messages with a few fds (SCM_RIGHTS) over a SOCK_SEQPACKET socket: the monitor's
// to the relay worker (relay/worker.h) and to the sandbox's first process (its command's cgroup,
// ns/channel.h), and tools/bench/relay's anchor of what one costs.
// Runs in: monitor, worker, setup: the monitor sends fds with it; the worker and set-up receive them.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <span>

#include "base/unique_fd.h"

namespace cocoon::relay {

// Sends msg with `fds` (at most 4) in one SCM_RIGHTS.
template <typename T> bool send_msg(int sock, const T& msg, std::span<const int> fds)
{
    constexpr size_t kMax = 4;
    if (fds.size() > kMax) {
        errno = EINVAL;
        return false;
    }
    iovec iov{const_cast<T*>(&msg), sizeof msg};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(kMax * sizeof(int))] = {};
    if (!fds.empty()) {
        hdr.msg_control = control;
        hdr.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&hdr);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    ssize_t n;
    do
        n = ::sendmsg(sock, &hdr, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(sizeof msg);
}

template <typename T> bool send_msg(int sock, const T& msg, int fd = -1)
{
    return fd >= 0 ? send_msg(sock, msg, std::span<const int>(&fd, 1)) : send_msg(sock, msg, std::span<const int>());
}

// One message of exactly T's size, and the fds it carries: at most fds.size() of them, in order
// (the slots past the ones that came are left empty; whether a kind of message needs its fd is the
// caller's to check). 0: a message; else the errno (ECONNRESET for the peer's end, EBADMSG for a
// message of another size, or with more fds than fds.size(), or another kind of control data).
//
// Security: a peer that sends more fds than the message may carry does not leave them open here
// (a process's fd table filled by its peer): every fd past fds.size() is closed before the return,
// and on EBADMSG the expected ones too. The control buffer has room for a few more than expected,
// so that extra fds arrive to be closed; any the kernel had no room for it released (MSG_CTRUNC).
template <typename T> int receive_msg(int sock, T& msg, std::span<UniqueFd> fds, int flags = 0)
{
    constexpr size_t kRoom = 4;  // fds the control buffer holds, the expected ones among them
    iovec iov{&msg, sizeof msg};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(kRoom * sizeof(int))] = {};
    hdr.msg_control = control;
    hdr.msg_controllen = sizeof control;
    for (UniqueFd& fd : fds)
        fd.reset();
    ssize_t n;
    do
        n = ::recvmsg(sock, &hdr, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno;
    bool bad = n != static_cast<ssize_t>(sizeof msg) || (hdr.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    size_t taken = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&hdr); c; c = CMSG_NXTHDR(&hdr, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) {
            bad = true;
            continue;
        }
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
            int received;
            std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof received);
            UniqueFd owned(received);  // closed here unless it has a slot
            if (taken < fds.size())
                fds[taken] = std::move(owned);
            else
                bad = true;
            ++taken;
        }
    }
    if (n == 0 || bad) {
        for (UniqueFd& fd : fds)
            fd.reset();
        return n == 0 ? ECONNRESET : EBADMSG;
    }
    return 0;
}

}  // namespace cocoon::relay
