// relay/worker_config.h: the relay worker's options as the monitor writes them and the exec'd
// worker parses them (strictly: anything off is refused whole). ns/monitor/worker_stderr.h: the
// monitor's bounded forwarding of the worker's stderr.
#include "relay/worker_config.h"

#include <gtest/gtest.h>

#include <string>

#include "ns/monitor/worker_stderr.h"

namespace cocoon::relay {
namespace {

WorkerConfig sample()
{
    WorkerConfig c;
    c.relay.buffer_size = 65536;
    c.relay.splice_upload = false;
    c.relay.max_connections = 462;
    c.relay.connect_retry_total = std::chrono::milliseconds(1234);
    c.log_prefix = "<3>";
    c.relay_names = {"/run/a proxy.sock", "/tmp/odd\nname", ""};
    c.egress = true;
    c.egress_allow = {"example.test", "*.example.org:8443", "[::1]:80"};
    c.head_timeout = std::chrono::milliseconds(2500);
    c.max_pending = 7;
    c.egress_log = true;
    c.own_user_namespace = false;
    c.worker_id = 0x70000000 + 4194304;
    c.monitor = 4194304;
    c.test_hook = "rewrite-log:3000:1";
    return c;
}

TEST(WorkerConfig, RoundTrips)
{
    const WorkerConfig c = sample();
    const WorkerConfig back = parse_worker_config(serialize(c));
    EXPECT_EQ(back.relay.buffer_size, c.relay.buffer_size);
    EXPECT_EQ(back.relay.splice_upload, false);
    EXPECT_EQ(back.relay.pipe_size, c.relay.pipe_size);
    EXPECT_EQ(back.relay.socket_buffer_size, c.relay.socket_buffer_size);
    EXPECT_EQ(back.relay.max_in_flight, c.relay.max_in_flight);
    EXPECT_EQ(back.relay.max_connections, 462u);
    EXPECT_EQ(back.relay.connect_retry_first, c.relay.connect_retry_first);
    EXPECT_EQ(back.relay.connect_retry_max, c.relay.connect_retry_max);
    EXPECT_EQ(back.relay.connect_retry_total, std::chrono::milliseconds(1234));
    EXPECT_EQ(back.relay.accept_pause, c.relay.accept_pause);
    EXPECT_EQ(back.relay.log_interval, c.relay.log_interval);
    EXPECT_EQ(back.log_prefix, "<3>");
    EXPECT_EQ(back.relay_names, c.relay_names);
    EXPECT_TRUE(back.egress);
    EXPECT_EQ(back.egress_allow, c.egress_allow);
    EXPECT_EQ(back.head_timeout, std::chrono::milliseconds(2500));
    EXPECT_EQ(back.max_pending, 7u);
    EXPECT_TRUE(back.egress_log);
    EXPECT_FALSE(back.own_user_namespace);
    EXPECT_EQ(back.worker_id, c.worker_id);
    EXPECT_EQ(back.monitor, c.monitor);
    EXPECT_EQ(back.test_hook, c.test_hook);

    WorkerConfig plain;  // no --egress, no hook
    plain.relay_names = {"/s"};
    const WorkerConfig plain_back = parse_worker_config(serialize(plain));
    EXPECT_FALSE(plain_back.egress);
    EXPECT_TRUE(plain_back.egress_allow.empty());
    EXPECT_TRUE(plain_back.test_hook.empty());
    EXPECT_TRUE(plain_back.own_user_namespace);
}

// Each of these is refused whole.
TEST(WorkerConfig, RefusesAnythingMalformed)
{
    const std::string good = serialize(sample());
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string text = good;
        const size_t at = text.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        return text.replace(at, from.size(), to);
    };
    const std::string bad[] = {
        "",
        "cocoon-relay-worker 2\n" + good.substr(good.find('\n') + 1),  // another version
        good.substr(0, good.size() - 1),  // the last newline cut
        good + "x",  // a byte after the end
        good + good.substr(good.find('\n') + 1),  // every field twice
        replaced("buffer-size 5 65536", "buffer-size 6 +65536"),  // a sign
        replaced("buffer-size 5 65536", "buffer-size 5 6553x"),
        replaced("buffer-size 5 65536", "buffer-size 4 65536"),  // a length that is not the value's
        replaced("buffer-size 5 65536", "buffer-size 99999999 65536"),
        replaced("buffer-size 5 65536", "buffer-size 10 2000000000"),  // over 1 GiB
        replaced("egress 1 1", "egress 1 2"),  // a flag is 0 or 1
        replaced("monitor 7 4194304", "monitor 7 4194305"),  // over pid_max's bound
        replaced("worker-id 10 1883242496", "worker-id 10 4294967295"),  // (uid_t)-1
        replaced("worker-id 10 1883242496", "worker-id 1 0"),  // root, for a root caller
        replaced("worker-id 10 1883242496", "worker-id 5 65534"),  // below the base
        replaced("own-user-namespace 1 0", "own-user-namespace 1 1"),  // an id in its own namespace
        replaced("splice-upload 1 0\npipe-size", "pipe-size"),  // a field missing
        replaced("log-prefix 3 <3>\n", ""),
        replaced("egress 1 1", "egress 1 0"),  // allow rules and a log without --egress
        replaced("test-hook 18 ", "test-hook 19 "),
        std::string(kMaxWorkerConfig + 1, 'x'),
    };
    for (const std::string& text : bad)
        EXPECT_THROW(parse_worker_config(text), WorkerConfigError) << text;
}

using Clock = RateBound::Clock;
using ns::StderrLines;

// Whole lines only; control bytes become '?'; a long line is cut; past the rate lines are
// dropped and counted, said once at the end.
TEST(WorkerStderr, ForwardsWholeBoundedLines)
{
    const Clock::time_point t0 = Clock::now();
    StderrLines lines("<4>");
    EXPECT_EQ(lines.feed("cocoon: relay", t0), "");
    EXPECT_EQ(lines.feed(" worker: one\ntwo\x1b[2J\tx\r\n", t0), "cocoon: relay worker: one\ntwo?[2J\tx?\n");
    const std::string longest = lines.feed(std::string(StderrLines::kMaxLine + 100, 'a') + "\n", t0);
    EXPECT_EQ(longest, std::string(StderrLines::kMaxLine, 'a') + " [cut]\n");
    EXPECT_EQ(lines.finish(t0), "");

    StderrLines flood("<4>");
    std::string all;
    for (int i = 0; i < 1000; ++i)
        all += flood.feed("line\n", t0);
    EXPECT_EQ(all.size(), static_cast<size_t>(StderrLines::kBurst) * 5);
    EXPECT_EQ(flood.dropped(), 1000 - static_cast<uint64_t>(StderrLines::kBurst));
    // A second later, kLinesPerSecond more pass.
    all.clear();
    for (int i = 0; i < 1000; ++i)
        all += flood.feed("line\n", t0 + std::chrono::seconds(1));
    EXPECT_EQ(all.size(), static_cast<size_t>(StderrLines::kLinesPerSecond) * 5);
    const std::string end = flood.finish(t0 + std::chrono::seconds(1));
    EXPECT_EQ(end,
              "<4>cocoon: the relay worker wrote 1450 lines to stderr past the rate cocoon forwards (500, then 50 a "
              "second): dropped\n");
    EXPECT_EQ(flood.finish(t0 + std::chrono::seconds(1)), "");  // said once
}

TEST(WorkerStderr, ALastLineWithoutNewlineIsForwardedAtTheEnd)
{
    StderrLines lines("");
    EXPECT_EQ(lines.feed("no newline", Clock::now()), "");
    EXPECT_EQ(lines.finish(Clock::now()), "no newline\n");
}

}  // namespace
}  // namespace cocoon::relay
