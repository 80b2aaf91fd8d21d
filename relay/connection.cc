// The copy pumps of one relayed connection. Runs in the monitor.
// Security: the bytes come from the sandbox and are untrusted; the relay copies them between
// two sockets and never parses, logs or acts on them.
//
// Why recv/send through a pooled buffer and not splice(2) through a pipe: measured with
// tools/bench/relay on the 2-vCPU VM this was written on (MiB/s, medians of 5 interleaved runs of
// 2 GiB; the VM is noisy, but the order held in every pair):
//     Unix -> TCP (download):  splice, 64 KiB pipe  820   copy, 64 KiB buffer 1929
//     TCP -> Unix (upload):    splice, 64 KiB pipe 1372   copy, 64 KiB buffer 1020 (256 KiB: 1316)
// and on one CPU: download 798 against 2455, upload 1054 against 904. Splicing Unix socket pages
// into TCP costs more than the copies it saves; upload is a draw within the noise. Copying also
// needs no pipe fds (2 per connection instead of up to 6), is not shrunk by
// fs.pipe-user-pages-soft, and send(MSG_NOSIGNAL) never raises SIGPIPE, which splice does.
// Why 256 KiB buffers: against 64 KiB, download ran at 1489-1799 MiB/s instead of 900-922 and
// the relay spent 510-655 ms of CPU per GiB instead of 780-970 (3 interleaved pairs); upload was
// even. Fewer, larger sends wake the TCP reader less often.
#include "relay/connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cerrno>
#include <new>
#include <utility>

namespace cocoon::relay {
namespace {

// Calls one direction may make per event (4 MiB with 256 KiB buffers) before the other
// connections get their turn: a fast stream cannot starve the rest of the loop.
constexpr int kCallBudget = 16;

} // namespace

Connection::Connection(UniqueFd tcp, UniqueFd unix_socket, uint32_t listener)
    : m_listener(listener)
{
    m_end[index(Side::Tcp)].fd = std::move(tcp);
    m_end[index(Side::Unix)].fd = std::move(unix_socket);
}

Outcome Connection::on_event(Side side, uint32_t events, BufferPool& buffers)
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
    Status up_status = pump(up, tcp, unix_end, down.shut, buffers);
    if (up_status == Status::Reset)
        return Outcome::Reset;
    Status down_status = pump(down, unix_end, tcp, up.shut, buffers);
    if (down_status == Status::Reset)
        return Outcome::Reset;
    if (up.shut && down.shut)
        return Outcome::Done;
    return up_status == Status::Busy || down_status == Status::Busy ? Outcome::Busy : Outcome::Open;
}

// Drains the buffer into dst and refills it from src until neither can move or the budget is
// spent. Bytes leave the buffer in the order they came, each exactly once: `head` only grows by
// what send took, `size` only by what recv gave.
Connection::Status Connection::pump(Direction& dir, Endpoint& src, Endpoint& dst, bool other_done,
                                    BufferPool& buffers)
{
    const size_t capacity = buffers.buffer_size();
    for (int budget = kCallBudget; budget > 0;) {
        bool moved = false;
        if (dir.size > 0 && dst.writable) {
            --budget;
            ssize_t n
                = ::send(dst.fd.get(), dir.buffer.get() + dir.head, dir.size, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0) {
                dir.head += static_cast<size_t>(n);
                dir.size -= static_cast<size_t>(n);
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
            if (dir.buffer)
                buffers.give(std::exchange(dir.buffer, Buffer()));
        }
        // Backpressure: src is read only into free room of the buffer; a full buffer leaves the
        // bytes in src's socket buffer, and the sender's window closes.
        const size_t room = dir.buffer ? capacity - dir.head - dir.size : capacity;
        if (!dir.eof && src.readable && room > 0) {
            if (!dir.buffer) {
                try {
                    dir.buffer = buffers.take();
                } catch (const std::bad_alloc&) {
                    return Status::Reset;
                }
            }
            --budget;
            ssize_t n = ::recv(src.fd.get(), dir.buffer.get() + dir.head + dir.size, room, MSG_DONTWAIT);
            if (n > 0) {
                dir.size += static_cast<size_t>(n);
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
        if (dir.eof && dir.size == 0 && !dir.shut) {
            // Half-close: every byte before the EOF is delivered, then the EOF itself; the other
            // direction keeps flowing. When the other is done already, the close that follows
            // sends the same FIN (both receive queues are empty: both EOFs were read).
            if (!other_done && ::shutdown(dst.fd.get(), SHUT_WR) < 0)
                return Status::Reset;
            dir.shut = true;
        }
        if (!moved)
            return Status::Idle;
    }
    return Status::Busy;
}

void Connection::abort()
{
    // SO_LINGER {1, 0}: close() sends an RST, so the client sees ECONNRESET, not a clean end.
    linger hard{1, 0};
    ::setsockopt(m_end[index(Side::Tcp)].fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
}

} // namespace cocoon::relay
