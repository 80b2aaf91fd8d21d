// The relay worker's options as a blob (relay/worker_config.h): written by the monitor, parsed by
// the worker before it confines itself.
// Runs in: monitor, worker: the monitor writes the worker's options; the exec'd worker parses them.
#include "relay/worker_config.h"

#include <limits>

namespace cocoon::relay {
namespace {

constexpr std::string_view kMagic = "cocoon-relay-worker 1\n";

class Writer {
public:
    void add(std::string_view key, std::string_view value)
    {
        m_out.append(key).append(" ").append(std::to_string(value.size())).append(" ").append(value).append("\n");
    }
    void add(std::string_view key, uint64_t value) { add(key, std::string_view(std::to_string(value))); }
    std::string take() { return std::move(m_out); }

private:
    std::string m_out{kMagic};
};

class Reader {
public:
    explicit Reader(std::string_view blob) : m_rest(blob)
    {
        if (blob.size() > kMaxWorkerConfig)
            throw WorkerConfigError("over " + std::to_string(kMaxWorkerConfig) + " bytes");
        if (m_rest.substr(0, kMagic.size()) != kMagic)
            throw WorkerConfigError("not a relay worker's options (the first line)");
        m_rest.remove_prefix(kMagic.size());
    }

    // Whether the next record is `key` (a list's next item, or an optional field).
    bool next_is(std::string_view key) const
    {
        return m_rest.size() > key.size() && m_rest.substr(0, key.size()) == key && m_rest[key.size()] == ' ';
    }

    std::string_view text(std::string_view key)
    {
        if (!next_is(key))
            throw WorkerConfigError("expected " + std::string(key) + " at byte " + std::to_string(offset()));
        m_rest.remove_prefix(key.size() + 1);
        const size_t space = m_rest.find(' ');
        if (space == std::string_view::npos)
            throw WorkerConfigError(std::string(key) + ": no length");
        const uint64_t length = digits(key, m_rest.substr(0, space), kMaxWorkerConfig);
        m_rest.remove_prefix(space + 1);
        if (length >= m_rest.size() || m_rest[length] != '\n')
            throw WorkerConfigError(std::string(key) + ": its length is not its value's");
        const std::string_view value = m_rest.substr(0, length);
        m_rest.remove_prefix(length + 1);
        return value;
    }

    uint64_t number(std::string_view key, uint64_t max = std::numeric_limits<uint64_t>::max())
    {
        return digits(key, text(key), max);
    }

    bool flag(std::string_view key) { return number(key, 1) == 1; }

    std::chrono::milliseconds millis(std::string_view key)
    {
        // At most a day: every such option is a timeout or an interval of seconds.
        return std::chrono::milliseconds(number(key, 86'400'000));
    }

    void end() const
    {
        if (!m_rest.empty())
            throw WorkerConfigError("bytes after the last field, at byte " + std::to_string(offset()));
    }

private:
    size_t offset() const { return m_size - m_rest.size(); }

    static uint64_t digits(std::string_view key, std::string_view text, uint64_t max)
    {
        if (text.empty() || text.size() > 20)
            throw WorkerConfigError(std::string(key) + ": not a number");
        uint64_t value = 0;
        for (char c : text) {
            if (c < '0' || c > '9')
                throw WorkerConfigError(std::string(key) + ": not a number");
            const uint64_t digit = static_cast<uint64_t>(c - '0');
            if (value > (max - digit) / 10)
                throw WorkerConfigError(std::string(key) + ": out of range");
            value = value * 10 + digit;
        }
        return value;
    }

    std::string_view m_rest;
    size_t m_size = m_rest.size();  // the whole blob's, magic line included
};

}  // namespace

std::string serialize(const WorkerConfig& c)
{
    Writer w;
    const RelayOptions& r = c.relay;
    w.add("buffer-size", r.buffer_size);
    w.add("splice-upload", r.splice_upload ? 1 : 0);
    w.add("pipe-size", r.pipe_size);
    w.add("socket-buffer-size", r.socket_buffer_size);
    w.add("max-in-flight", r.max_in_flight);
    w.add("max-connections", r.max_connections);
    w.add("connect-retry-first-ms", static_cast<uint64_t>(r.connect_retry_first.count()));
    w.add("connect-retry-max-ms", static_cast<uint64_t>(r.connect_retry_max.count()));
    w.add("connect-retry-total-ms", static_cast<uint64_t>(r.connect_retry_total.count()));
    w.add("accept-pause-ms", static_cast<uint64_t>(r.accept_pause.count()));
    w.add("log-interval-ms", static_cast<uint64_t>(r.log_interval.count()));
    w.add("log-prefix", c.log_prefix);
    for (const std::string& name : c.relay_names)
        w.add("relay", name);
    w.add("egress", c.egress ? 1 : 0);
    for (const std::string& pattern : c.egress_allow)
        w.add("allow", pattern);
    w.add("head-timeout-ms", static_cast<uint64_t>(c.head_timeout.count()));
    w.add("max-pending", c.max_pending);
    w.add("egress-log", c.egress_log ? 1 : 0);
    w.add("own-user-namespace", c.own_user_namespace ? 1 : 0);
    w.add("worker-id", c.worker_id);
    w.add("monitor", static_cast<uint64_t>(c.monitor));
    if (!c.test_hook.empty())
        w.add("test-hook", c.test_hook);
    return w.take();
}

WorkerConfig parse_worker_config(std::string_view blob)
{
    Reader in(blob);
    WorkerConfig c;
    RelayOptions& r = c.relay;
    // Sizes: at most 1 GiB each (the relay's own bounds are far below).
    constexpr uint64_t kGiB = uint64_t{1} << 30;
    r.buffer_size = in.number("buffer-size", kGiB);
    r.splice_upload = in.flag("splice-upload");
    r.pipe_size = in.number("pipe-size", kGiB);
    r.socket_buffer_size = in.number("socket-buffer-size", kGiB);
    r.max_in_flight = in.number("max-in-flight", uint64_t{1} << 40);
    r.max_connections = in.number("max-connections", uint64_t{1} << 31);
    r.connect_retry_first = in.millis("connect-retry-first-ms");
    r.connect_retry_max = in.millis("connect-retry-max-ms");
    r.connect_retry_total = in.millis("connect-retry-total-ms");
    r.accept_pause = in.millis("accept-pause-ms");
    r.log_interval = in.millis("log-interval-ms");
    c.log_prefix = in.text("log-prefix");
    while (in.next_is("relay"))
        c.relay_names.emplace_back(in.text("relay"));
    c.egress = in.flag("egress");
    while (in.next_is("allow"))
        c.egress_allow.emplace_back(in.text("allow"));
    if (!c.egress && !c.egress_allow.empty())
        throw WorkerConfigError("allow: without egress");
    c.head_timeout = in.millis("head-timeout-ms");
    c.max_pending = in.number("max-pending", uint64_t{1} << 31);
    c.egress_log = in.flag("egress-log");
    if (!c.egress && c.egress_log)
        throw WorkerConfigError("egress-log: without egress");
    c.own_user_namespace = in.flag("own-user-namespace");
    c.worker_id = static_cast<uint32_t>(in.number("worker-id", kWorkerIdBase + (uint64_t{1} << 22)));
    // Never root, nor an id below the base: the worker's own namespace has the caller's as 0.
    if (c.own_user_namespace ? c.worker_id != 0 : c.worker_id < kWorkerIdBase)
        throw WorkerConfigError("worker-id: " + std::to_string(c.worker_id) + " for " +
                                (c.own_user_namespace ? "a worker in a user namespace of its own" : "a root caller's"));
    // pid_max is at most 2^22.
    c.monitor = static_cast<pid_t>(in.number("monitor", uint64_t{1} << 22));
    if (in.next_is("test-hook"))
        c.test_hook = in.text("test-hook");
    in.end();
    return c;
}

}  // namespace cocoon::relay
