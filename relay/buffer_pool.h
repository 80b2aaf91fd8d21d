// The buffers and pipes the relay moves bytes through: lent to a direction of a connection only
// while bytes are in it, kept for reuse while empty, and capped in number.
// Runs in: worker.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::relay {

using Buffer = std::unique_ptr<char[]>;

// Buffers of one size. At most max_lent are out at once: the relay's memory for bytes in flight
// does not grow with the number of connections.
class BufferPool {
public:
    BufferPool(size_t buffer_size, size_t max_lent, size_t max_spare)
        : m_buffer_size(buffer_size), m_max_lent(max_lent), m_max_spare(max_spare)
    {
    }

    size_t buffer_size() const { return m_buffer_size; }
    // A spare buffer or a new one; an empty Buffer when max_lent are out (std::bad_alloc when
    // memory is out).
    Buffer take();
    // Takes back a buffer from take(); keeps it for reuse unless max_spare are kept already.
    void give(Buffer buffer);
    bool can_lend() const { return m_lent < m_max_lent; }
    size_t lent() const { return m_lent; }
    size_t spare() const { return m_spare.size(); }
    void clear() { m_spare.clear(); }

private:
    size_t m_buffer_size;
    size_t m_max_lent;
    size_t m_max_spare;
    size_t m_lent = 0;
    std::vector<Buffer> m_spare;
};

// A pipe to splice through: bytes go from a socket into it and out to the other socket without
// passing through the relay's memory.
struct Pipe {
    UniqueFd read;
    UniqueFd write;
    explicit operator bool() const { return static_cast<bool>(read); }
};

// Like BufferPool, for pipes. A pipe holds up to pipe_size bytes of page references and costs
// two fds while it exists.
class PipePool {
public:
    PipePool(size_t pipe_size, size_t max_lent, size_t max_spare)
        : m_pipe_size(pipe_size), m_max_lent(max_lent), m_max_spare(max_spare)
    {
    }

    size_t pipe_size() const { return m_pipe_size; }
    // A spare pipe or a new one, asked to hold pipe_size bytes (fs.pipe-user-pages-soft may
    // leave it smaller: then it only takes more calls per megabyte). An empty Pipe when max_lent
    // are out (errno 0) or pipe2 failed (errno says why).
    Pipe take();
    // Takes back an empty pipe from take(); keeps it for reuse unless max_spare are kept already.
    void give(Pipe pipe);
    // Takes back a pipe from take() that may hold bytes, and closes it.
    void discard(Pipe pipe);
    bool can_lend() const { return m_lent < m_max_lent; }
    size_t lent() const { return m_lent; }
    size_t spare() const { return m_spare.size(); }
    void clear() { m_spare.clear(); }

private:
    size_t m_pipe_size;
    size_t m_max_lent;
    size_t m_max_spare;
    size_t m_lent = 0;
    std::vector<Pipe> m_spare;
};

}  // namespace cocoon::relay
