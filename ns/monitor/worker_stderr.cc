// The relay worker's stderr, forwarded by the monitor (ns/monitor/worker_stderr.h).
// Runs in: monitor.
#include "ns/monitor/worker_stderr.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace cocoon::ns {

std::string StderrLines::line_out(RateBound::Clock::time_point now)
{
    std::string out;
    if (m_rate.take(now))
        out = m_line + (m_cut ? " [cut]\n" : "\n");
    else
        ++m_dropped;
    m_line.clear();
    m_cut = false;
    return out;
}

std::string StderrLines::feed(std::string_view bytes, RateBound::Clock::time_point now)
{
    std::string out;
    for (char c : bytes) {
        if (c == '\n') {
            out += line_out(now);
            continue;
        }
        if (m_line.size() >= kMaxLine) {
            m_cut = true;
            continue;
        }
        const auto byte = static_cast<unsigned char>(c);
        m_line += (byte < 0x20 && c != '\t') || byte == 0x7f ? '?' : c;
    }
    return out;
}

std::string StderrLines::finish(RateBound::Clock::time_point now)
{
    std::string out;
    if (!m_line.empty() || m_cut)
        out = line_out(now);
    if (m_dropped > 0)
        out += m_prefix + "cocoon: the relay worker wrote " + std::to_string(m_dropped) +
               " lines to stderr past the rate cocoon forwards (" + std::to_string(static_cast<int>(kBurst)) +
               ", then " + std::to_string(static_cast<int>(kLinesPerSecond)) + " a second): dropped\n";
    m_dropped = 0;
    return out;
}

bool StderrLines::forward(int fd, size_t budget)
{
    std::string out;
    bool open = true;
    char buf[4096];
    for (size_t taken = 0; taken < budget;) {
        const ssize_t n = ::read(fd, buf, std::min(sizeof buf, budget - taken));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            open = n < 0 && errno == EAGAIN;
            break;
        }
        taken += static_cast<size_t>(n);
        out += feed(std::string_view(buf, static_cast<size_t>(n)), RateBound::Clock::now());
    }
    // cocoon's stderr is the caller's: written as the monitor's own lines are, a failure ignored.
    for (size_t done = 0; done < out.size();) {
        const ssize_t n = ::write(STDERR_FILENO, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += static_cast<size_t>(n);
    }
    return open;
}

}  // namespace cocoon::ns
