// UniqueFd: the one owner of a file descriptor. Used by every process of cocoon.
// Runs in: caller, monitor, setup, pid1, pid2, worker: every process of cocoon owns fds with it.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace cocoon {

// Move-only. close() is never retried on EINTR (on Linux the fd is gone
// either way) and the caller's errno survives the destructor.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : m_fd(fd) {}
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    UniqueFd(UniqueFd&& other) noexcept : m_fd(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept
    {
        if (this != &other)
            reset(other.release());
        return *this;
    }
    ~UniqueFd() { reset(); }

    int get() const { return m_fd; }
    bool valid() const { return m_fd >= 0; }
    explicit operator bool() const { return valid(); }

    int release() { return std::exchange(m_fd, -1); }
    void reset(int fd = -1)
    {
        if (m_fd >= 0) {
            int saved = errno;
            ::close(m_fd);
            errno = saved;
        }
        m_fd = fd;
    }

private:
    int m_fd = -1;
};

}  // namespace cocoon
