// End-to-end checks of --relay and --proxy-env, run by the test process against host-side doubles;
// also the in-sandbox client, which this binary becomes when bound into a sandbox (a helper mode).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/e2e/helper_binary.h"
#include "tests/e2e/relay_support.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

constexpr uint16_t kPort = 3128;
const std::string kPortText = std::to_string(kPort);
constexpr const char* kHelperEnv = "COCOON_E2E_RELAY";
// The time 1 GiB down and 256 MiB up may take. The sanitizer build (-O0, ASan) makes the test's own
// pattern and hash loops several times slower; the relay moves the bytes in the kernel either way.
#if defined(__SANITIZE_ADDRESS__)
constexpr long long kTransferBudgetMs = 45000;
#else
constexpr long long kTransferBudgetMs = 15000;
#endif
// Where tests bind a host directory they share with the in-sandbox client.
constexpr const char* kShared = "/shared";

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

// Waits up to 10 s for a file to appear (true), polling every 5 ms.
bool wait_for_file(const std::string& path)
{
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!exists(path)) {
        if (Clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
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

// ---- Tests --------------------------------------------------------------------------------------

const std::vector<std::string> kProxyVars = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                             "ALL_PROXY",  "NO_PROXY",    "no_proxy",   "NODE_USE_ENV_PROXY"};

// The page the host's HTTP server serves: 2000 numbered lines.
std::string page()
{
    std::string body;
    for (int i = 0; i < 2000; ++i)
        body += "line " + std::to_string(i) + " of the page behind the cocoon relay\n";
    return body;
}

class Relay : public ::testing::Test {
protected:
    // A sandbox with its own network: minimal root, /etc for curl, /proc, /dev, the relay of
    // kPort to m_socket, and this binary at /helper.
    std::vector<std::string> sandbox(const std::vector<std::string>& extra = {}) const
    {
        return args({minimal_root(),
                     {"--ro-bind", "/etc", "/etc", "--unshare-all", "--proc", "/proc", "--dev", "/dev", "--relay",
                      kPortText, m_socket, "--ro-bind", m_helper, "/helper"},
                     extra});
    }

    // `/helper` in sandbox(extra), as client `spec` (e.g. "echo 127.0.0.1 3128").
    Result client(const std::string& spec, const std::vector<std::string>& extra = {}, int timeout_ms = 20000) const
    {
        return run(args({{cocoon_bin()}, sandbox(extra), {"--setenv", kHelperEnv, spec, "/helper"}}), "", timeout_ms);
    }

    std::string client_spec(const std::string& mode, const std::string& more = "") const
    {
        return mode + " 127.0.0.1 " + kPortText + (more.empty() ? "" : " " + more);
    }

    // Waits for the client's "NAME.ready" in m_shared; false if it never came.
    bool wait_ready(const std::string& name) const { return wait_for_file(m_shared / (name + ".ready")); }
    void go(const std::string& name) const { write_file(m_shared / (name + ".go"), ""); }

    TempDir m_dir;
    TempDir m_shared;
    const std::string m_socket = m_dir / "proxy.sock";
    const std::string m_helper = self_exe();
};

TEST_F(Relay, ProxyEnvNamesTheRelay)
{
    Target target(m_socket);
    Result r = run(args({{cocoon_bin()}, sandbox({"--proxy-env", kPortText}), {"env"}}));
    ASSERT_EQ(r.code, 0) << r.err;
    std::map<std::string, std::string> env;
    for (const std::string& line : lines(r.out))
        if (size_t eq = line.find('='); eq != std::string::npos)
            env[line.substr(0, eq)] = line.substr(eq + 1);
    const std::string url = "http://127.0.0.1:" + kPortText;
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"})
        EXPECT_EQ(env[name], url) << name;
    EXPECT_EQ(env["NO_PROXY"], "127.0.0.1,localhost,::1");
    EXPECT_EQ(env["no_proxy"], "127.0.0.1,localhost,::1");
    EXPECT_EQ(env["NODE_USE_ENV_PROXY"], "1");
}

TEST_F(Relay, CurlFetchesThroughTheProxy)
{
    HttpServer web(page());
    HttpProxy proxy(m_socket);
    const std::string base = "http://cocoon-test.invalid:" + std::to_string(web.port());
    const std::vector<std::string> curl = {"/usr/bin/curl", "-q", "-sS", "--fail", "--max-time", "10"};

    // Plain HTTP: curl sends the absolute-form request to the proxy.
    Result plain = run(args({{cocoon_bin()}, sandbox({"--proxy-env", kPortText}), curl, {base + "/plain"}}));
    EXPECT_EQ(plain.code, 0) << plain.err;
    EXPECT_TRUE(plain.out == page()) << "got " << plain.out.size() << " bytes, want " << page().size();

    // --proxytunnel: CONNECT, then the request inside the tunnel.
    Result tunnel =
        run(args({{cocoon_bin()}, sandbox({"--proxy-env", kPortText}), curl, {"--proxytunnel", base + "/tunnel"}}));
    EXPECT_EQ(tunnel.code, 0) << tunnel.err;
    EXPECT_TRUE(tunnel.out == page()) << "got " << tunnel.out.size() << " bytes, want " << page().size();

    const std::string authority = "cocoon-test.invalid:" + std::to_string(web.port());
    EXPECT_EQ(proxy.requests(), (std::vector<std::string>{"GET " + base + "/plain", "CONNECT " + authority}));
    EXPECT_EQ(web.requests(),
              (std::vector<std::string>{"GET /plain host=" + authority, "GET /tunnel host=" + authority}));
}

TEST_F(Relay, NoNetworkWithoutTheProxy)
{
    HttpServer web(page());
    HttpProxy proxy(m_socket);
    const std::string port = std::to_string(web.port());
    const std::vector<std::string> curl = {"/usr/bin/curl", "-q", "-sS", "--max-time", "10"};
    std::vector<std::string> no_env;
    for (const std::string& name : kProxyVars)
        no_env.insert(no_env.end(), {"--unsetenv", name});

    // The relay alone does not make curl use it: the name does not resolve, nothing is reachable.
    Result by_name = run(args({{cocoon_bin()}, sandbox(no_env), curl, {"http://cocoon-test.invalid:" + port + "/"}}));
    EXPECT_NE(by_name.code, 0) << by_name.out;
    // With the proxy variables, but going around them: the host's loopback is not the sandbox's.
    Result around = run(args({{cocoon_bin()},
                              sandbox({"--proxy-env", kPortText}),
                              curl,
                              {"--noproxy", "*", "http://127.0.0.1:" + port + "/"}}));
    EXPECT_NE(around.code, 0) << around.out;
    // NO_PROXY covers 127.0.0.1, so curl goes direct and fails in the same way.
    Result direct =
        run(args({{cocoon_bin()}, sandbox({"--proxy-env", kPortText}), curl, {"http://127.0.0.1:" + port + "/"}}));
    EXPECT_NE(direct.code, 0) << direct.out;

    EXPECT_EQ(proxy.requests(), std::vector<std::string>{});
    EXPECT_EQ(web.requests(), std::vector<std::string>{});
}

TEST_F(Relay, HostSocketIsNotVisibleInside)
{
    Target target(m_socket);
    // Neither the socket nor its directory exists inside, nor does the sandbox's network namespace
    // list the socket.
    std::string script;
    for (const std::string& path : {m_socket, m_dir.path()})
        script += "if test -e '" + path + "'; then echo 'visible " + path + "'; else echo hidden; fi\n";
    script += "grep -F -e '" + m_socket + "' /proc/net/unix || echo 'not in /proc/net/unix'\n";
    script += "exec /helper\n";
    Result r = run(args({{cocoon_bin()}, sandbox({"--setenv", kHelperEnv, client_spec("echo")}), sh(script)}));
    EXPECT_EQ(r.code, 0) << r.err;
    // ... and yet the relay reaches it.
    EXPECT_EQ(r.out, "hidden\nhidden\nnot in /proc/net/unix\necho: ok\n") << r.err;
}

// The agent can write the socket's directory (it is bound read-write) and swaps what is at the
// socket's path after start: a link to a host socket it cannot see, renamed over it, then another
// listening socket. Each time the relay still reaches the proxy it found at start, never the decoy;
// with --no-follow-sources or not.
TEST_F(Relay, ASwapOfTheSocketAfterStartChangesNothing)
{
    TempDir hidden;
    for (const bool no_follow : {false, true}) {
        SCOPED_TRACE(no_follow ? "--no-follow-sources" : "links followed");
        Target proxy(m_socket);
        Target unseen(hidden / "agent.sock");  // another socket of the caller's: an ssh-agent, say
        Target planted(m_dir / "decoy.sock");  // one the agent can rename
        const std::string dir = m_dir.path();
        const std::string script = "/helper && ln -s " + unseen.path() + " " + dir + "/link && mv -T " + dir +
                                   "/link " + m_socket + " && /helper && mv -T " + planted.path() + " " + m_socket +
                                   " && /helper && ls -l " + m_socket + " >&2";
        std::vector<std::string> options = args({no_caps(), {"--bind", dir, dir, "--setenv", kHelperEnv}});
        options.push_back(client_spec("echo"));
        if (no_follow)
            options.insert(options.begin(), "--no-follow-sources");
        Result r = run(args({{cocoon_bin()}, sandbox(options), sh(script)}));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "echo: ok\necho: ok\necho: ok\n") << r.err;
        EXPECT_TRUE(proxy.wait([](const TargetState& s) { return s.echoes == 3; }, 2000)) << proxy.state().echoes;
        EXPECT_EQ(unseen.state().echoes, 0);
        EXPECT_EQ(planted.state().echoes, 0);
        // The agent did swap them: the host's path names the planted socket now.
        struct stat at_path;
        ASSERT_EQ(::stat(m_socket.c_str(), &at_path), 0);
        EXPECT_TRUE(S_ISSOCK(at_path.st_mode));
        EXPECT_FALSE(exists(planted.path()));
    }
}

// Without --no-follow-sources a link in SOCKET is followed, once, at start (RelayBadInput has the
// refusal under it).
TEST_F(Relay, ALinkInTheSocketPathIsFollowedOnceWithoutNoFollowSources)
{
    Target proxy(m_socket);
    ASSERT_EQ(::symlink(m_socket.c_str(), (m_dir / "link.sock").c_str()), 0);
    ASSERT_EQ(::symlink(m_dir.path().c_str(), (m_dir / "dir").c_str()), 0);
    for (const std::string& path : {m_dir / "link.sock", m_dir / "dir/proxy.sock"}) {
        Result r = run(args({{cocoon_bin()},
                             minimal_root(),
                             {"--unshare-all", "--relay", kPortText, path, "--ro-bind", m_helper, "/helper"},
                             {"--setenv", kHelperEnv, client_spec("echo"), "/helper"}}));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "echo: ok\n") << r.err;
    }
    EXPECT_TRUE(proxy.wait([](const TargetState& s) { return s.echoes == 2; }, 2000)) << proxy.state().echoes;
}

TEST_F(Relay, LargeTransfersArriveIntact)
{
    Target target(m_socket);
    constexpr uint64_t kDown = 1024 * kMiB, kUp = 256 * kMiB;
    const std::string script = "COCOON_E2E_RELAY='" + client_spec("download", std::to_string(kDown) + " 42") +
                               "' /helper && COCOON_E2E_RELAY='" + client_spec("upload", std::to_string(kUp) + " 43") +
                               "' /helper";
    const auto start = Clock::now();
    Result r = run(args({{cocoon_bin()}, sandbox(), sh(script)}), "", 2 * kTransferBudgetMs);
    const long long elapsed = ms_since(start);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    std::printf("1 GiB down and 256 MiB up in %lld ms\n", elapsed);
    EXPECT_LT(elapsed, kTransferBudgetMs);

    const std::vector<std::string> out = lines(r.out);
    ASSERT_EQ(out.size(), 3u) << r.out;
    // Down: what the server sent is what the client got.
    ASSERT_TRUE(target.wait([](const TargetState& s) { return s.events.size() >= 2; }, 1000));
    const TargetState state = target.state();
    ASSERT_EQ(state.events[0].rfind("sent bytes=" + std::to_string(kDown) + " ", 0), 0u) << state.events[0];
    EXPECT_EQ(out[0], "got " + state.events[0].substr(5));
    // Up: what the client sent is what the server got (and said it got).
    ASSERT_EQ(out[1].rfind("sent bytes=" + std::to_string(kUp) + " ", 0), 0u) << out[1];
    EXPECT_EQ(state.events[1], "received " + out[1].substr(5));
    EXPECT_EQ(out[2], state.events[1]);
}

TEST_F(Relay, BackpressureStopsTheSender)
{
    Target target(m_socket);
    constexpr uint64_t kSize = 256 * kMiB;
    Background cocoon(args({sandbox({"--bind", m_shared.path(), kShared, "--setenv", kHelperEnv,
                                     client_spec("slowdownload", std::to_string(kSize) + " 5")}),
                            {"/helper"}}),
                      m_dir.path());
    // While the client reads nothing, the server's writes stall after what the socket buffers and
    // the relay's pipe hold: the relay does not read ahead without bound.
    ASSERT_TRUE(wait_ready("paused")) << cocoon.out() << cocoon.err();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const uint64_t first = target.state().download_sent;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const uint64_t second = target.state().download_sent;
    EXPECT_EQ(first, second) << "the server kept writing while nobody read";
    EXPECT_LT(second, 64 * kMiB);
    go("paused");
    // Then every byte arrives, in order.
    ASSERT_EQ(cocoon.wait(20000), 0) << cocoon.out() << cocoon.err();
    ASSERT_TRUE(target.wait([](const TargetState& s) { return !s.events.empty(); }, 1000));
    EXPECT_EQ(cocoon.out(), "got " + target.state().events[0].substr(5) + "\n");
    EXPECT_TRUE(contains(cocoon.out(), "bytes=" + std::to_string(kSize) + " ")) << cocoon.out();
}

TEST_F(Relay, HalfCloseIsPassedOnBothWays)
{
    Target target(m_socket);
    // Client first: it shuts its side down and still gets the reply written after that.
    Result r = client(client_spec("halfclose"));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const std::vector<std::string> out = lines(r.out);
    ASSERT_EQ(out.size(), 3u) << r.out;
    ASSERT_TRUE(target.wait([](const TargetState& s) { return s.events.size() >= 2; }, 1000));
    TargetState state = target.state();
    EXPECT_EQ(state.events[0], "halfclose got " + out[0].substr(5));
    EXPECT_EQ(out[1], "reply line: after your EOF I got " + out[0].substr(5));
    EXPECT_EQ(state.events[1], "halfclose " + out[2]);

    // Server first: the client reads to the server's EOF and can still send.
    Result s = client(client_spec("serverfirst"));
    ASSERT_EQ(s.code, 0) << s.out << s.err;
    EXPECT_EQ(s.out, "greeting: hello from the server\nthen eof\n");
    EXPECT_TRUE(target.wait([](const TargetState& st) { return st.events.size() >= 3; }, 1000));
    EXPECT_TRUE(target.has_event("serverfirst got sent after the server's EOF\n"));
}

TEST_F(Relay, ResetIsPassedOn)
{
    Target target(m_socket);
    Background cocoon(args({sandbox({"--bind", m_shared.path(), kShared, "--setenv", kHelperEnv, client_spec("reset")}),
                            {"/helper"}}),
                      m_dir.path());
    // The client reset its held connection; the server sees that connection end, while the
    // sandbox still runs.
    ASSERT_TRUE(wait_ready("client-reset")) << cocoon.out() << cocoon.err();
    const auto start = Clock::now();
    EXPECT_TRUE(target.wait([](const TargetState& s) { return s.hold_ended == 1; }, 1000))
        << "the server's side of a reset connection is still open after " << ms_since(start) << " ms";
    EXPECT_TRUE(cocoon.running());
    go("client-reset");
    EXPECT_EQ(cocoon.wait(10000), 0) << cocoon.err();

    // The server closed with bytes unread: the client sees a reset, not a clean end.
    const std::vector<std::string> out = lines(cocoon.out());
    ASSERT_EQ(out.size(), 2u) << cocoon.out() << cocoon.err();
    EXPECT_EQ(out[0].rfind("server reset: error Connection reset by peer after ", 0), 0u) << out[0];
    EXPECT_EQ(out[1], "client reset sent");
    EXPECT_TRUE(target.has_event("reset"));
}

// The proxy closes while the client uploads at full speed: the relay's next splice into the closed
// socket fails (and raises SIGPIPE, which the monitor must ignore). Only that connection ends.
TEST_F(Relay, ProxyClosingMidUploadEndsOnlyThatConnection)
{
    Target target(m_socket);
    for (int round = 0; round < 3; ++round) {
        Result r = run(args(
            {{cocoon_bin()}, sandbox({"--setenv", kHelperEnv, client_spec("uploadclosed", "8388608")}), {"/helper"}}));
        ASSERT_EQ(r.code, 0) << r.out << r.err;
        EXPECT_EQ(r.out, "upload ended: the send failed\nnext: ok\n") << r.err;
    }
    EXPECT_TRUE(target.has_event("closed after 8388608"));
}

// 1000 connections opened from inside, then a line echoed on each while all are open. cocoon runs
// with the soft RLIMIT_NOFILE `nofile`; the test's own server raises its limit.
void expect_thousand_connections(const std::vector<std::string>& options, const std::string& dir, rlim_t nofile)
{
    raise_nofile();
    Target target(dir + "/proxy.sock");
    const auto start = Clock::now();
    Background cocoon(args({options, {"/helper"}}), dir, nofile);
    const std::optional<int> code = cocoon.wait(30000);
    std::printf("1000 connections in %lld ms\n", ms_since(start));
    EXPECT_EQ(code, 0) << cocoon.err();
    EXPECT_EQ(cocoon.out(), "echoed 1000 of 1000\n") << cocoon.err();
    EXPECT_TRUE(target.wait([](const TargetState& s) { return s.echoes == 1000; }, 2000))
        << target.state().echoes << " echo connections finished";
}

TEST_F(Relay, ThousandConcurrentConnections)
{
    // 1024 is the usual default soft limit (the hard one is higher): cocoon must cope with it.
    expect_thousand_connections(sandbox({"--setenv", kHelperEnv, client_spec("many", "1000")}), m_dir.path(), 1024);
}

TEST_F(Relay, ThousandConcurrentConnectionsWithAmpleFds)
{
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    ASSERT_GE(lim.rlim_max, 4096u) << "the hard RLIMIT_NOFILE is too low for this test";
    expect_thousand_connections(sandbox({"--setenv", kHelperEnv, client_spec("many", "1000")}), m_dir.path(),
                                lim.rlim_max);
}

// A proxy whose listen backlog holds `backlog` connections and that accepts one every
// `pause_us`, echoing one line on each; `count` clients opened at once inside must all get
// through. connect() to the host socket fails with EAGAIN while the backlog is full, and the relay
// tries again while the client waits instead of dropping it.
void expect_burst_through_slow_proxy(const std::string& socket_path, const std::function<Result(size_t)>& clients,
                                     size_t count, int backlog, int pause_us)
{
    raise_nofile();
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
    ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener.get(), backlog), 0);
    std::atomic<bool> stop{false};
    std::atomic<int> served{0};
    // The accepted connections are echoed by a few threads made up front: a thread per
    // connection made the proxy itself the bottleneck where making a thread is slow (~1,000
    // accepts a second on a PVM guest, too few for 10,000 clients within the relay's 10 s).
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<int> accepted;
    bool closing = false;
    std::vector<std::thread> workers;
    for (int i = 0; i < 8; ++i)
        workers.emplace_back([&] {
            for (;;) {
                std::unique_lock lock(mutex);
                ready.wait(lock, [&] { return !accepted.empty() || closing; });
                if (accepted.empty())
                    return;
                UniqueFd conn(accepted.front());
                accepted.pop_front();
                lock.unlock();
                if (read_line(conn.get()) == "echo") {
                    if (auto line = read_line(conn.get()); line && send_all(conn.get(), *line + "\n"))
                        ++served;
                }
            }
        });
    std::thread acceptor([&] {
        while (!stop) {
            pollfd p{listener.get(), POLLIN, 0};
            if (::poll(&p, 1, 50) != 1)
                continue;
            int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            {
                std::lock_guard lock(mutex);
                accepted.push_back(fd);
            }
            ready.notify_one();
            std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
        }
    });
    const auto start = Clock::now();
    Result r = clients(count);
    stop = true;
    acceptor.join();
    {
        std::lock_guard lock(mutex);
        closing = true;
    }
    ready.notify_all();
    for (std::thread& t : workers)
        t.join();
    std::printf("%zu connections through a proxy with backlog %d in %lld ms\n", count, backlog, ms_since(start));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "echoed " + std::to_string(count) + " of " + std::to_string(count) + "\n") << r.err;
    EXPECT_EQ(served.load(), static_cast<int>(count));
    EXPECT_FALSE(contains(r.err, "connect")) << r.err;
}

TEST_F(Relay, ABurstWaitsForASlowProxyWithATinyBacklog)
{
    // Backlog 1, one accept every 2 ms: 300 clients.
    expect_burst_through_slow_proxy(
        m_socket, [&](size_t n) { return client(client_spec("many", std::to_string(n)), {}, 30000); }, 300, 1, 2000);
}

// As many concurrent connections as the fd limit allows (two fds each in cocoon; at most 10,000)
// through a proxy with a small backlog that accepts slowly.
TEST_F(Relay, TenThousandConcurrentConnectionsThroughASlowProxy)
{
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    const size_t count = std::min<size_t>(10000, (lim.rlim_max - 200) / 2);
    std::printf("the hard fd limit %llu allows %zu connections\n", static_cast<unsigned long long>(lim.rlim_max),
                count);
    ASSERT_GE(count, 1000U) << "the hard RLIMIT_NOFILE is too low for this test";
    expect_burst_through_slow_proxy(
        m_socket, [&](size_t n) { return client(client_spec("many", std::to_string(n)), {}, 60000); }, count, 16, 20);
}

TEST_F(Relay, ProxyDownClosesOnlyThatConnection)
{
    auto target = std::make_unique<Target>(m_socket);
    Background cocoon(
        args({sandbox({"--bind", m_shared.path(), kShared, "--setenv", kHelperEnv, client_spec("proxydown")}),
              {"/helper"}}),
        m_dir.path());
    // The listener closes: the socket file stays, connecting to it is refused.
    ASSERT_TRUE(wait_ready("closed")) << cocoon.out() << cocoon.err();
    target->server().close_listener();
    go("closed");
    // The file goes too.
    ASSERT_TRUE(wait_ready("removed")) << cocoon.out() << cocoon.err();
    ASSERT_EQ(::unlink(m_socket.c_str()), 0);
    go("removed");
    // A new proxy listens on the same path: not reached, since the relay keeps to the socket it
    // found at start (a proxy that keeps its listening socket across a restart is reached).
    ASSERT_TRUE(wait_ready("back")) << cocoon.out() << cocoon.err();
    target = std::make_unique<Target>(m_socket);
    go("back");
    ASSERT_EQ(cocoon.wait(10000), 0) << cocoon.out() << cocoon.err();

    const std::vector<std::string> out = lines(cocoon.out());
    ASSERT_EQ(out.size(), 6u) << cocoon.out();
    EXPECT_EQ(out[0], "first: ok");
    for (const std::string& line : {out[1], out[3]}) {
        // Reset at once (the relay's answer to a connection it cannot pass on), never left hanging.
        EXPECT_TRUE(contains(line, ": error Connection reset by peer after ")) << line;
        const size_t after = line.find(" after ");
        const long long ms = after == std::string::npos ? -1 : std::atoll(line.c_str() + after + 7);
        EXPECT_TRUE(ms >= 0 && ms < 1000) << line;
    }
    EXPECT_EQ(out[2], "burst: 20 of 20 reset");
    EXPECT_EQ(out[4], "kept: ok");
    EXPECT_EQ(out[5], "back: failed");
    EXPECT_EQ(target->state().echoes, 0);

    // The failures are reported on cocoon's stderr, and rate-limited: 23 of them in well under a
    // second make at most three lines.
    const std::vector<std::string> err = lines(cocoon.err());
    EXPECT_GE(err.size(), 1u);
    EXPECT_LE(err.size(), 3u) << cocoon.err();
    for (const std::string& line : err)
        EXPECT_EQ(line.rfind("cocoon: relay: 127.0.0.1:" + kPortText + " -> " + m_socket + ": ", 0), 0u) << line;
    EXPECT_TRUE(contains(cocoon.err(), "Connection refused")) << cocoon.err();
}

TEST_F(Relay, Ipv6Loopback)
{
    {
        Target target(m_socket);
        Result r = client("echo ::1 " + kPortText);
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "echo: ok\n") << r.err;
        Result big = client("download ::1 " + kPortText + " " + std::to_string(64 * kMiB) + " 9");
        ASSERT_EQ(big.code, 0) << big.out << big.err;
        ASSERT_TRUE(target.wait([](const TargetState& s) { return !s.events.empty(); }, 1000));
        EXPECT_EQ("got " + target.state().events[0].substr(5) + "\n", big.out);
    }
    HttpServer web(page());
    HttpProxy proxy(m_socket);
    Result curl =
        run(args({{cocoon_bin()},
                  sandbox(),
                  {"/usr/bin/curl", "-q", "-sS", "--fail", "--max-time", "10", "--proxy", "http://[::1]:" + kPortText,
                   "http://cocoon-test.invalid:" + std::to_string(web.port()) + "/v6"}}));
    EXPECT_EQ(curl.code, 0) << curl.err;
    EXPECT_TRUE(curl.out == page()) << "got " << curl.out.size() << " bytes";
}

TEST_F(Relay, EachPortGoesToItsSocket)
{
    Target first(m_socket);
    Target second(m_dir / "second.sock");
    const std::string script = "COCOON_E2E_RELAY='download 127.0.0.1 3128 1000 1' /helper && "
                               "COCOON_E2E_RELAY='download ::1 3129 2000 2' /helper";
    Result r = run(args({{cocoon_bin()}, sandbox({"--relay", "3129", second.path()}), sh(script)}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    ASSERT_TRUE(first.wait([](const TargetState& s) { return !s.events.empty(); }, 1000));
    ASSERT_TRUE(second.wait([](const TargetState& s) { return !s.events.empty(); }, 1000));
    EXPECT_EQ(first.state().events, std::vector<std::string>{"sent " + lines(r.out)[0].substr(4)});
    EXPECT_EQ(second.state().events, std::vector<std::string>{"sent " + lines(r.out)[1].substr(4)});
    EXPECT_TRUE(contains(lines(r.out)[0], "bytes=1000 ")) << r.out;
    EXPECT_TRUE(contains(lines(r.out)[1], "bytes=2000 ")) << r.out;
}

// The command leaves a daemon holding five relayed connections; when cocoon exits, the server's
// end of every one of them is closed within a second.
void expect_closed_at_exit(const std::vector<std::string>& options, Target& target, const std::string& dir,
                           const std::string& marker)
{
    Background cocoon(args({options, {"--setenv", kHelperEnv, "hold 127.0.0.1 3128 5", "/helper", marker}}), dir);
    const std::optional<int> code = cocoon.wait(10000);
    const auto exited = Clock::now();
    EXPECT_EQ(code, 0) << cocoon.out() << cocoon.err();
    EXPECT_EQ(cocoon.out(), "holding 5\n") << cocoon.err();
    EXPECT_TRUE(target.wait([](const TargetState& s) { return s.hold_ended == 5; }, 1000))
        << target.state().hold_ended << " of 5 closed " << ms_since(exited) << " ms after cocoon exited";
}

TEST_F(Relay, ConnectionsCloseWhenTheSandboxEnds)
{
    Target target(m_socket);
    const std::string marker = unique_marker("cocoon-relay-hold");
    expect_closed_at_exit(sandbox(), target, m_dir.path(), marker);
    EXPECT_EQ(processes_with(marker), std::vector<pid_t>{});
}

TEST_F(Relay, ConnectionsCloseWhenCocoonExitsWithoutPidNamespace)
{
    // Without a PID namespace the daemon outlives the command and cocoon: only the relay can close
    // the connections it still holds.
    Target target(m_socket);
    const std::string marker = unique_marker("cocoon-relay-hold");
    const std::vector<std::string> options =
        args({minimal_root(),
              {"--unshare-net", "--dev", "/dev", "--relay", kPortText, m_socket, "--ro-bind", m_helper, "/helper"}});
    expect_closed_at_exit(options, target, m_dir.path(), marker);
    const std::vector<pid_t> daemons = processes_with(marker);
    EXPECT_EQ(daemons.size(), 1u) << "the daemon should still run";
    for (pid_t pid : daemons)
        ::kill(pid, SIGKILL);
}

// ---- Refused command lines ----------------------------------------------------------------------

class RelayBadInput : public ::testing::Test {
protected:
    void TearDown() override { m_host.expect_unchanged(); }

    // Refused at once (within 5 s), and no process of the sandbox still running (the command would
    // sleep for 10 s).
    void expect_refused_at_once(const std::vector<std::string>& options, const std::vector<std::string>& named)
    {
        const std::string& marker = m_host.marker();
        Background cocoon(args({minimal_root(), options, {"sh", "-c", "sleep 10; :", marker}}), m_dir.path());
        const std::optional<int> code = cocoon.wait(5000);
        const std::vector<pid_t> left = processes_with(marker);
        EXPECT_EQ(left, std::vector<pid_t>{}) << "the sandbox runs on after cocoon exited: " << cocoon.err();
        // Clean up, so that TearDown reports only what this did not see.
        for (pid_t pid : left)
            ::kill(pid, SIGKILL);
        const auto deadline = Clock::now() + std::chrono::seconds(2);
        while (!processes_with(marker).empty() && Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        expect_refused(Result{code.value_or(-1), cocoon.out(), cocoon.err()}, named);
    }

    TempDir m_dir;
    const std::string m_socket = m_dir / "proxy.sock";
    const HostSnapshot m_host{"cocoon-relay-bad-input"};
};

TEST_F(RelayBadInput, MissingSocket)
{
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_socket}, {"--relay", m_socket});
}

TEST_F(RelayBadInput, RelativeSocket)
{
    // Even when it names a socket from the current directory.
    Target target(m_socket);
    const std::string cwd = std::filesystem::current_path();
    std::filesystem::current_path(m_dir.path());
    expect_refused_at_once({"--unshare-all", "--relay", "3128", "proxy.sock"}, {"--relay", "proxy.sock", "absolute"});
    std::filesystem::current_path(cwd);
}

TEST_F(RelayBadInput, NotASocket)
{
    write_file(m_dir / "file", "not a socket");
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_dir / "file"}, {"--relay", m_dir / "file", "socket"});
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_dir.path()}, {"--relay", m_dir.path(), "socket"});
}

TEST_F(RelayBadInput, ALinkUnderNoFollowSources)
{
    // A link at the socket itself, and one in a directory on the way.
    Target target(m_socket);
    ASSERT_EQ(::symlink(m_socket.c_str(), (m_dir / "link.sock").c_str()), 0);
    ASSERT_EQ(::symlink(m_dir.path().c_str(), (m_dir / "dir").c_str()), 0);
    for (const std::string& path : {m_dir / "link.sock", m_dir / "dir/proxy.sock"})
        expect_refused_at_once({"--no-follow-sources", "--unshare-all", "--relay", "3128", path},
                               {"--relay 3128 " + path, "symbolic link", "--no-follow-sources"});
}

TEST_F(RelayBadInput, SamePortTwice)
{
    Target target(m_socket);
    Target other(m_dir / "other.sock");
    expect_refused_at_once({"--unshare-all", "--relay", "3128", m_socket, "--relay", "3128", other.path()},
                           {"--relay", "3128"});
}

TEST_F(RelayBadInput, NeedsItsOwnNetwork)
{
    Target target(m_socket);
    expect_refused_at_once({"--unshare-pid", "--relay", "3128", m_socket}, {"--relay", "--unshare-net"});
    expect_refused_at_once({"--unshare-all", "--share-net", "--relay", "3128", m_socket}, {"--relay", "--unshare-net"});
}

TEST_F(RelayBadInput, BadPort)
{
    Target target(m_socket);
    for (const char* port : {"0", "65536", "http", "-1"})
        expect_refused_at_once({"--unshare-all", "--relay", port, m_socket}, {"--relay", port});
    expect_refused_at_once({"--unshare-all", "--proxy-env", "0"}, {"--proxy-env"});
}

// A socket whose absolute path does not fit in sun_path: it is reached all the same, since the
// relay connects through its pinned fd's short /proc path.
TEST_F(Relay, ASocketPathLongerThanSunPath)
{
    const std::string deep = m_dir / std::string(100, 'd');
    ASSERT_EQ(::mkdir(deep.c_str(), 0755), 0);
    UniqueFd dir(::open(deep.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir.valid());
    Target target("/proc/self/fd/" + std::to_string(dir.get()) + "/proxy.sock");
    const std::string long_path = deep + "/proxy.sock";
    ASSERT_GT(long_path.size(), sizeof(sockaddr_un::sun_path));
    ASSERT_TRUE(exists(long_path));
    Result r = run(args({{cocoon_bin()},
                         minimal_root(),
                         {"--unshare-all", "--relay", kPortText, long_path, "--ro-bind", m_helper, "/helper"},
                         {"--setenv", kHelperEnv, client_spec("echo"), "/helper"}}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "echo: ok\n") << r.err;
}

// ---- --egress ------------------------------------------------------------------------------------

// openssl s_server on 127.0.0.1 with a certificate made for localhost and 127.0.0.1, answering
// every request with a status page (-www). Skips (with the reason) where openssl is missing.
class TlsServer {
public:
    explicit TlsServer(const std::string& dir) : m_cert(dir + "/cert.pem")
    {
        const std::string key = dir + "/key.pem";
        Result made =
            run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", m_cert,
                 "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"});
        if (made.code != 0)
            throw std::runtime_error("openssl req (" + std::to_string(made.code) + "): " + made.err);
        int ends[2];
        if (::pipe2(ends, O_CLOEXEC) < 0)
            throw std::runtime_error("pipe2");
        UniqueFd read_end(ends[0]), write_end(ends[1]);
        std::vector<std::string> argv = {
            "/usr/bin/openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", m_cert, "-key", key, "-www"};
        std::vector<char*> raw;
        for (std::string& a : argv)
            raw.push_back(a.data());
        raw.push_back(nullptr);
        m_pid = ::fork();
        if (m_pid == 0) {
            if (::dup2(write_end.get(), 1) < 0)
                ::_exit(127);
            ::execv(raw[0], raw.data());
            ::_exit(127);
        }
        write_end.reset();
        // "ACCEPT 127.0.0.1:PORT" names the port it got (after a line about DH parameters).
        std::string out;
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        size_t accept_at;
        while ((accept_at = out.find("ACCEPT ")) == std::string::npos ||
               out.find('\n', accept_at) == std::string::npos) {
            pollfd pfd{read_end.get(), POLLIN, 0};
            char buf[256];
            ssize_t n = ::poll(&pfd, 1, 100) == 1 ? ::read(read_end.get(), buf, sizeof buf) : 0;
            if (n < 0 || (pfd.revents & POLLHUP && n == 0) || Clock::now() >= deadline) {
                ::kill(m_pid, SIGKILL);
                ::waitpid(m_pid, nullptr, 0);
                throw std::runtime_error("openssl s_server did not start: " + out);
            }
            out.append(buf, static_cast<size_t>(std::max<ssize_t>(n, 0)));
        }
        const std::string line = out.substr(accept_at, out.find('\n', accept_at) - accept_at);
        m_port = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
        m_out = std::move(read_end);
    }
    ~TlsServer()
    {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }
    TlsServer(const TlsServer&) = delete;
    TlsServer& operator=(const TlsServer&) = delete;

    uint16_t port() const { return m_port; }
    const std::string& cert() const { return m_cert; }

private:
    std::string m_cert;
    pid_t m_pid = -1;
    uint16_t m_port = 0;
    UniqueFd m_out;
};

class Egress : public ::testing::Test {
protected:
    // A sandbox with its own network, /etc for curl and name resolution, the test's directory
    // read-only (certificates), this binary at /helper, and --egress on kPort.
    std::vector<std::string> sandbox(const std::vector<std::string>& allow, const std::vector<std::string>& extra = {})
    {
        std::vector<std::string> out = args({minimal_root(),
                                             {"--ro-bind", "/etc", "/etc", "--unshare-all", "--proc", "/proc", "--dev",
                                              "/dev", "--ro-bind", m_dir.path(), m_dir.path(), "--ro-bind", m_helper,
                                              "/helper", "--egress", kPortText, "--egress-log", "3"}});
        for (const std::string& pattern : allow)
            out.insert(out.end(), {"--egress-allow", pattern});
        return args({out, extra});
    }

    // cocoon with `options` and `command`, its --egress-log (fd 3) written to m_log.
    Result run_logged(const std::vector<std::string>& options, const std::vector<std::string>& command,
                      int timeout_ms = 20000)
    {
        std::string script = "exec 3>'" + m_log + "'; exec";
        for (const std::string& word : args({{cocoon_bin()}, options, command})) {
            std::string quoted = "'";
            for (char c : word)
                quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
            script += " " + quoted + "'";
        }
        return run({"/bin/sh", "-c", script}, "", timeout_ms);
    }

    std::vector<std::string> log_lines() const { return lines(read_file(m_log)); }

    TempDir m_dir;
    const std::string m_log = m_dir / "egress.log";
    const std::string m_helper = self_exe();
};

std::string join(const std::vector<std::string>& words)
{
    std::string out;
    for (const std::string& w : words)
        out += (out.empty() ? "" : " ") + ("'" + w + "'");
    return out;
}

const std::vector<std::string> kCurl = {
    "/usr/bin/curl", "-q", "-sS", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code} %{http_connect}\n"};

TEST_F(Egress, CurlReachesAnHttpsServerTheAllowlistNamesByNameAndByAddress)
{
    TlsServer tls(m_dir.path());
    const std::string port = std::to_string(tls.port());
    // Loopback is refused by default: the name and the address it resolves to are both listed.
    // (-x, not --proxy-env: its NO_PROXY keeps curl away from the proxy for localhost.)
    Result r = run_logged(sandbox({"localhost:" + port, "127.0.0.1:" + port}),
                          sh(join(kCurl) + " -x http://127.0.0.1:" + kPortText + " --cacert " + tls.cert() +
                             " https://localhost:" + port + "/; " + join(kCurl) + " -x http://127.0.0.1:" + kPortText +
                             " --cacert " + tls.cert() + " https://127.0.0.1:" + port + "/"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "200 200\n200 200\n") << r.err;
    std::vector<std::string> log = log_lines();
    ASSERT_EQ(log.size(), 3U) << read_file(m_log);
    EXPECT_TRUE(contains(log[0], "\"host\": \"localhost\", \"port\": " + port +
                                     ", \"address\": \"127.0.0.1\", "
                                     "\"result\": \"allowed\", \"allowed\": true"))
        << log[0];
    EXPECT_TRUE(contains(log[1], "\"host\": \"127.0.0.1\", \"port\": " + port)) << log[1];
    for (const std::string& line : {log[0], log[1]}) {
        // A TLS handshake and a page went through: bytes both ways, and a time.
        EXPECT_TRUE(std::regex_search(line, std::regex("\"bytes-up\": [1-9][0-9]{2,}, \"bytes-down\": [1-9][0-9]{3,}, "
                                                       "\"duration-ms\": [0-9]+ \\}$")))
            << line;
        EXPECT_TRUE(std::regex_search(line, std::regex("^\\{ \"time\": \"20[0-9]{2}-[0-9]{2}-[0-9]{2}T")));
    }
    EXPECT_TRUE(contains(log[2], "{ \"summary\": [ { \"host\": \"127.0.0.1\", \"port\": " + port +
                                     ", \"connections\": 1, \"refused\": 0"))
        << log[2];
    EXPECT_TRUE(contains(log[2], "{ \"host\": \"localhost\", \"port\": " + port + ", \"connections\": 1")) << log[2];
}

// Each refusal: a 403 with the reason, one log line saying why, and nothing reached.
TEST_F(Egress, WhatTheAllowlistDoesNotNameIsRefused)
{
    HttpServer web(page());
    const std::string port = std::to_string(web.port());
    const std::vector<std::string> allow = {"localhost:" + port, "*.example.com"};
    struct Case {
        std::string url, reason;
    } cases[] = {
        {"http://unlisted.test:" + port + "/", "unlisted.test port " + port + " is not on the allowlist"},
        {"http://127.0.0.1:" + port + "/", "the address 127.0.0.1 port " + port + " is not on the allowlist"},
        {"http://10.1.2.3/", "the address 10.1.2.3 port 80 is not on the allowlist"},
        {"http://localhost:" + port + "/", "localhost resolves to "},  // listed by name, not by address
        {"http://localhost:1/", "localhost port 1 is not on the allowlist"},
        {"http://www.example.com:8080/", "www.example.com port 8080 is not on the allowlist"},
    };
    for (const Case& c : cases) {
        Result r = run_logged(sandbox(allow), {"/usr/bin/curl", "-q", "-s", "--max-time", "10", "-x",
                                               "http://127.0.0.1:" + kPortText, "-w", "\n%{http_code}\n", c.url});
        EXPECT_EQ(r.code, 0) << c.url << ": " << r.err;
        EXPECT_TRUE(contains(r.out, c.reason)) << c.url << ": " << r.out;
        EXPECT_TRUE(contains(r.out, "\n403\n")) << c.url << ": " << r.out;
        std::vector<std::string> log = log_lines();
        ASSERT_EQ(log.size(), 2U) << read_file(m_log);
        EXPECT_TRUE(contains(log[0], "\"result\": \"refused\", \"allowed\": false, \"reason\": \"" + c.reason))
            << log[0];
        EXPECT_TRUE(contains(log[1], "\"connections\": 0, \"refused\": 1")) << log[1];
    }
    // CONNECT is refused the same way.
    Result tunnel = run_logged(
        sandbox(allow), sh(join(kCurl) + " -x http://127.0.0.1:" + kPortText + " https://unlisted.test/ || true"));
    EXPECT_EQ(tunnel.out, "000 403\n") << tunnel.err;
    EXPECT_EQ(web.requests(), std::vector<std::string>{});
}

TEST_F(Egress, PlainHttpIsForwardedInOriginForm)
{
    HttpServer web(page());
    const std::string port = std::to_string(web.port());
    Result r = run_logged(sandbox({"localhost:" + port, "127.0.0.1:" + port}),
                          {"/usr/bin/curl", "-q", "-sS", "--fail", "--max-time", "10", "-x",
                           "http://[::1]:" + kPortText, "http://localhost:" + port + "/page?x=1"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.out == page()) << r.out.size() << " bytes";
    EXPECT_EQ(web.requests(), std::vector<std::string>{"GET /page?x=1 host=localhost:" + port});
}

TEST_F(Egress, MalformedRequestsGetA400AndTheProxyGoesOn)
{
    HttpServer web(page());
    const std::string port = std::to_string(web.port());
    // A client that sends garbage, one that sends half a head and stalls, then a good request:
    // the good one is served while the stalled one waits.
    Result r = run_logged(
        sandbox({"127.0.0.1:" + port}, {"--setenv", kHelperEnv, "egressbad 127.0.0.1 " + kPortText + " " + port}),
        {"/helper"});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.out, "garbage: HTTP/1.1 400 Bad Request, then eof\nserved while one stalls: 200\n") << r.err;
    std::vector<std::string> log = log_lines();
    ASSERT_GE(log.size(), 3U) << read_file(m_log);
    EXPECT_TRUE(contains(log[0], "\"result\": \"refused\", \"allowed\": false, \"reason\": \"malformed request line\""))
        << log[0];
}

TEST_F(Egress, NodeReachesTheServerThroughIt)
{
    if (::access("/usr/bin/node", X_OK) != 0)
        GTEST_SKIP() << "no /usr/bin/node on this machine";
    TlsServer tls(m_dir.path());
    const std::string port = std::to_string(tls.port());
    // Node 24 reads the proxy variables itself with NODE_USE_ENV_PROXY=1 (which --proxy-env sets);
    // older Node (Debian's 20) does not, so the script tunnels with http.request CONNECT, as
    // agents' proxy agents do, and then speaks TLS over the tunnel.
    const std::string js = "const http=require('http'),tls=require('tls'),fs=require('fs');"
                           "const ca=fs.readFileSync('" +
                           tls.cert() +
                           "');"
                           "const major=+process.versions.node.split('.')[0];"
                           "if(major>=24){fetch('https://localhost:" +
                           port +
                           "/').then(r=>console.log('fetch',r.status))"
                           ".catch(e=>{console.log('error',e.cause&&e.cause.code);process.exit(1)});}"
                           "else{const req=http.request({host:'127.0.0.1',port:" +
                           kPortText +
                           ",method:'CONNECT',"
                           "path:'localhost:" +
                           port +
                           "'});req.on('connect',(res,sock)=>{"
                           "if(res.statusCode!==200){console.log('connect',res.statusCode);process.exit(1)}"
                           "const s=tls.connect({socket:sock,servername:'localhost',ca},()=>{"
                           "s.write('GET / HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n')});let d='';"
                           "s.on('data',c=>d+=c);s.on('end',()=>console.log('tunnel',d.split(' ')[1]))});"
                           "req.on('error',e=>{console.log('error',e.code);process.exit(1)});req.end();}";
    Result r = run_logged(sandbox({"localhost:" + port, "127.0.0.1:" + port}, {"--proxy-env", kPortText}),
                          {"/usr/bin/node", "-e", js});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_TRUE(r.out == "fetch 200\n" || r.out == "tunnel 200\n") << r.out << r.err;
    EXPECT_TRUE(contains(read_file(m_log), "\"host\": \"localhost\", \"port\": " + port)) << read_file(m_log);
}

TEST_F(Egress, AGibibyteArrivesIntact)
{
    Target target(Target::OnTcp{});
    const std::string to = "127.0.0.1:" + std::to_string(target.port());
    const std::string script = "COCOON_E2E_CONNECT=" + to + " COCOON_E2E_RELAY='download 127.0.0.1 " + kPortText + " " +
                               std::to_string(1024 * kMiB) + " 42' /helper && COCOON_E2E_CONNECT=" + to +
                               " COCOON_E2E_RELAY='upload 127.0.0.1 " + kPortText + " " + std::to_string(256 * kMiB) +
                               " 43' /helper";
    const auto start = Clock::now();
    Result r = run_logged(sandbox({to}), sh(script), 2 * kTransferBudgetMs);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    std::printf("1 GiB down and 256 MiB up through --egress in %lld ms\n", ms_since(start));
    const std::vector<std::string> out = lines(r.out);
    ASSERT_EQ(out.size(), 3U) << r.out;
    // Down: what the server sent is what the client got; up: what the client sent, the server got.
    ASSERT_TRUE(target.wait([](const TargetState& s) { return s.events.size() >= 2; }, 1000));
    const TargetState state = target.state();
    ASSERT_EQ(state.events[0].rfind("sent bytes=" + std::to_string(1024 * kMiB) + " ", 0), 0U) << state.events[0];
    EXPECT_EQ(out[0], "got " + state.events[0].substr(5));
    ASSERT_EQ(out[1].rfind("sent bytes=" + std::to_string(256 * kMiB) + " ", 0), 0U) << out[1];
    EXPECT_EQ(state.events[1], "received " + out[1].substr(5));
    // The log counts what went each way (the requests' few bytes on top).
    const std::string log = read_file(m_log);
    EXPECT_TRUE(std::regex_search(log, std::regex("\"bytes-down\": 10737418[0-9]{2},"))) << log;
    EXPECT_TRUE(std::regex_search(log, std::regex("\"bytes-up\": 2684354[0-9]{2},"))) << log;
}

TEST_F(Egress, ThousandConcurrentConnections)
{
    raise_nofile();
    Target target(Target::OnTcp{});
    const std::string to = "127.0.0.1:" + std::to_string(target.port());
    Result r = run_logged(sandbox({to}, {"--setenv", "COCOON_E2E_CONNECT", to, "--setenv", kHelperEnv,
                                         "many 127.0.0.1 " + kPortText + " 1000"}),
                          {"/helper"}, 60000);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "echoed 1000 of 1000\n") << r.err;
    EXPECT_TRUE(target.wait([](const TargetState& s) { return s.echoes == 1000; }, 5000))
        << target.state().echoes << " echo connections finished";
}

class EgressBadInput : public RelayBadInput {};

TEST_F(EgressBadInput, RefusedWithTheOptionNamed)
{
    expect_refused_at_once({"--unshare-pid", "--egress", "3128"}, {"--egress", "--unshare-net"});
    expect_refused_at_once({"--unshare-all", "--egress", "0"}, {"--egress", "0"});
    expect_refused_at_once({"--unshare-all", "--egress-allow", "a.b"}, {"--egress-allow", "--egress"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress-allow", "a b"}, {"--egress-allow", "a b"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress-allow", "::1"}, {"--egress-allow", "::1"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress", "3129"}, {"--egress", "twice"});
    expect_refused_at_once({"--unshare-all", "--egress-log", "1"}, {"--egress-log", "--egress"});
    expect_refused_at_once({"--unshare-all", "--egress", "3128", "--egress-log", "97"}, {"--egress-log", "97"});
}

}  // namespace
}  // namespace cocoon::test
