// --egress e2e tests: the allowlisting CONNECT and plain-HTTP proxy, against local servers.

#include <gtest/gtest.h>

#include "tests/e2e/relay_e2e.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

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

}  // namespace
}  // namespace cocoon::test
