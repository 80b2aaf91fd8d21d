// The --egress bounds e2e tests' in-sandbox client: this test binary, bound into a sandbox as /helper.
#include <gtest/gtest.h>

#include "tests/e2e/helper_binary.h"
#include "tests/e2e/egress_bounds.h"

namespace cocoon::test {
namespace {
namespace egress_bounds_client {  // its own: the test binaries compile several files as one (COCOON_UNITY_TESTS)

using namespace egress_bounds;

// ---- The in-sandbox client ----------------------------------------------------------------------
// Bound into a sandbox as /helper with COCOON_E2E_EGRESS_CLIENT="MODE ARGS...", this binary is a
// client of --egress on 127.0.0.1:kEgressPort; it prints what it saw and exits 0 when it could run.

int fail(const std::string& what)
{
    std::printf("error %s: %s\n", what.c_str(), std::strerror(errno));
    return 1;
}

// Tells the test `name` is reached and waits for its go.
bool step(const std::string& name)
{
    write_file(std::string(kShared) + "/" + name + ".ready", "");
    return wait_for(std::string(kShared) + "/" + name + ".go");
}

// One request on a fresh connection; what came back, to EOF (at most 64 KiB).
std::string exchange(const std::string& request)
{
    UniqueFd fd = connect_tcp("127.0.0.1", kEgressPort);
    if (!fd || !send_all(fd.get(), request))
        return "(no connection)";
    std::string got;
    read_to_eof(fd.get(), got, 65536);
    return got;
}

std::string status_line(const std::string& answer)
{
    return answer.substr(0, answer.find('\r'));
}

// One CONNECT request with bytes of 0x80 and above, then `count` with unique 16,000-byte names
// from 8 threads; prints how many were answered 400.
int client_flood(size_t count)
{
    // The high bytes first: past the first 2,000, refusals' lines are held back (relay/egress.h).
    const std::string high = status_line(exchange("CONNECT caf\xc3\xa9\x80\xff.example:443 HTTP/1.1\r\n\r\n"));
    std::atomic<size_t> next{0}, bad_request{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < 8; ++w)
        workers.emplace_back([&] {
            for (size_t i; (i = next++) < count;) {
                std::string name = "n" + std::to_string(i) + "-";
                name.resize(16000, 'a');
                if (status_line(exchange("CONNECT " + name + ":443 HTTP/1.1\r\n\r\n")) == "HTTP/1.1 400 Bad Request")
                    ++bad_request;
            }
        });
    for (std::thread& t : workers)
        t.join();
    std::printf("400 for %zu of %zu; high bytes: %s\n", bad_request.load(), count, high.c_str());
    std::fflush(stdout);
    return step("flooded") ? 0 : fail("waiting for the test");
}

// `count` refused requests (each a log line), then waits to be killed.
int client_refused_then_wait(size_t count)
{
    size_t refused = 0;
    for (size_t i = 0; i < count; ++i)
        refused += status_line(exchange("CONNECT unlisted-" + std::to_string(i) + ".test:443 HTTP/1.1\r\n\r\n")) ==
                   "HTTP/1.1 403 Forbidden";
    std::printf("403 for %zu of %zu\n", refused, count);
    std::fflush(stdout);
    write_file(std::string(kShared) + "/refused.ready", "");
    for (;;)
        ::pause();
}

// An echo through --egress (CONNECT to the target) and one through --relay.
bool echo_via_egress(uint16_t target_port)
{
    UniqueFd fd = connect_tcp("127.0.0.1", kEgressPort);
    if (!fd || !send_all(fd.get(), "CONNECT 127.0.0.1:" + std::to_string(target_port) + " HTTP/1.1\r\n\r\n"))
        return false;
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 4096 && ::recv(fd.get(), &c, 1, 0) == 1)
        head += c;
    if (head.rfind("HTTP/1.1 200", 0) != 0 || !send_all(fd.get(), "echo\nthrough egress\n"))
        return false;
    return read_line(fd.get()) == "through egress";
}

bool echo_via_relay()
{
    UniqueFd fd = connect_tcp("127.0.0.1", kRelayPort);
    return fd && send_all(fd.get(), "echo\nthrough relay\n") && read_line(fd.get()) == "through relay";
}

// `count` idle connections to --egress (non-blocking connects: those past the listen backlog
// wait in SYN_SENT), held by processes of 200 each (the sandbox has cocoon's hard fd limit) until
// the test's go; then they close, and an echo goes through each of --egress and --relay.
int client_idle(size_t count, uint16_t target_port)
{
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(kEgressPort);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int release[2], ready[2];
    if (::pipe2(release, O_CLOEXEC) < 0 || ::pipe2(ready, O_CLOEXEC) < 0)
        return fail("pipe2");
    std::vector<pid_t> holders;
    for (size_t first = 0; first < count; first += 200) {
        const pid_t pid = ::fork();
        if (pid < 0)
            return fail("fork");
        if (pid == 0) {
            ::close(release[1]);
            std::vector<UniqueFd> held;
            for (size_t i = first; i < std::min(count, first + 200); ++i) {
                UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
                if (!fd ||
                    (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) < 0 && errno != EINPROGRESS))
                    std::_Exit(1);
                held.push_back(std::move(fd));
            }
            char c = 'r';
            if (::write(ready[1], &c, 1) != 1)
                std::_Exit(1);
            (void)!::read(release[0], &c, 1);  // EOF: the parent let go
            std::_Exit(0);
        }
        holders.push_back(pid);
    }
    ::close(ready[1]);
    ::close(release[0]);
    for (size_t i = 0; i < holders.size(); ++i) {
        char c;
        if (::read(ready[0], &c, 1) != 1)
            return fail("a holder did not get its connections");
    }
    if (!step("held"))
        return fail("waiting for the test");
    ::close(release[1]);
    for (pid_t pid : holders)
        ::waitpid(pid, nullptr, 0);
    // The monitor notices the closed handshakes within its 250 ms tick; give the echo a few tries.
    bool egress = false, relayed = false;
    for (int i = 0; i < 50 && !(egress && relayed); ++i) {
        egress = egress || echo_via_egress(target_port);
        relayed = relayed || echo_via_relay();
        if (!(egress && relayed))
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::printf("after: egress %s, relay %s\n", egress ? "ok" : "failed", relayed ? "ok" : "failed");
    return 0;
}

// One A question for `name`, id `id`, as a stub resolver sends it.
std::string dns_question(uint16_t id, const std::string& name)
{
    std::string q = {static_cast<char>(id >> 8), static_cast<char>(id & 0xff), 1, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    for (size_t start = 0; start <= name.size();) {
        const size_t dot = std::min(name.find('.', start), name.size());
        q += static_cast<char>(dot - start);
        q += name.substr(start, dot - start);
        start = dot + 1;
    }
    return q + std::string{0, 0, 1, 0, 1};
}

// Refused questions (names no rule admits, each its own) to the resolver on 127.0.0.1:53 for
// `seconds`, as fast as one socket sends them, answers unread; prints how many the kernel took.
int client_dns_flood(uint64_t seconds)
{
    UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(53);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!fd || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) < 0)
        return fail("the resolver's socket");
    write_file(std::string(kShared) + "/flooding.ready", "");
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    uint64_t sent = 0;
    for (uint64_t i = 0; (i & 255) != 0 || Clock::now() < deadline; ++i) {
        const std::string q = dns_question(static_cast<uint16_t>(i), "n" + std::to_string(i) + ".unlisted.test");
        sent += ::send(fd.get(), q.data(), q.size(), 0) == static_cast<ssize_t>(q.size());
    }
    std::printf("sent %llu\n", static_cast<unsigned long long>(sent));
    std::fflush(stdout);
    return step("flooded") ? 0 : fail("waiting for the test");
}

// Connections to `port` on 127.16.0.99, an address the resolver never gave out (each a refusal
// and a reset), from 8 threads for `seconds`; a connection counts as sent once connected (or reset
// while connect waited), and is waited for until its reset (or EOF). Prints how many were sent
// and how many were answered.
int client_transparent_flood(uint64_t seconds, uint16_t port)
{
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(0x7f100063);
    write_file(std::string(kShared) + "/flooding.ready", "");
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    std::atomic<uint64_t> sent{0}, answered{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&] {
            const timeval wait{20, 0};
            while (Clock::now() < deadline) {
                UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
                ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
                if (!fd)
                    continue;
                if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) < 0) {
                    // Connected and reset before connect returned (a loaded host): sent and answered.
                    if (errno == ECONNRESET)
                        ++sent, ++answered;
                    continue;
                }
                ++sent;
                char byte;
                const ssize_t n = ::recv(fd.get(), &byte, 1, 0);
                answered += n == 0 || (n < 0 && errno == ECONNRESET);
            }
        });
    for (std::thread& t : threads)
        t.join();
    std::printf("sent %llu answered %llu\n", static_cast<unsigned long long>(sent.load()),
                static_cast<unsigned long long>(answered.load()));
    std::fflush(stdout);
    return step("flooded") ? 0 : fail("waiting for the test");
}

// Sends `bytes` as they are on one connection and prints the answer's status line.
int client_raw(const std::string& bytes)
{
    std::printf("%s\n", status_line(exchange(bytes)).c_str());
    return 0;
}

int run_client(const std::string& spec)
{
    std::istringstream in(spec);
    std::string mode;
    in >> mode;
    uint64_t a = 0, b = 0;
    in >> a >> b;
    if (mode == "flood")
        return client_flood(a);
    if (mode == "refused")
        return client_refused_then_wait(a);
    if (mode == "idle")
        return client_idle(a, static_cast<uint16_t>(b));
    if (mode == "dns-flood")
        return client_dns_flood(a);
    if (mode == "transparent-flood")
        return client_transparent_flood(a, static_cast<uint16_t>(b));
    if (mode == "raw") {
        // The rest of the spec, with \r and \n written as such.
        std::string text = spec.substr(spec.find(' ') + 1), out;
        for (size_t i = 0; i < text.size(); ++i) {
            if (text[i] == '\\' && i + 1 < text.size() && (text[i + 1] == 'r' || text[i + 1] == 'n')) {
                out += text[++i] == 'r' ? '\r' : '\n';
            } else {
                out += text[i];
            }
        }
        return client_raw(out);
    }
    std::printf("unknown mode %s\n", mode.c_str());
    return 2;
}

[[maybe_unused]] const bool kEgressClient = helper_mode(kClientEnv, run_client);

}  // namespace egress_bounds_client
}  // namespace
}  // namespace cocoon::test
