// The pumps of one relayed connection.
// Security: the bytes come from the sandbox and are untrusted; the relay moves them between two
// sockets and never parses, logs or acts on them.
//
// Upload (TCP -> Unix) splices through a 1 MiB pipe; download (Unix -> TCP) copies through a
// 256 KiB buffer: the fastest of each, measured (tools/bench/README.md has the figures).
// splice(2) into a socket whose peer is gone raises SIGPIPE (it has no MSG_NOSIGNAL): the
// relay's process must ignore it (relay.h).
// Runs in: worker.
#include "relay/connection.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <new>
#include <utility>

namespace cocoon::relay {
namespace {

// Calls one direction may make per event (4 MiB with 256 KiB buffers) before the other
// connections get their turn: a fast stream cannot starve the rest of the loop.
constexpr int kCallBudget = 16;

}  // namespace

// limit_upload's count: the direction ends (quietly) when its allowance is read.
inline void Connection::take_allowance(Direction& dir, size_t n)
{
    if (!dir.limited)
        return;
    dir.left -= static_cast<uint32_t>(std::min<size_t>(dir.left, n));
    if (dir.left == 0)
        dir.eof = true;
}

// The most the next read from the source may take: `room`, or less under limit_upload.
inline size_t Connection::allowance(const Direction& dir, size_t room)
{
    return dir.limited ? std::min<size_t>(room, dir.left) : room;
}

Connection::Connection(UniqueFd tcp, UniqueFd unix_socket, uint32_t listener) : m_listener(listener)
{
    m_end[index(Side::Tcp)].fd = std::move(tcp);
    m_end[index(Side::Unix)].fd = std::move(unix_socket);
}

void Connection::limit_upload(uint32_t bytes)
{
    Direction& up = m_dir[index(Side::Tcp)];
    up.limited = true;
    up.left = bytes;
    if (bytes == 0)
        up.eof = true;
}

Outcome Connection::on_event(Side side, uint32_t events, const Pumps& pumps)
{
    Endpoint& end = m_end[index(side)];
    if (events & EPOLLERR) {
        // A reset (TCP RST, or a Unix peer that closed with bytes unread) is passed on at once,
        // even if bytes wait in the other direction: a reset drops them anyway.
        int err = 0;
        socklen_t len = sizeof err;
        if (::getsockopt(end.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0)
            return Outcome::Reset;
    }
    // HUP and ERR make the next call return EOF or the error, so both count as ready.
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        end.hung_up = true;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        end.readable = true;
    if (events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
        end.writable = true;

    Direction& up = m_dir[index(Side::Tcp)];
    Direction& down = m_dir[index(Side::Unix)];
    Endpoint& tcp = m_end[index(Side::Tcp)];
    Endpoint& unix_end = m_end[index(Side::Unix)];
    Status up_status = pumps.splice_upload ? splice(up, tcp, unix_end, down.shut, pumps.pipes)
                                           : copy(up, tcp, unix_end, down.shut, pumps.buffers);
    if (up_status == Status::Reset)
        return Outcome::Reset;
    Status down_status = copy(down, unix_end, tcp, up.shut, pumps.buffers);
    if (down_status == Status::Reset)
        return Outcome::Reset;
    if (up.shut && down.shut)
        return Outcome::Done;
    if (up_status == Status::Busy || down_status == Status::Busy)
        return Outcome::Busy;
    m_starving = 0;
    if (up_status == Status::Starved)
        m_starving |= pumps.splice_upload ? kNeedsPipe : kNeedsBuffer;
    if (down_status == Status::Starved)
        m_starving |= kNeedsBuffer;
    if (m_starving)
        return Outcome::Starved;
    return Outcome::Open;
}

// Drains the buffer into dst and refills it from src until neither can move or the budget is
// spent. Bytes leave the buffer in the order they came, each exactly once: `head` only grows by
// what send took, `size` only by what recv gave.
Connection::Status Connection::copy(Direction& dir, Endpoint& src, Endpoint& dst, bool other_done, BufferPool& buffers)
{
    const size_t capacity = buffers.buffer_size();
    for (int budget = kCallBudget; budget > 0;) {
        bool moved = false;
        if (dir.size > 0 && dst.writable) {
            --budget;
            ssize_t n = ::send(dst.fd.get(), dir.buffer.get() + dir.head, dir.size, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                dir.head += static_cast<size_t>(n);
                dir.size -= static_cast<size_t>(n);
                dir.delivered += static_cast<uint64_t>(n);
                // Short write: the socket buffer is full, and the kernel will report EPOLLOUT
                // when it has room (it marked the socket SOCK_NOSPACE).
                if (dir.size > 0)
                    dst.writable = false;
                moved = true;
            } else if (n < 0 && errno == EAGAIN) {
                dst.writable = false;  // backpressure: dst's next EPOLLOUT edge resumes this
            } else if (n < 0 && errno == EINTR) {
                moved = true;
            } else {
                return Status::Reset;  // EPIPE, ECONNRESET: the peer is gone
            }
        }
        if (dir.size == 0) {
            dir.head = 0;
            buffers.give(std::exchange(dir.buffer, Buffer()));
        }
        // Backpressure: src is read only into free room of the buffer; a full buffer leaves the
        // bytes in src's socket buffer, and the sender's window closes.
        const size_t room = allowance(dir, dir.buffer ? capacity - dir.head - dir.size : capacity);
        if (!dir.eof && src.readable && room > 0) {
            if (!dir.buffer) {
                try {
                    dir.buffer = buffers.take();
                } catch (const std::bad_alloc&) {
                    return Status::Reset;
                }
                if (!dir.buffer)
                    return Status::Starved;  // src stays readable: the retry reads it
            }
            --budget;
            ssize_t n = ::recv(src.fd.get(), dir.buffer.get() + dir.head + dir.size, room, MSG_DONTWAIT);
            if (n > 0) {
                dir.size += static_cast<size_t>(n);
                take_allowance(dir, static_cast<size_t>(n));
                // Short read: src's queue is empty now, and new bytes will raise a new edge. Not
                // after a hang-up, whose edge may already be spent: read on to the 0.
                if (static_cast<size_t>(n) < room && !src.hung_up)
                    src.readable = false;
                moved = true;
            } else if (n == 0) {
                dir.eof = true;
                moved = true;
            } else if (errno == EAGAIN) {
                src.readable = false;
            } else if (errno == EINTR) {
                moved = true;
            } else {
                return Status::Reset;  // ECONNRESET and the like
            }
            if (dir.size == 0)
                buffers.give(std::exchange(dir.buffer, Buffer()));
        }
        if (!pass_eof(dir, dst, other_done))
            return Status::Reset;
        if (!moved)
            return Status::Idle;
    }
    return Status::Busy;
}

// The same through a pipe: splice(2) src -> pipe -> dst. `size` counts the bytes in the pipe.
Connection::Status Connection::splice(Direction& dir, Endpoint& src, Endpoint& dst, bool other_done, PipePool& pipes)
{
    constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    for (int budget = kCallBudget; budget > 0;) {
        bool moved = false;
        if (dir.size > 0 && dst.writable) {
            --budget;
            ssize_t n = ::splice(dir.pipe.read.get(), nullptr, dst.fd.get(), nullptr, dir.size, kFlags);
            if (n > 0) {
                dir.size -= static_cast<size_t>(n);
                dir.delivered += static_cast<uint64_t>(n);
                if (dir.size > 0)
                    dst.writable = false;
                moved = true;
            } else if (n < 0 && errno == EAGAIN) {
                dst.writable = false;
            } else if (n < 0 && errno == EINTR) {
                moved = true;
            } else {
                return Status::Reset;
            }
        }
        if (dir.size == 0)
            pipes.give(std::exchange(dir.pipe, Pipe()));
        // At most pipe_size bytes wait in a pipe. A pipe's own room is counted in slots, each
        // a segment of up to a compound page (32 KiB from TCP), so it can be full with fewer
        // bytes (a 100-byte segment takes a slot) or hold more; the kernel stops at whichever
        // comes first.
        const size_t room = allowance(dir, pipes.pipe_size() - dir.size);
        if (!dir.eof && src.readable && room > 0) {
            if (!dir.pipe) {
                dir.pipe = pipes.take();
                if (!dir.pipe)
                    return errno == 0 ? Status::Starved : Status::Reset;
            }
            --budget;
            ssize_t n = ::splice(src.fd.get(), nullptr, dir.pipe.write.get(), nullptr, room, kFlags);
            if (n > 0) {
                dir.size += static_cast<size_t>(n);
                take_allowance(dir, static_cast<size_t>(n));
                moved = true;
            } else if (n == 0) {
                dir.eof = true;
                moved = true;
            } else if (errno == EAGAIN) {
                // EAGAIN is an empty socket or a full pipe. Only an empty pipe tells them apart;
                // with bytes in it, src is read again once they are out. Not after a hang-up,
                // whose edge may already be spent: read on to the 0.
                if (dir.size == 0 && !src.hung_up)
                    src.readable = false;
            } else if (errno == EINTR) {
                moved = true;
            } else {
                return Status::Reset;
            }
            if (dir.size == 0)
                pipes.give(std::exchange(dir.pipe, Pipe()));
        }
        if (!pass_eof(dir, dst, other_done))
            return Status::Reset;
        if (!moved)
            return Status::Idle;
    }
    return Status::Busy;
}

// Half-close: every byte before the EOF is delivered, then the EOF itself; the other direction
// keeps flowing. When the other is done already, the close that follows sends the same FIN (both
// receive queues are empty: both EOFs were read). False when shutdown failed.
bool Connection::pass_eof(Direction& dir, Endpoint& dst, bool other_done)
{
    if (dir.eof && dir.size == 0 && !dir.shut) {
        if (!other_done && !dir.limited && ::shutdown(dst.fd.get(), SHUT_WR) < 0)
            return false;
        dir.shut = true;
    }
    return true;
}

void Connection::abort()
{
    // SO_LINGER {1, 0}: close() sends an RST, so the client sees ECONNRESET, not a clean end.
    linger hard{1, 0};
    ::setsockopt(m_end[index(Side::Tcp)].fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
}

void Connection::release(const Pumps& pumps)
{
    for (Direction& dir : m_dir) {
        pumps.buffers.give(std::exchange(dir.buffer, Buffer()));
        pumps.pipes.discard(std::exchange(dir.pipe, Pipe()));
        dir.head = dir.size = 0;
    }
}

}  // namespace cocoon::relay
