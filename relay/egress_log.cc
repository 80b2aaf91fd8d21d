// --egress-log's JSON text, tally and non-blocking writer (egress_log.h). Runs in the confined relay worker.
// Runs in: worker.
#include "relay/egress_log.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <vector>

namespace cocoon::relay {

std::string json_string(std::string_view text)
{
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (byte < 0x20 || byte >= 0x7f) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(byte));
            out += esc;
        } else {
            out += c;
        }
    }
    out += '"';
    return out;
}

std::string_view result_name(EgressResult result)
{
    switch (result) {
    case EgressResult::Allowed:
        return "allowed";
    case EgressResult::Refused:
        return "refused";
    case EgressResult::Unresolved:
        return "unresolved";
    case EgressResult::Unreachable:
        return "unreachable";
    }
    return "refused";
}

std::string line_text(const EgressLine& line)
{
    const bool allowed = line.result == EgressResult::Allowed;
    std::string text = "{ \"time\": " + json_string(line.time) + ", \"host\": " + json_string(line.host) +
                       ", \"port\": " + std::to_string(line.port);
    if (!line.via.empty())
        text += ", \"via\": " + json_string(line.via);
    if (!line.address.empty())
        text += ", \"address\": " + json_string(line.address);
    text += ", \"result\": \"";
    text += result_name(line.result);
    text += std::string("\", \"allowed\": ") + (allowed ? "true" : "false");
    if (!allowed)
        text += ", \"reason\": " + json_string(line.reason);
    text += ", \"bytes-up\": " + std::to_string(line.up) + ", \"bytes-down\": " + std::to_string(line.down) +
            ", \"duration-ms\": " + std::to_string(line.duration_ms) + " }";
    return text;
}

uint64_t& EgressTally::Counts::of(EgressResult result)
{
    switch (result) {
    case EgressResult::Allowed:
        return allowed;
    case EgressResult::Refused:
        return refused;
    case EgressResult::Unresolved:
        return unresolved;
    case EgressResult::Unreachable:
        return unreachable;
    }
    return refused;
}

EgressTally::Counts& EgressTally::at(const std::string& key, bool refused)
{
    auto it = m_keys.find(key);
    if (it != m_keys.end())
        return it->second;
    if (m_keys.size() >= (refused ? kMaxRefusedKeys : kMaxKeys))
        return m_other;
    return m_keys[key];
}

namespace {

std::string entry_text(std::string_view key, const EgressTally::Counts& t)
{
    const size_t colon = key.rfind(':');
    const std::string_view host = key.substr(0, colon);
    const std::string port = colon == std::string_view::npos ? "0" : std::string(key.substr(colon + 1));
    return "{ \"host\": " + json_string(host) + ", \"port\": " + port +
           ", \"connections\": " + std::to_string(t.allowed) + ", \"refused\": " + std::to_string(t.refused) +
           ", \"unresolved\": " + std::to_string(t.unresolved) + ", \"unreachable\": " + std::to_string(t.unreachable) +
           ", \"bytes-up\": " + std::to_string(t.up) + ", \"bytes-down\": " + std::to_string(t.down) + " }";
}

void add_to(EgressTally::Counts& sum, const EgressTally::Counts& t)
{
    sum.allowed += t.allowed;
    sum.refused += t.refused;
    sum.unresolved += t.unresolved;
    sum.unreachable += t.unreachable;
    sum.up += t.up;
    sum.down += t.down;
}

}  // namespace

std::string EgressTally::summary(const Unlogged& unlogged) const
{
    // The hosts that were reached first: they are what an orchestrator reads the summary for.
    std::vector<const std::pair<const std::string, Counts>*> order;
    order.reserve(m_keys.size());
    for (const auto& each : m_keys)
        if (each.second.allowed > 0)
            order.push_back(&each);
    for (const auto& each : m_keys)
        if (each.second.allowed == 0)
            order.push_back(&each);
    // Room for the "(other)" entry (at most about 260 bytes) and the tail (about 330).
    constexpr size_t kReserve = 640;
    std::string line = "{ \"summary\": [";
    bool first = true;
    Counts other = m_other;
    Counts total = m_other;
    size_t omitted = 0;
    for (const auto* each : order) {
        add_to(total, each->second);
        std::string text = entry_text(each->first, each->second);
        if (line.size() + text.size() + kReserve > kMaxSummary) {
            add_to(other, each->second);
            ++omitted;
            continue;
        }
        line += (first ? " " : ", ") + text;
        first = false;
    }
    if (other.allowed + other.refused + other.unresolved + other.unreachable > 0) {
        line += (first ? " " : ", ") + entry_text(kOther, other);
        first = false;
    }
    line += first ? "]" : " ]";
    line += ", \"results\": { \"allowed\": " + std::to_string(total.allowed) +
            ", \"refused\": " + std::to_string(total.refused) +
            ", \"unresolved\": " + std::to_string(total.unresolved) +
            ", \"unreachable\": " + std::to_string(total.unreachable) + " }";
    line += ", \"dropped\": " + std::to_string(unlogged.dropped) +
            ", \"not-written\": " + std::to_string(unlogged.not_written) +
            ", \"questions-dropped\": " + std::to_string(unlogged.questions_dropped) +
            ", \"omitted\": " + std::to_string(omitted) + " }";
    return line;
}

EgressLog::EgressLog(UniqueFd fd, size_t max_bytes) : m_fd(std::move(fd)), m_max_bytes(max_bytes)
{
    struct stat st {};
    if (!m_fd || ::fstat(m_fd.get(), &st) < 0)
        return;
    if (S_ISSOCK(st.st_mode)) {
        m_mode = Mode::Send;
        m_pollable = true;
    } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
        // A file description of cocoon's own: O_NONBLOCK on it leaves the caller's alone.
        // O_NOCTTY: a terminal given as the log must not become cocoon's controlling terminal.
        const std::string path = "/proc/self/fd/" + std::to_string(m_fd.get());
        UniqueFd own(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
        if (own) {
            m_fd = std::move(own);
            m_mode = Mode::Write;
        } else {
            m_mode = S_ISFIFO(st.st_mode) ? Mode::PollPipe : Mode::Write;
        }
        m_pollable = true;
    }
}

std::string EgressLog::capped_line() const
{
    return "{ \"capped-at-bytes\": " + std::to_string(m_max_bytes) +
           ", \"note\": \"the log holds no more: later lines are counted in the summary's not-written\" }";
}

void EgressLog::add(const std::string& line)
{
    if (!m_capped && m_bytes + line.size() + 1 + kSummaryRoom > m_max_bytes) {
        m_capped = true;
        queue(capped_line());
    }
    if (m_capped) {
        ++m_not_written;
        return;
    }
    queue(line);
}

void EgressLog::add_summary(const std::string& line)
{
    // EgressTally::summary stays within kMaxSummary: kSummaryRoom holds it and the cap's line.
    queue(line);
}

void EgressLog::queue(const std::string& line)
{
    if (!m_fd || m_broken || m_queue.size() - m_head + line.size() + 1 > kMaxQueued) {
        ++m_dropped;
        return;
    }
    if (m_head > 0 && m_head >= m_queue.size() / 2) {
        m_queue.erase(0, m_head);
        m_head = 0;
    }
    m_queue.append(line).append("\n");
    m_bytes += line.size() + 1;
    flush();
}

void EgressLog::flush()
{
    while (m_head < m_queue.size() && !m_broken) {
        const char* data = m_queue.data() + m_head;
        size_t size = m_queue.size() - m_head;
        ssize_t n = 0;
        if (m_mode == Mode::Send) {
            n = ::send(m_fd.get(), data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
        } else {
            if (m_mode == Mode::PollPipe) {
                pollfd pfd{m_fd.get(), POLLOUT, 0};
                if (::poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLOUT)) {
                    if (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))
                        m_broken = true;
                    break;
                }
                size = std::min<size_t>(size, PIPE_BUF);
            }
            n = ::write(m_fd.get(), data, size);
        }
        if (n > 0) {
            m_head += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        m_broken = true;  // the log's reader is gone: the run goes on without it
    }
    if (m_head == m_queue.size() || m_broken) {
        if (m_broken && m_head < m_queue.size())
            m_dropped +=
                static_cast<uint64_t>(std::count(m_queue.begin() + static_cast<long>(m_head), m_queue.end(), '\n'));
        m_queue.clear();
        m_head = 0;
    }
}

void EgressLog::drain(int ms)
{
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    flush();
    while (pending()) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0)
            break;
        pollfd pfd{m_fd.get(), POLLOUT, 0};
        if (::poll(&pfd, 1, static_cast<int>(left)) < 0 && errno != EINTR)
            break;
        flush();
    }
    m_queue.clear();
    m_head = 0;
}

}  // namespace cocoon::relay
