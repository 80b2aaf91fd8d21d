// The relay e2e tests' in-sandbox client: this test binary, bound into a sandbox as /helper.

#include <gtest/gtest.h>

#include "tests/e2e/helper_binary.h"
#include "tests/e2e/relay_e2e.h"

namespace cocoon::test {
namespace {
namespace relay_client {  // its own: the test binaries compile several files as one (COCOON_UNITY_TESTS)

using namespace relay_e2e;

// ---- The in-sandbox client ----------------------------------------------------------------------
// Bound into a sandbox as /helper with COCOON_E2E_RELAY="MODE HOST PORT ARGS...", this binary is a
// client of the relay's listener; it prints what it saw on stdout and exits 0 when it could run.

int fail(const std::string& what)
{
    std::printf("error %s: %s\n", what.c_str(), std::strerror(errno));
    return 1;
}

// What a read ends with: "eof", "error <reason>", or "data".
std::string read_outcome(int fd)
{
    char buf[256];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) < 0 && errno == EINTR) {}
    if (n < 0)
        return std::string("error ") + std::strerror(errno);
    return n == 0 ? "eof" : "data";
}

// Announces `name` in the shared directory and waits for the test's answer.
bool step(const std::string& name)
{
    write_file(std::string(kShared) + "/" + name + ".ready", "");
    return wait_for_file(std::string(kShared) + "/" + name + ".go");
}

// With COCOON_E2E_CONNECT=HOST:PORT (the --egress tests), every connection the client makes first
// asks the proxy at host:port for a tunnel to HOST:PORT and reads its answer; anything but 200
// fails the connection (errno ECONNREFUSED).
UniqueFd dial(const std::string& host, uint16_t port)
{
    UniqueFd fd = connect_tcp(host, port);
    const char* target = std::getenv("COCOON_E2E_CONNECT");
    if (!fd || !target)
        return fd;
    if (!send_all(fd.get(), std::string("CONNECT ") + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n"))
        return UniqueFd();
    std::string head;
    char c;
    while (head.size() < 4096 && head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(fd.get(), &c, 1, 0);
        if (n <= 0)
            return UniqueFd();
        head += c;
    }
    if (head.rfind("HTTP/1.1 200 ", 0) != 0) {
        errno = ECONNREFUSED;
        return UniqueFd();
    }
    return fd;
}

bool echo_once(const std::string& host, uint16_t port, const std::string& text)
{
    UniqueFd fd = dial(host, port);
    if (!fd || !send_all(fd.get(), "echo\n" + text + "\n"))
        return false;
    return read_line(fd.get()) == text;
}

// Reads a download to its EOF and prints its hash.
int print_download(int fd)
{
    StreamHash got;
    const auto hash = [&](const char* data, size_t len) { got.update(data, len); };
    if (!read_to_eof(fd, hash, 4 * kMiB))
        return fail("recv after " + std::to_string(got.bytes()) + " bytes");
    std::printf("got %s\n", got.text().c_str());
    return 0;
}

int client_download(const std::string& host, uint16_t port, uint64_t size, uint64_t seed)
{
    UniqueFd fd = dial(host, port);
    if (!fd)
        return fail("connect");
    if (!send_all(fd.get(), "download " + std::to_string(size) + " " + std::to_string(seed) + "\n"))
        return fail("send");
    return print_download(fd.get());
}

// Asks for a download, then reads nothing until the test says so.
int client_slow_download(const std::string& host, uint16_t port, uint64_t size, uint64_t seed)
{
    UniqueFd fd = dial(host, port);
    if (!fd)
        return fail("connect");
    if (!send_all(fd.get(), "download " + std::to_string(size) + " " + std::to_string(seed) + "\n"))
        return fail("send");
    if (!step("paused"))
        return fail("waiting for the test");
    return print_download(fd.get());
}

int client_upload(const std::string& host, uint16_t port, uint64_t size, uint64_t seed)
{
    UniqueFd fd = dial(host, port);
    if (!fd)
        return fail("connect");
    if (!send_all(fd.get(), "upload\n"))
        return fail("send");
    Pattern pattern(seed);
    StreamHash sent;
    std::vector<char> buf(kMiB);
    while (sent.bytes() < size) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - sent.bytes()));
        pattern.fill(buf.data(), n);
        if (!send_all(fd.get(), buf.data(), n))
            return fail("send after " + std::to_string(sent.bytes()) + " bytes");
        sent.update(buf.data(), n);
    }
    ::shutdown(fd.get(), SHUT_WR);
    std::optional<std::string> reply = read_line(fd.get());
    if (!reply)
        return fail("reading the reply");
    std::printf("sent %s\n%s\n", sent.text().c_str(), reply->c_str());
    return 0;
}

// Sends, shuts its side down, then reads the reply the server writes only after that EOF.
int client_half_close(const std::string& host, uint16_t port)
{
    UniqueFd fd = dial(host, port);
    if (!fd || !send_all(fd.get(), "halfclose\n"))
        return fail("connect");
    std::string payload(100000, '\0');
    Pattern(3).fill(payload.data(), payload.size());
    StreamHash sent;
    sent.update(payload);
    if (!send_all(fd.get(), payload))
        return fail("send");
    if (::shutdown(fd.get(), SHUT_WR) < 0)
        return fail("shutdown");
    std::string reply;
    if (!read_to_eof(fd.get(), reply, 4 * kMiB))
        return fail("recv after shutdown, " + std::to_string(reply.size()) + " bytes in");
    StreamHash got;
    got.update(reply);
    std::printf("sent %s\nreply line: %s\nreply %s\n", sent.text().c_str(), reply.substr(0, reply.find('\n')).c_str(),
                got.text().c_str());
    return 0;
}

// Reads the server's greeting to its EOF, then still sends.
int client_server_first(const std::string& host, uint16_t port)
{
    UniqueFd fd = dial(host, port);
    if (!fd || !send_all(fd.get(), "serverfirst\n"))
        return fail("connect");
    std::string greeting;
    if (!read_to_eof(fd.get(), greeting))
        return fail("recv");
    if (!send_all(fd.get(), "sent after the server's EOF\n"))
        return fail("send after EOF");
    ::shutdown(fd.get(), SHUT_WR);
    std::printf("greeting: %sthen %s\n", greeting.c_str(), read_outcome(fd.get()).c_str());
    return 0;
}

// The server resets; then, with a shared directory, the client resets one of its own.
int client_reset(const std::string& host, uint16_t port)
{
    UniqueFd fd = dial(host, port);
    if (!fd || !send_all(fd.get(), "reset\nbytes the server never reads\n"))
        return fail("connect");
    const auto start = Clock::now();
    const std::string outcome = read_outcome(fd.get());
    std::printf("server reset: %s after %lld ms\n", outcome.c_str(), ms_since(start));

    UniqueFd held = dial(host, port);
    if (!held || !send_all(held.get(), "hold\n") || read_line(held.get()) != "held")
        return fail("hold");
    linger hard{1, 0};
    ::setsockopt(held.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    held.reset();
    std::printf("client reset sent\n");
    std::fflush(stdout);
    return step("client-reset") ? 0 : fail("waiting for the test");
}

// Streams until the server, which closes after `limit` bytes, makes a send fail; then checks that
// the relay still serves the next connection.
int client_upload_closed(const std::string& host, uint16_t port, uint64_t limit)
{
    UniqueFd fd = dial(host, port);
    if (!fd || !send_all(fd.get(), "closeafter " + std::to_string(limit) + "\n"))
        return fail("connect");
    std::vector<char> chunk(kMiB, 'u');
    uint64_t sent = 0;
    while (sent < 64 * limit && send_all(fd.get(), chunk.data(), chunk.size()))
        sent += chunk.size();
    std::printf("upload ended: %s\n", sent < 64 * limit ? "the send failed" : "never failed");
    std::printf("next: %s\n", echo_once(host, port, "still relayed") ? "ok" : "failed");
    return 0;
}

// Opens `count` connections, then echoes a line on each while all are open.
int client_many(const std::string& host, uint16_t port, size_t count)
{
    raise_nofile();
    std::vector<UniqueFd> conns;
    for (size_t i = 0; i < count; ++i) {
        conns.push_back(dial(host, port));
        if (!conns.back())
            return fail("connect #" + std::to_string(i));
    }
    for (size_t i = 0; i < count; ++i)
        if (!send_all(conns[i].get(), "echo\nmessage " + std::to_string(i) + "\n"))
            return fail("send #" + std::to_string(i));
    std::vector<std::string> got(count);
    std::vector<bool> done(count, false);
    size_t finished = 0;
    // Until every echo is in, or none came for 5 s: a relay that drains a burst slowly (a loaded
    // machine, a slow proxy) passes, one that stalls does not.
    auto last_progress = Clock::now();
    while (finished < count && Clock::now() - last_progress < std::chrono::seconds(5)) {
        std::vector<pollfd> fds;
        std::vector<size_t> which;
        for (size_t i = 0; i < count; ++i)
            if (!done[i]) {
                fds.push_back({conns[i].get(), POLLIN, 0});
                which.push_back(i);
            }
        if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR)
            return fail("poll");
        for (size_t k = 0; k < fds.size(); ++k) {
            if (!fds[k].revents)
                continue;
            const size_t i = which[k];
            char buf[64];
            ssize_t n = ::recv(conns[i].get(), buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0)
                got[i].append(buf, static_cast<size_t>(n));
            const std::string want = "message " + std::to_string(i) + "\n";
            if (n <= 0 || got[i].size() >= want.size()) {
                done[i] = true;
                ++finished;
                last_progress = Clock::now();
            }
        }
    }
    size_t echoed = 0;
    for (size_t i = 0; i < count; ++i)
        echoed += got[i] == "message " + std::to_string(i) + "\n";
    std::printf("echoed %zu of %zu\n", echoed, count);
    return 0;
}

// A daemon (it outlives this command) holds `count` connections open for at most 10 s.
int client_hold(const std::string& host, uint16_t port, size_t count)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0)
        return fail("pipe2");
    UniqueFd ready_r(fds[0]), ready_w(fds[1]);
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid < 0)
        return fail("fork");
    if (pid == 0) {
        ready_r.reset();
        // Off cocoon's stdout and stderr, so that the test's reader sees them close.
        const int null = ::open("/dev/null", O_RDWR);
        if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0)
            std::_Exit(1);
        ::setsid();
        std::vector<UniqueFd> conns;
        for (size_t i = 0; i < count; ++i) {
            conns.push_back(dial(host, port));
            if (!conns.back() || !send_all(conns.back().get(), "hold\n") || read_line(conns.back().get()) != "held")
                std::_Exit(1);
        }
        if (::write(ready_w.get(), "r", 1) != 1)
            std::_Exit(1);
        ready_w.reset();
        ::sleep(10);
        std::_Exit(0);
    }
    ready_w.reset();
    pollfd pfd{ready_r.get(), POLLIN, 0};
    char c;
    if (::poll(&pfd, 1, 10000) != 1 || ::read(ready_r.get(), &c, 1) != 1)
        return fail("the daemon did not get its connections");
    std::printf("holding %zu\n", count);
    return 0;
}

// The proxy goes away and comes back while this client keeps connecting (see ProxyDown below).
int client_proxy_down(const std::string& host, uint16_t port)
{
    // The outcome of a send and a read on a new connection: "error <reason>" from whichever
    // failed first (a send that meets the reset reports it, and the read then sees EOF), else
    // "eof" or "data".
    // The relay's reset may arrive before connect_tcp has finished with the new socket: then
    // the connect itself reports it, and that is the same outcome, at once.
    auto attempt = [&](const std::string& name) {
        UniqueFd fd = dial(host, port);
        if (!fd && errno == ECONNRESET) {
            std::printf("%s: error Connection reset by peer after 0 ms\n", name.c_str());
            return;
        }
        if (!fd) {
            std::printf("%s: connect failed: %s\n", name.c_str(), std::strerror(errno));
            return;
        }
        const auto start = Clock::now();
        const std::string outcome =
            send_all(fd.get(), "echo\nping\n") ? read_outcome(fd.get()) : std::string("error ") + std::strerror(errno);
        std::printf("%s: %s after %lld ms\n", name.c_str(), outcome.c_str(), ms_since(start));
    };
    std::printf("first: %s\n", echo_once(host, port, "first") ? "ok" : "failed");
    // A connection made while the proxy was up lives through its absence.
    UniqueFd kept = dial(host, port);
    if (!kept || !send_all(kept.get(), "echo\nkept\n") || read_line(kept.get()) != "kept")
        return fail("kept connection");
    if (!step("closed"))
        return fail("waiting for the test");
    attempt("refused");
    size_t resets = 0;
    for (int i = 0; i < 20; ++i) {
        UniqueFd fd = dial(host, port);
        resets += fd ? read_outcome(fd.get()) == "error Connection reset by peer" : errno == ECONNRESET;
    }
    std::printf("burst: %zu of 20 reset\n", resets);
    if (!step("removed"))
        return fail("waiting for the test");
    attempt("removed");
    const bool alive = send_all(kept.get(), "still here\n") && read_line(kept.get()) == "still here";
    std::printf("kept: %s\n", alive ? "ok" : "failed");
    if (!step("back"))
        return fail("waiting for the test");
    std::printf("back: %s\n", echo_once(host, port, "back") ? "ok" : "failed");
    return 0;
}

// --egress's answer to garbage, and a stalled client that does not stop it serving the next one:
// prints "garbage: <status line>, then <eof|data|error>" and "served while one stalls: <code>".
int client_egress_bad(const std::string& host, uint16_t port, uint16_t web_port)
{
    UniqueFd bad = connect_tcp(host, port);
    UniqueFd stalled = connect_tcp(host, port);
    if (!bad || !stalled)
        return fail("connect");
    if (!send_all(stalled.get(), "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost:") ||
        !send_all(bad.get(), "\x16\x03\x01 not http\r\n\r\n"))
        return fail("send");
    const std::string status = read_line(bad.get()).value_or("(nothing)");
    std::string rest;
    char buf[512];
    while (::recv(bad.get(), buf, sizeof buf, 0) > 0) {}
    std::printf("garbage: %s, then %s\n", status.substr(0, status.find('\r')).c_str(), read_outcome(bad.get()).c_str());
    UniqueFd good = connect_tcp(host, port);
    if (!good || !send_all(good.get(), "GET http://127.0.0.1:" + std::to_string(web_port) +
                                           "/ HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(web_port) + "\r\n\r\n"))
        return fail("good request");
    const std::string answer = read_line(good.get()).value_or("(nothing)");
    std::printf("served while one stalls: %s\n", answer.size() > 12 ? answer.substr(9, 3).c_str() : answer.c_str());
    return 0;
}

int run_client(const std::string& spec)
{
    std::istringstream in(spec);
    std::string mode, host;
    unsigned port = 0;
    in >> mode >> host >> port;
    const auto p = static_cast<uint16_t>(port);
    uint64_t a = 0, b = 0;
    in >> a >> b;
    if (mode == "echo")
        return std::printf("echo: %s\n", echo_once(host, p, "hello") ? "ok" : "failed"), 0;
    if (mode == "download")
        return client_download(host, p, a, b);
    if (mode == "slowdownload")
        return client_slow_download(host, p, a, b);
    if (mode == "upload")
        return client_upload(host, p, a, b);
    if (mode == "halfclose")
        return client_half_close(host, p);
    if (mode == "serverfirst")
        return client_server_first(host, p);
    if (mode == "reset")
        return client_reset(host, p);
    if (mode == "uploadclosed")
        return client_upload_closed(host, p, a);
    if (mode == "many")
        return client_many(host, p, a);
    if (mode == "hold")
        return client_hold(host, p, a);
    if (mode == "proxydown")
        return client_proxy_down(host, p);
    if (mode == "egressbad")
        return client_egress_bad(host, p, static_cast<uint16_t>(a));
    std::printf("unknown mode %s\n", mode.c_str());
    return 2;
}

[[maybe_unused]] const bool kRelayClient = helper_mode(kHelperEnv, run_client);

}  // namespace relay_client
}  // namespace
}  // namespace cocoon::test
