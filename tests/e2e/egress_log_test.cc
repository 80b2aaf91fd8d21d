// e2e: --egress-log read without guessing (issue 23): each connection's line says its "result"
// (allowed, refused, unresolved, unreachable), each produced here by a real run, and lines come
// in the order of their "time" even when connections overlap. Runs as root and unprivileged.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/helper_binary.h"
#include "tests/e2e/relay_target.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

constexpr uint16_t kLogEgressPort = 3132;
const std::string kLogEgressPortText = std::to_string(kLogEgressPort);
constexpr const char* kLogClientEnv = "COCOON_E2E_EGRESS_LOG_CLIENT";

// ---- The in-sandbox client ----------------------------------------------------------------------
// Bound into a sandbox as /helper with COCOON_E2E_EGRESS_LOG_CLIENT="MODE ARGS...", this binary
// is a client of --egress on 127.0.0.1:kLogEgressPort; it prints what it saw and exits 0 when it
// could run.

std::string status_line(const std::string& answer)
{
    return answer.substr(0, answer.find('\r'));
}

// One request on a fresh connection; the answer's status line (read to EOF).
std::string exchange(const std::string& request)
{
    UniqueFd fd = connect_tcp("127.0.0.1", kLogEgressPort);
    if (!fd || !send_all(fd.get(), request))
        return "(no connection)";
    std::string got;
    read_to_eof(fd.get(), got, 65536);
    return status_line(got);
}

// One request of each result, in turn: a name the allowlist does not name, an allowed name that
// does not resolve, an allowed name whose address has nothing listening at `closed`, and an
// allowed name served at `open`.
int client_results(uint16_t open, uint16_t closed)
{
    const std::string open_at = "localhost:" + std::to_string(open);
    std::printf("refused: %s\n", exchange("CONNECT unlisted.test:443 HTTP/1.1\r\n\r\n").c_str());
    std::printf("unresolved: %s\n", exchange("CONNECT cocoon-nothing.invalid:443 HTTP/1.1\r\n\r\n").c_str());
    std::printf("unreachable: %s\n",
                exchange("CONNECT localhost:" + std::to_string(closed) + " HTTP/1.1\r\n\r\n").c_str());
    std::printf("allowed: %s\n",
                exchange("GET http://" + open_at + "/ HTTP/1.1\r\nHost: " + open_at + "\r\n\r\n").c_str());
    return 0;
}

// A CONNECT tunnel to 127.0.0.1:`port` (an echo target) through --egress that echoed `text`.
UniqueFd echo_tunnel(const std::string& host, uint16_t port, const std::string& text)
{
    UniqueFd fd = connect_tcp("127.0.0.1", kLogEgressPort);
    if (!fd || !send_all(fd.get(), "CONNECT " + host + ":" + std::to_string(port) + " HTTP/1.1\r\n\r\n"))
        return UniqueFd();
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 4096 && ::recv(fd.get(), &c, 1, 0) == 1)
        head += c;
    if (head.rfind("HTTP/1.1 200", 0) != 0 || !send_all(fd.get(), "echo\n" + text + "\n") ||
        read_line(fd.get()) != text)
        return UniqueFd();
    return fd;
}

// Closes our side of a tunnel and waits for the proxy to close its own: the connection is over.
bool close_tunnel(UniqueFd fd)
{
    std::string rest;
    return ::shutdown(fd.get(), SHUT_WR) == 0 && read_to_eof(fd.get(), rest);
}

// Two overlapping connections to the echo target at `port`: the first (as localhost) opens,
// then the second (as 127.0.0.1) opens and closes, and only after the test has seen the
// second's line does the first close.
int client_overlap(uint16_t port)
{
    UniqueFd first = echo_tunnel("localhost", port, "first");
    if (!first)
        return std::printf("error: the first tunnel\n"), 1;
    // Accepted well apart: the first's accept time is clearly the earlier.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    UniqueFd second = echo_tunnel("127.0.0.1", port, "second");
    if (!second || !close_tunnel(std::move(second)))
        return std::printf("error: the second tunnel\n"), 1;
    write_file(std::string(kShared) + "/second.closed", "");
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!exists(std::string(kShared) + "/first.close") && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!close_tunnel(std::move(first)))
        return std::printf("error: closing the first tunnel\n"), 1;
    std::printf("overlapped\n");
    return 0;
}

int run_client(const std::string& spec)
{
    std::istringstream in(spec);
    std::string mode;
    uint64_t a = 0, b = 0;
    in >> mode >> a >> b;
    if (mode == "results")
        return client_results(static_cast<uint16_t>(a), static_cast<uint16_t>(b));
    if (mode == "overlap")
        return client_overlap(static_cast<uint16_t>(a));
    std::printf("unknown mode %s\n", mode.c_str());
    return 2;
}

[[maybe_unused]] const bool kEgressLogClient = helper_mode(kLogClientEnv, run_client);

// ---- Tests --------------------------------------------------------------------------------------

// A log line's string member `name`, or "" where it has none.
std::string text_member(const std::string& line, const std::string& name)
{
    std::smatch m;
    return std::regex_search(line, m, std::regex("\"" + name + "\": \"([^\"]*)\"")) ? m[1].str() : std::string();
}

// A log line's "time" ("2025-01-02T03:04:05.678Z") in ms since the epoch, or -1.
int64_t time_ms(const std::string& line)
{
    tm parts{};
    int ms = 0;
    if (std::sscanf(text_member(line, "time").c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &parts.tm_year, &parts.tm_mon,
                    &parts.tm_mday, &parts.tm_hour, &parts.tm_min, &parts.tm_sec, &ms) != 7)
        return -1;
    parts.tm_year -= 1900;
    parts.tm_mon -= 1;
    return static_cast<int64_t>(::timegm(&parts)) * 1000 + ms;
}

class EgressLog : public ::testing::Test {
protected:
    std::vector<std::string> sandbox(const std::vector<std::string>& allow, const std::string& spec) const
    {
        std::vector<std::string> out = args(
            {minimal_root(), {"--ro-bind",     "/etc",        "/etc",      "--unshare-all",    "--proc",       "/proc",
                              "--dev",         "/dev",        "--ro-bind", m_helper,           "/helper",      "--bind",
                              m_shared.path(), kShared,       "--egress",  kLogEgressPortText, "--egress-log", "3",
                              "--setenv",      kLogClientEnv, spec}});
        for (const std::string& pattern : allow)
            out.insert(out.end(), {"--egress-allow", pattern});
        return args({out, {"/helper"}});
    }

    // cocoon in the background, its --egress-log (fd 3) the file m_log.
    std::unique_ptr<Background> start(const std::vector<std::string>& options) const
    {
        UniqueFd log(::open(m_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        return std::make_unique<Background>(options, m_dir.path(), std::nullopt, log.get());
    }

    std::vector<std::string> log_lines() const { return lines(read_file(m_log)); }

    TempDir m_dir;
    TempDir m_shared;
    const std::string m_log = m_dir / "egress.log";
    const std::string m_helper = self_exe();
};

// Each of the four results from a real run: a name not on the allowlist is refused (403), an
// allowed name that does not resolve (under .invalid, RFC 6761) is unresolved (502), an allowed
// name (localhost, from /etc/hosts) at a port where nothing listens is unreachable (502), and one
// where a server listens is allowed (200). Each line says its result and only the allowed one
// says "allowed": true; the summary counts each result per host and in all.
TEST_F(EgressLog, EachLineSaysWhichOfTheFourResultsItHad)
{
    HttpServer web("page\n");
    const std::string open = std::to_string(web.port());
    // A port bound but not listening: a connect to it is refused, and no other test takes it.
    UniqueFd bound(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const Address loop = loopback(AF_INET);
    ASSERT_EQ(::bind(bound.get(), loop.get(), loop.len), 0);
    const std::string closed = std::to_string(port_of(address_of(bound.get())));
    // Loopback addresses are refused unless listed: each name and its address are listed.
    auto cocoon = start(sandbox({"localhost:" + open, "127.0.0.1:" + open, "localhost:" + closed, "127.0.0.1:" + closed,
                                 "cocoon-nothing.invalid:443"},
                                "results " + open + " " + closed));
    ASSERT_EQ(cocoon->wait(40000), 0) << cocoon->out() << cocoon->err();
    EXPECT_EQ(cocoon->out(), "refused: HTTP/1.1 403 Forbidden\nunresolved: HTTP/1.1 502 Bad Gateway\n"
                             "unreachable: HTTP/1.1 502 Bad Gateway\nallowed: HTTP/1.1 200 OK\n")
        << cocoon->err();
    EXPECT_EQ(web.requests(), std::vector<std::string>{"GET / host=localhost:" + open});

    const std::vector<std::string> log = log_lines();
    ASSERT_EQ(log.size(), 5U) << read_file(m_log);
    struct Expected {
        std::string host, result, reason;
    } expected[] = {
        {"unlisted.test", "refused", "unlisted.test port 443 is not on the allowlist"},
        {"cocoon-nothing.invalid", "unresolved", "can't resolve cocoon-nothing.invalid"},
        {"localhost", "unreachable", "can't connect to 127.0.0.1 port " + closed + ": Connection refused"},
        {"localhost", "allowed", ""},
    };
    for (size_t i = 0; i < 4; ++i) {
        const std::string& line = log[i];
        EXPECT_EQ(text_member(line, "host"), expected[i].host) << line;
        EXPECT_EQ(text_member(line, "result"), expected[i].result) << line;
        EXPECT_TRUE(contains(line, std::string("\"allowed\": ") + (i == 3 ? "true" : "false"))) << line;
        EXPECT_EQ(text_member(line, "reason").rfind(expected[i].reason, 0), 0U) << line;
        EXPECT_EQ(contains(line, "\"reason\""), i != 3) << line;
    }
    EXPECT_TRUE(contains(log[3], "\"address\": \"127.0.0.1\"")) << log[3];
    EXPECT_TRUE(std::regex_search(log[3], std::regex("\"bytes-up\": [1-9][0-9]*, \"bytes-down\": [1-9]"))) << log[3];
    const std::string& summary = log[4];
    EXPECT_TRUE(contains(summary, "{ \"host\": \"localhost\", \"port\": " + open +
                                      ", \"connections\": 1, \"refused\": 0, \"unresolved\": 0, \"unreachable\": 0"))
        << summary;
    EXPECT_TRUE(contains(summary, "{ \"host\": \"localhost\", \"port\": " + closed +
                                      ", \"connections\": 0, \"refused\": 0, \"unresolved\": 0, \"unreachable\": 1"))
        << summary;
    EXPECT_TRUE(contains(summary, "{ \"host\": \"cocoon-nothing.invalid\", \"port\": 443, \"connections\": 0, "
                                  "\"refused\": 0, \"unresolved\": 1, \"unreachable\": 0"))
        << summary;
    EXPECT_TRUE(contains(summary, "{ \"host\": \"unlisted.test\", \"port\": 443, \"connections\": 0, \"refused\": 1, "
                                  "\"unresolved\": 0, \"unreachable\": 0"))
        << summary;
    EXPECT_TRUE(contains(summary, "\"results\": { \"allowed\": 1, \"refused\": 1, \"unresolved\": 1, "
                                  "\"unreachable\": 1 }, \"dropped\": 0"))
        << summary;
}

// Two connections that overlap: the first opened is the last to close. Its line comes second
// and its "time" is not before the first line's: lines are written in the order of "time" (when
// the outcome was known), and "time" less "duration-ms" is when each was accepted. Control: the
// first was accepted at least 200 ms before the second (so a time of acceptance would have put
// the lines out of order).
TEST_F(EgressLog, OverlappingConnectionsAreLoggedInTimeOrder)
{
    Target target(Target::OnTcp{});
    const std::string port = std::to_string(target.port());
    auto cocoon = start(sandbox({"localhost:" + port, "127.0.0.1:" + port}, "overlap " + port));
    // The second tunnel is closed: its line alone is written (the first still runs).
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!exists(m_shared / "second.closed") && Clock::now() < deadline && cocoon->running())
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(exists(m_shared / "second.closed")) << cocoon->out() << cocoon->err();
    while (log_lines().empty() && Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(log_lines().size(), 1U) << read_file(m_log);
    write_file(m_shared / "first.close", "");
    ASSERT_EQ(cocoon->wait(20000), 0) << cocoon->out() << cocoon->err();
    EXPECT_EQ(cocoon->out(), "overlapped\n");

    const std::vector<std::string> log = log_lines();
    ASSERT_EQ(log.size(), 3U) << read_file(m_log);
    const std::string &second = log[0], &first = log[1];
    EXPECT_EQ(text_member(second, "host"), "127.0.0.1") << second;
    EXPECT_EQ(text_member(first, "host"), "localhost") << first;
    for (const std::string& line : {second, first})
        EXPECT_EQ(text_member(line, "result"), "allowed") << line;
    const int64_t second_time = time_ms(second), first_time = time_ms(first);
    ASSERT_GT(second_time, 0) << second;
    ASSERT_GT(first_time, 0) << first;
    EXPECT_LE(second_time, first_time) << "lines out of time order:\n" << second << "\n" << first;
    const auto accepted = [](const std::string& line, int64_t at) {
        return at - static_cast<int64_t>(json_number(line, "duration-ms"));
    };
    // Each accept time is within a few ms of the truth (two clocks, each rounded to the ms).
    EXPECT_GE(accepted(second, second_time) - accepted(first, first_time), 190) << first << "\n" << second;
}

}  // namespace
}  // namespace cocoon::test
