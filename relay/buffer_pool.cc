// The buffers and pipes the relay moves bytes through.
// Runs in: worker.
#include "relay/buffer_pool.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace cocoon::relay {

Buffer BufferPool::take()
{
    if (m_lent >= m_max_lent)
        return {};
    Buffer buffer;
    if (m_spare.empty()) {
        buffer = std::make_unique_for_overwrite<char[]>(m_buffer_size);
    } else {
        buffer = std::move(m_spare.back());
        m_spare.pop_back();
    }
    ++m_lent;
    return buffer;
}

void BufferPool::give(Buffer buffer)
{
    if (!buffer)
        return;
    --m_lent;
    if (m_spare.size() < m_max_spare)
        m_spare.push_back(std::move(buffer));
}

Pipe PipePool::take()
{
    if (m_lent >= m_max_lent) {
        errno = 0;
        return {};
    }
    Pipe pipe;
    if (m_spare.empty()) {
        int fds[2];
        if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
            return {};
        pipe = {UniqueFd(fds[0]), UniqueFd(fds[1])};
        ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(m_pipe_size));
    } else {
        pipe = std::move(m_spare.back());
        m_spare.pop_back();
    }
    ++m_lent;
    return pipe;
}

void PipePool::give(Pipe pipe)
{
    if (!pipe)
        return;
    --m_lent;
    if (m_spare.size() < m_max_spare)
        m_spare.push_back(std::move(pipe));
}

void PipePool::discard(Pipe pipe)
{
    if (pipe)
        --m_lent;
}

}  // namespace cocoon::relay
