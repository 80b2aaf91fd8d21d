// The buffers the relay copies through, kept for reuse while empty. Runs in the monitor.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace cocoon::relay {

using Buffer = std::unique_ptr<char[]>;

// A direction of a connection holds a buffer only while bytes are in it; an empty buffer goes
// back here, so idle connections hold none and a busy relay does not reallocate.
class BufferPool {
public:
    BufferPool(size_t buffer_size, size_t max_spare) : m_buffer_size(buffer_size), m_max_spare(max_spare) {}

    size_t buffer_size() const { return m_buffer_size; }
    // A spare buffer or a new one (std::bad_alloc when memory is out).
    Buffer take();
    // Keeps an empty buffer for reuse, or frees it when the pool is full.
    void give(Buffer buffer);
    size_t spare() const { return m_spare.size(); }
    void clear() { m_spare.clear(); }

private:
    size_t m_buffer_size;
    size_t m_max_spare;
    std::vector<Buffer> m_spare;
};

} // namespace cocoon::relay
