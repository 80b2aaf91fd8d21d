// The buffers the relay copies through, kept for reuse while empty. Runs in the monitor.
#include "relay/buffer_pool.h"

#include <utility>

namespace cocoon::relay {

Buffer BufferPool::take()
{
    if (m_spare.empty())
        return std::make_unique_for_overwrite<char[]>(m_buffer_size);
    Buffer buffer = std::move(m_spare.back());
    m_spare.pop_back();
    return buffer;
}

void BufferPool::give(Buffer buffer)
{
    if (m_spare.size() < m_max_spare)
        m_spare.push_back(std::move(buffer));
}

} // namespace cocoon::relay
