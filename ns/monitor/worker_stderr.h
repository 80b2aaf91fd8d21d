// The relay worker's stderr, as the monitor forwards it to cocoon's (ns/monitor/relay_worker.h): the worker
// holds no file description of the caller's, so its stderr is a pipe whose other end the monitor
// reads in its loop.
//
// Security: a worker taken over writes what it likes, as fast as it likes. The monitor reads at
// most kReadPerWake bytes a wake (non-blocking: it never waits for the worker), forwards whole
// lines only (a line past kMaxLine is cut there and says so), turns control bytes into '?' (no
// escape sequence reaches the caller's terminal through it), and forwards at most kBurst lines,
// then kLinesPerSecond: the rest are dropped and counted, and one line says how many at the end.
// The worker's end is non-blocking too: a monitor that falls behind costs the worker the lines
// the pipe does not hold (write fails with EAGAIN, and the worker goes on), never a stall of the
// relay; the worker writes each line in one write(2), whole below PIPE_BUF.
// Runs in: monitor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/rate_bound.h"

namespace cocoon::ns {

class StderrLines {
public:
    static constexpr size_t kReadPerWake = size_t{16} * 1024;
    static constexpr size_t kMaxLine = 4096;
    static constexpr double kLinesPerSecond = 50;
    static constexpr double kBurst = 500;

    explicit StderrLines(std::string log_prefix) : m_prefix(std::move(log_prefix)) {}

    // Takes bytes the worker wrote; returns the whole lines to forward now (each ending in '\n').
    std::string feed(std::string_view bytes, RateBound::Clock::time_point now);
    // The worker is gone: its last line if it had no newline, and the count of lines dropped.
    std::string finish(RateBound::Clock::time_point now);
    uint64_t dropped() const { return m_dropped; }

    // The monitor's side: reads what `fd` (non-blocking) holds, at most `budget` bytes, and
    // writes the lines to stderr. False once the pipe is at its end (every writer gone).
    bool forward(int fd, size_t budget = kReadPerWake);

private:
    std::string line_out(RateBound::Clock::time_point now);

    std::string m_prefix;
    std::string m_line;  // the line being read, at most kMaxLine bytes
    bool m_cut = false;  // it was longer: the rest, up to its newline, is skipped
    uint64_t m_dropped = 0;
    RateBound m_rate{kLinesPerSecond, kBurst};
};

}  // namespace cocoon::ns
