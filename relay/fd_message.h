// Fixed-size messages with at most one fd (SCM_RIGHTS) over a SOCK_SEQPACKET socket: the relay
// worker's and the monitor's (relay/worker.h), and tools/bench/relay's anchor of what one costs.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/unique_fd.h"

namespace cocoon::relay {

template <typename T> bool send_msg(int sock, const T& msg, int fd = -1)
{
    iovec iov{const_cast<T*>(&msg), sizeof msg};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (fd >= 0) {
        hdr.msg_control = control;
        hdr.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&hdr);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    do
        n = ::sendmsg(sock, &hdr, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == static_cast<ssize_t>(sizeof msg);
}

// One message of exactly T's size, and the fd it carries if any. 0: a message; else the errno
// (ECONNRESET for the peer's end, EBADMSG for a message of another size or more than one fd).
template <typename T> int receive_msg(int sock, T& msg, UniqueFd& fd, int flags = 0)
{
    iovec iov{&msg, sizeof msg};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    hdr.msg_control = control;
    hdr.msg_controllen = sizeof control;
    ssize_t n;
    do
        n = ::recvmsg(sock, &hdr, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno;
    if (n == 0)
        return ECONNRESET;
    for (cmsghdr* c = CMSG_FIRSTHDR(&hdr); c; c = CMSG_NXTHDR(&hdr, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
            int received;
            std::memcpy(&received, CMSG_DATA(c), sizeof received);
            fd.reset(received);
        }
    if (n != static_cast<ssize_t>(sizeof msg) || (hdr.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        return EBADMSG;
    return 0;
}

}  // namespace cocoon::relay
