// --egress-log: the JSON text of its lines, the per-host tally behind the summary, and the
// writer that never blocks the relay. Runs in the confined relay worker, which holds no right.
// Runs in: worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/unique_fd.h"

namespace cocoon::relay {

// A JSON string literal of `text`, quotes included. Every byte stands for itself, read as
// Latin-1: '"', '\\' and bytes below 0x20 and 0x7f are escaped, and each byte of 0x80 and above
// is written \u00XX. So the line is valid UTF-8 JSON whatever the sandbox sent, and the bytes it
// sent are recovered exactly by encoding the decoded string as Latin-1 (valid UTF-8 from the
// client shows as its bytes, "\u00c3\u00a9" for "é": no sequence can pass for another).
std::string json_string(std::string_view text);

// What became of one connection attempt: a log line's "result", and the summary's counts.
//   Allowed      relayed (its line is written when it closes)
//   Refused      the request was malformed or late, or the allowlist, the address rules (an
//                internal or own address) or a bound (too many connections) said no
//   Unresolved   the name did not resolve: an error, no address, or none within the deadline
//   Unreachable  allowed, but every connect failed, timed out, or the origin closed before the
//                request was passed on
enum class EgressResult { Allowed, Refused, Unresolved, Unreachable };

// "allowed", "refused", "unresolved" or "unreachable".
std::string_view result_name(EgressResult result);

// One line of the log, as it is written.
struct EgressLine {
    std::string_view time;  // when the outcome was known (written now), UTC, ISO 8601 with ms
    std::string_view host;
    uint16_t port = 0;
    // How the client came: empty for the proxy, "transparent" (a connection to a synthetic
    // address), "dns" (a name the transparent resolver refused; port 53).
    std::string_view via;
    std::string_view address;  // the one connected or last tried; empty: none
    EgressResult result = EgressResult::Refused;
    std::string_view reason;  // why, unless allowed
    uint64_t up = 0, down = 0;
    int64_t duration_ms = 0;  // from accept to `time`
};

// { "time": ..., "host": ..., "port": N, ["via": ...,] ["address": ...,] "result": ..., "allowed": B,
//   ["reason": ...,] "bytes-up": N, "bytes-down": N, "duration-ms": N }
std::string line_text(const EgressLine& line);

// What the summary says of the attempts that left no line of their own.
struct Unlogged {
    uint64_t dropped = 0;  // lines made that the writer's queue had no room for (EgressLog::dropped)
    // Lines held back: refusals past the rate bound (relay/egress.h), any line past the byte cap.
    uint64_t not_written = 0;
    uint64_t questions_dropped = 0;  // DNS questions never read: past the resolver's rate
};

// What happened per "host:port", for the summary. Security: the sandbox picks the names, so the
// keys are capped: at most kMaxKeys, of which a key first seen not reached (refused, unresolved or
// unreachable) may take kMaxRefusedKeys (a flood of refused names cannot push out the hosts that
// were reached); past the cap the counts go to one "(other)" entry.
class EgressTally {
public:
    struct Counts {
        uint64_t allowed = 0, refused = 0, unresolved = 0, unreachable = 0, up = 0, down = 0;
        uint64_t& of(EgressResult result);
    };
    static constexpr size_t kMaxKeys = 256;
    static constexpr size_t kMaxRefusedKeys = 192;
    static constexpr std::string_view kOther = "(other)";
    // The summary line stops before it passes this many bytes; what does not fit is added to
    // the "(other)" entry, and "omitted" says how many entries that folded in.
    static constexpr size_t kMaxSummary = size_t{64} * 1024;

    // The counts of `key`, made if the cap allows, else the "(other)" counts. Stays valid for
    // the tally's life (std::map). refused: the key is not reached (any result but Allowed).
    Counts& at(const std::string& key, bool refused);
    size_t size() const { return m_keys.size(); }
    // { "summary": [ ... ], "results": { "allowed": A, "refused": R, "unresolved": U,
    // "unreachable": N }, "dropped": D, "not-written": W, "questions-dropped": Q, "omitted": K }:
    // entries with a connection first (in key order), then the ones never reached, then
    // "(other)"; "results" adds up every entry's.
    std::string summary(const Unlogged& unlogged) const;

private:
    std::map<std::string, Counts> m_keys;
    Counts m_other;
};

// Writes lines to the --egress-log fd without ever blocking: what the fd does not take at once
// waits in a queue of at most kMaxQueued bytes, in the order the lines were made; a line that
// does not fit is dropped whole and counted.
//
// The fd is the caller's, and O_NONBLOCK on it would change the file description the caller
// shares. So: a socket is written with send(MSG_DONTWAIT); a pipe, FIFO or character device is
// reopened through /proc/self/fd/N with O_NONBLOCK, a file description of cocoon's own on the
// same pipe (or device); if that open fails (no /proc, or the pipe's owner is another user),
// writes wait for poll's POLLOUT and take at most PIPE_BUF bytes, which a pipe with POLLOUT takes
// whole without blocking. A regular file is written as it is (the kernel does not block writes to
// one; a file on a network or FUSE file system is the caller's choice).
//
// Security: a run writes at most max_bytes (kMaxBytes) to the fd, the summary included: the
// lines stop where what is left would not hold the largest summary; then one line says so
// (kCappedLine), and every later line is counted (not_written), not written.
class EgressLog {
public:
    static constexpr size_t kMaxQueued = size_t{1} << 20;
    static constexpr size_t kMaxBytes = size_t{64} << 20;
    // What the lines leave for the cap's line and the summary.
    static constexpr size_t kSummaryRoom = EgressTally::kMaxSummary + 1024;

    EgressLog() = default;
    explicit EgressLog(UniqueFd fd, size_t max_bytes = kMaxBytes);
    explicit operator bool() const { return static_cast<bool>(m_fd); }
    // The fd to watch for POLLOUT while pending(), or -1 when the log cannot be polled (a
    // regular file: it never waits).
    int poll_fd() const { return m_pollable ? m_fd.get() : -1; }
    bool pending() const { return !m_queue.empty(); }
    uint64_t dropped() const { return m_dropped; }
    uint64_t not_written() const { return m_not_written; }
    // The cap's line, written once, in place of the first line past the cap.
    std::string capped_line() const;

    // Queues `line` and a newline, then writes what the fd takes; past the cap, counts it.
    void add(const std::string& line);
    // The summary, the last line: within the room the cap leaves for it.
    void add_summary(const std::string& line);
    // Writes what the fd takes now.
    void flush();
    // Waits at most `ms` for the queue to drain, then drops what is left (the end of the run).
    void drain(int ms);

private:
    enum class Mode { Write, Send, PollPipe };
    UniqueFd m_fd;
    Mode m_mode = Mode::Write;
    bool m_pollable = false;
    bool m_broken = false;  // EPIPE or another error: the reader is gone
    std::string m_queue;
    size_t m_head = 0;  // m_queue[m_head, end) is still to write
    uint64_t m_dropped = 0;
    size_t m_max_bytes = kMaxBytes;
    size_t m_bytes = 0;  // queued so far, over the run
    bool m_capped = false;
    uint64_t m_not_written = 0;

    void queue(const std::string& line);
};

}  // namespace cocoon::relay
