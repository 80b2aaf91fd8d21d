// One relayed connection: a TCP socket accepted in the sandbox's network namespace, its Unix
// socket to the host proxy, and the pumps between them.
// Runs in: worker.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/unique_fd.h"
#include "relay/buffer_pool.h"

namespace cocoon::relay {

enum class Side : uint8_t { Tcp = 0, Unix = 1 };

// What the relay does with a connection after handling an event.
enum class Outcome {
    Open,  // waiting for the next readiness edge
    Busy,  // a pump used its budget with work left: ask epoll to report the fds again
    Starved,  // a direction has bytes to read but every buffer or pipe is lent: see starving()
    Done,  // both directions delivered their EOF: close both sockets
    Reset,  // a reset or an error on either side: abort both
};

// How the two directions move bytes, and where they borrow what they move them through.
struct Pumps {
    BufferPool& buffers;
    PipePool& pipes;
    bool splice_upload;  // TCP -> Unix through a pipe; otherwise through a buffer
};

// Memory bound: the object (about 120 bytes) plus, per direction, at most one buffer or pipe
// from the pools, held only while bytes are in it. Idle connections hold two socket fds and
// nothing else. A direction reads its source only while its buffer or pipe has room, so a slow
// reader leaves the bytes in the writer's socket buffers, which the kernel bounds (the relay fixes
// its TCP socket's at RelayOptions::socket_buffer_size, its Unix socket's send buffer at twice
// buffer_size) and TCP flow control pushes back.
class Connection {
public:
    Connection(UniqueFd tcp, UniqueFd unix_socket, uint32_t listener);

    int fd(Side side) const { return m_end[index(side)].fd.get(); }
    uint32_t listener() const { return m_listener; }

    // Records what an epoll event says about one side (none: events == 0), then moves bytes
    // both ways.
    Outcome on_event(Side side, uint32_t events, const Pumps& pumps);

    // After Outcome::Starved: what it waits for, kNeedsBuffer and/or kNeedsPipe.
    static constexpr unsigned kNeedsBuffer = 1, kNeedsPipe = 2;
    unsigned starving() const { return m_starving; }

    // Makes the coming close abortive: the TCP client gets an RST instead of a FIN. The Unix
    // peer sees its socket closed (EOF, or ECONNRESET if the relay left its bytes unread).
    void abort();

    // Returns what it borrowed to the pools; call before destroying it. Bytes in flight are lost.
    void release(const Pumps& pumps);

    // At most `bytes` more are read from the Tcp side (the client) and passed on; then that
    // direction is done without a shutdown (the origin is not told the client finished: some
    // servers end the exchange on it), and what the client sends later stays unread in its socket
    // until the connection closes (with an RST if anything was left).
    void limit_upload(uint32_t bytes);

    // Bytes delivered from `source` to the other side so far.
    uint64_t delivered(Side source) const { return m_dir[index(source)].delivered; }

private:
    struct Endpoint {
        UniqueFd fd;
        // Edge-triggered readiness: set by an event, cleared when a call shows the socket has
        // nothing more to give (EAGAIN, a short read) or no more room (EAGAIN, a short write).
        bool readable = false;
        bool writable = false;
        // The peer shut down or the socket failed: reads go on until they return 0 or the error.
        bool hung_up = false;
    };
    // Bytes from one socket to the other, waiting for the destination: buffer[head, head + size),
    // or `size` bytes in the pipe. `eof`: the source sent its FIN; `shut`: the EOF was passed on
    // with shutdown(SHUT_WR).
    struct Direction {
        Buffer buffer;
        Pipe pipe;
        size_t head = 0;
        size_t size = 0;
        bool eof = false;
        bool shut = false;
        // limit_upload: `left` more bytes may be read from the source, and its end is passed on
        // without a shutdown. (32 bits, in what was padding: the object stays 120 bytes.)
        bool limited = false;
        uint32_t left = 0;
        uint64_t delivered = 0;  // bytes the destination took, for --egress-log
    };
    enum class Status { Idle, Busy, Starved, Reset };

    static constexpr size_t index(Side side) { return static_cast<size_t>(side); }
    Status copy(Direction& dir, Endpoint& src, Endpoint& dst, bool other_done, BufferPool& buffers);
    Status splice(Direction& dir, Endpoint& src, Endpoint& dst, bool other_done, PipePool& pipes);
    static void take_allowance(Direction& dir, size_t n);
    static size_t allowance(const Direction& dir, size_t room);
    static bool pass_eof(Direction& dir, Endpoint& dst, bool other_done);

    Endpoint m_end[2];
    Direction m_dir[2];  // indexed by the source side: m_dir[Tcp] carries tcp -> unix
    uint32_t m_listener;
    unsigned m_starving = 0;
};

}  // namespace cocoon::relay
