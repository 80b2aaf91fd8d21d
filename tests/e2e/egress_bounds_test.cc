// e2e: --egress against a hostile sandbox (issue 22): a flood of refused requests with long
// names, a log reader that stalls, idle connections at the fd limit, a Host header naming another
// site, pipelined requests, and a name that resolves to the host's own address. Each negative
// has a control that shows the test can see the failure. Runs as root and unprivileged.
#include <gtest/gtest.h>

#include "tests/e2e/egress_bounds.h"

namespace cocoon::test {
namespace {

using namespace egress_bounds;

// ---- Tests --------------------------------------------------------------------------------------

// A /proc/PID/status field in kB.
uint64_t status_kb(pid_t pid, const std::string& field)
{
    std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/status"));
    for (std::string line; std::getline(in, line);)
        if (line.rfind(field + ":", 0) == 0)
            return std::strtoull(line.c_str() + field.size() + 1, nullptr, 10);
    return 0;
}

size_t open_fds(pid_t pid)
{
    size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
        ++n;
    return n;
}

class EgressBounds : public ::testing::Test {
protected:
    std::vector<std::string> sandbox(const std::vector<std::string>& allow, const std::string& spec,
                                     const std::vector<std::string>& extra = {}) const
    {
        std::vector<std::string> out =
            args({minimal_root(), {"--ro-bind",     "/etc",     "/etc",      "--unshare-all", "--proc",       "/proc",
                                   "--dev",         "/dev",     "--ro-bind", m_helper,        "/helper",      "--bind",
                                   m_shared.path(), kShared,    "--egress",  kEgressPortText, "--egress-log", "3",
                                   "--setenv",      kClientEnv, spec}});
        for (const std::string& pattern : allow)
            out.insert(out.end(), {"--egress-allow", pattern});
        return args({out, extra, {"/helper"}});
    }
    // cocoon in the foreground, its --egress-log (fd 3) the file m_log.
    Result run_logged(const std::vector<std::string>& options) const
    {
        std::string script = "exec 3>'" + m_log + "'; exec '" + cocoon_bin() + "'";
        for (const std::string& word : options) {
            std::string quoted;
            for (char c : word)
                quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
            script += " '" + quoted + "'";
        }
        return run({"/bin/sh", "-c", script}, "", 20000);
    }
    bool wait_ready(const std::string& name) const { return wait_for(m_shared / (name + ".ready")); }
    void go(const std::string& name) const { write_file(m_shared / (name + ".go"), ""); }

    // cocoon in the background, its --egress-log (fd 3) the file m_log.
    std::unique_ptr<Background> start(const std::vector<std::string>& options, std::optional<rlim_t> nofile = {})
    {
        UniqueFd log(::open(m_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        return std::make_unique<Background>(options, m_dir.path(), nofile, log.get(), true);
    }

    TempDir m_dir;
    TempDir m_shared;
    const std::string m_log = m_dir / "egress.log";
    const std::string m_helper = self_exe();
};

// Security: 6,000 refused requests with unique 16,000-byte names (issue 22: 20,000 took the
// monitor to 1.5 GiB, the summary to 322 MB) leave the monitor and the relay worker under 64 MiB and the summary
// under 1 MiB, with every byte of the log printable ASCII (valid UTF-8 JSON). Control: the flood
// landed (6,000 answers of 400, all tallied), and a name of 0x80-0xff bytes was logged escaped.
TEST_F(EgressBounds, ARefusedRequestFloodStaysSmall)
{
    raise_nofile();
    constexpr size_t kFlood = 6000;
    auto cocoon = start(sandbox({}, "flood " + std::to_string(kFlood)));
    ASSERT_TRUE(wait_ready("flooded")) << read_file(m_dir / "cocoon.out") << cocoon->err();
    // The flood lands in the relay worker (relay/worker.h), the monitor only serves it.
    const pid_t worker = test::relay_worker(cocoon->pid());
    ASSERT_GT(worker, 0);
    const uint64_t peak_kb = status_kb(cocoon->pid(), "VmHWM"), worker_peak_kb = status_kb(worker, "VmHWM");
    go("flooded");
    ASSERT_EQ(cocoon->wait(20000), 0) << cocoon->err();
    std::printf("peak RSS after %zu refused 16 KB names: monitor %llu KiB, worker %llu KiB\n", kFlood,
                static_cast<unsigned long long>(peak_kb), static_cast<unsigned long long>(worker_peak_kb));
    EXPECT_GT(peak_kb, 0U);
    EXPECT_GT(worker_peak_kb, 0U);
#if defined(COCOON_SANITIZED)
    // ASan's shadow memory and quarantine hold every freed byte for a while (370 MiB measured in
    // CI): the bound is for the build users run; this build checks the rest of the test.
    EXPECT_LT(peak_kb, 1024U * 1024) << "monitor peak RSS";
    EXPECT_LT(worker_peak_kb, 1024U * 1024) << "worker peak RSS";
#else
    EXPECT_LT(peak_kb, 64U * 1024) << "monitor peak RSS";
    EXPECT_LT(worker_peak_kb, 64U * 1024) << "worker peak RSS";
#endif
    EXPECT_EQ(cocoon->out(), "400 for 6000 of 6000; high bytes: HTTP/1.1 400 Bad Request\n");
    const std::string log = read_file(m_log);
    const std::vector<std::string> log_lines = lines(log);
    ASSERT_FALSE(log_lines.empty());
    const std::string& summary = log_lines.back();
    EXPECT_LT(summary.size(), size_t{1} << 20);
    EXPECT_TRUE(contains(summary, "{ \"summary\": [ { \"host\": \"(malformed)\", \"port\": 0, \"connections\": 0, "
                                  "\"refused\": 6001"))
        << summary.substr(0, 300);
    EXPECT_TRUE(contains(summary, "\"dropped\": 0")) << summary;
    EXPECT_TRUE(contains(log, "caf\\u00c3\\u00a9\\u0080\\u00ff.example")) << "the high bytes, escaped";
    for (char c : log)
        ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "a raw byte " << static_cast<int>(c) << " in the log";
}

// Whether the pipe (or FIFO) read at `read_end` has no free slot: poll says a write end of it is
// not writable, so the relay worker, which writes the log only on POLLOUT (it has no /proc to
// reopen the fd through: relay/egress_log.h), cannot write another byte. (How many bytes a full
// pipe holds depends on how the lines fell into its pages: it is no measure of fullness.)
bool pipe_is_full(int read_end)
{
    UniqueFd writer(::open(("/proc/self/fd/" + std::to_string(read_end)).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (!writer)
        return false;
    pollfd p{writer.get(), POLLOUT, 0};
    return ::poll(&p, 1, 0) == 0;
}

// Security: an --egress-log pipe nobody reads (full after some 300 lines) does not hold up the
// stop path: SIGTERM with --kill-after 1 ends cocoon (137) within 5 s. Control: the sandbox made
// 2,000 refusals (each a line), far more than the pipe takes, and the pipe was full before the
// SIGTERM.
TEST_F(EgressBounds, AStalledLogReaderDoesNotDelayKillAfter)
{
    int ends[2];
    ASSERT_EQ(::pipe2(ends, O_CLOEXEC), 0);
    UniqueFd unread(ends[0]), writer(ends[1]);
    Background cocoon(sandbox({}, "refused 2000", {"--kill-after", "1"}), m_dir.path(), {}, writer.get());
    writer.reset();
    ASSERT_TRUE(wait_ready("refused")) << cocoon.out() << cocoon.err();
    EXPECT_EQ(cocoon.out(), "403 for 2000 of 2000\n");
    EXPECT_TRUE(pipe_is_full(unread.get())) << "the pipe has room: the test did not stall the log";
    const auto sent = Clock::now();
    ASSERT_EQ(::kill(cocoon.pid(), SIGTERM), 0);
    const std::optional<int> code = cocoon.wait(10000);
    const long long took = ms_since(sent);
    EXPECT_EQ(code, 137) << cocoon.err();
    EXPECT_LT(took, 5000);
    // The caller's end of the pipe is as it was: blocking.
    EXPECT_EQ(::fcntl(unread.get(), F_GETFL) & O_NONBLOCK, 0);
}

// Security: the same stalled log does not hold up --die-with-parent: cocoon's parent (a shell)
// is killed while the log pipe is full, and cocoon and its sandbox are gone within 5 s. Control:
// the pipe was full and cocoon was running when the parent died.
TEST_F(EgressBounds, AStalledLogReaderDoesNotDelayDieWithParent)
{
    const std::string fifo = m_dir / "log.fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    UniqueFd unread(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    ASSERT_TRUE(unread);
    std::string script = "exec 3>'" + fifo + "'; '" + cocoon_bin() + "'";
    for (const std::string& word : sandbox({}, "refused 2000", {"--die-with-parent"})) {
        std::string quoted;
        for (char c : word)
            quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
        script += " '" + quoted + "'";
    }
    script += " & echo $! > '" + (m_dir / "cocoon.pid") + "'; wait";
    const pid_t parent = start_logged({"/bin/sh", "-c", script}, m_dir / "parent.out");
    ASSERT_TRUE(wait_ready("refused")) << read_file(m_dir / "parent.out");
    EXPECT_TRUE(pipe_is_full(unread.get())) << "the FIFO has room: the test did not stall the log";
    const pid_t cocoon_pid = static_cast<pid_t>(std::stol(read_file(m_dir / "cocoon.pid")));
    ASSERT_EQ(::kill(cocoon_pid, 0), 0) << "cocoon runs";
    const auto sent = Clock::now();
    ASSERT_EQ(::kill(parent, SIGKILL), 0);
    wait_exit(parent);
    // cocoon is the shell's child, so a zombie of init's once it ends: gone from /proc/PID/stat's
    // running states.
    auto running = [&] {
        const std::string stat = read_file("/proc/" + std::to_string(cocoon_pid) + "/stat");
        const size_t close = stat.rfind(')');
        return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
    };
    while (running() && ms_since(sent) < 10000)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long long took = ms_since(sent);
    EXPECT_FALSE(running()) << "cocoon outlived its parent";
    EXPECT_LT(took, 5000);
}

// Security: under a 256-fd limit, 2,000 idle connections to --egress cost the monitor under 20%
// of a CPU (issue 22: the listener spun on EMFILE at 97%), and --egress and --relay work again
// once they close. Control: the monitor held as many handshakes as its fd budget allows
// meanwhile (on main it accepted until EMFILE, and spun there).
TEST_F(EgressBounds, IdleConnectionsAtTheFdLimitDoNotSpinTheMonitor)
{
    raise_nofile();
    Target egress_target(Target::OnTcp{});
    Target relay_target(m_dir / "relay.sock");
    const std::string to = "127.0.0.1:" + std::to_string(egress_target.port());
    auto cocoon = start(sandbox({to}, "idle 2000 " + std::to_string(egress_target.port()),
                                {"--relay", kRelayPortText, m_dir / "relay.sock"}),
                        256);
    ASSERT_TRUE(wait_ready("held")) << cocoon->out() << cocoon->err();
    // The handshakes it accepts fill its budget within a 250 ms tick or two.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // The monitor and its relay worker (relay/worker.h), which holds the connections.
    const pid_t pid = cocoon->pid();
    const pid_t worker = test::relay_worker(pid);
    ASSERT_GT(worker, 0);
    const uint64_t before = cpu_ticks(pid), worker_before = cpu_ticks(worker);
    const auto start_time = Clock::now();
    size_t fds = 0;
    for (int i = 0; i < 30; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        fds = std::max(fds, open_fds(worker));
    }
    const double seconds = static_cast<double>(ms_since(start_time)) / 1000.0;
    const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
    const double share = static_cast<double>(cpu_ticks(pid) - before) / tick / seconds;
    const double worker_share = static_cast<double>(cpu_ticks(worker) - worker_before) / tick / seconds;
    std::printf("2000 idle egress connections at 256 fds: monitor %.1f%%, worker %.1f%% of a CPU, %zu fds open\n",
                share * 100, worker_share * 100, fds);
    EXPECT_LT(share, 0.20);
    EXPECT_LT(worker_share, 0.20);
    if (fds > 0) {  // the worker is not dumpable: its /proc/PID/fd is root's to read
        // At least one fd per handshake its budget allows (ns/monitor/monitor.cc's reserve of 16).
        const size_t budget = cocoon::relay::Relay::connections_within(256, 16, cocoon::relay::RelayOptions{});
        EXPECT_GE(fds, budget) << "the worker held few handshakes: the test did not test the limit";
        EXPECT_LE(fds, 256U);
    }
    go("held");
    ASSERT_EQ(cocoon->wait(30000), 0) << cocoon->err();
    EXPECT_EQ(cocoon->out(), "after: egress ok, relay ok\n") << cocoon->err();
}

// Security: plain HTTP's Host header must name the URI's authority (an allowed address asked for
// another site is a 400, and the origin sees nothing). Control: the same request with a matching
// Host is served.
TEST_F(EgressBounds, AHostHeaderNamingAnotherSiteIsA400)
{
    HttpServer web("page\n");
    const std::string authority = "127.0.0.1:" + std::to_string(web.port());
    for (const auto& [host, expected] :
         {std::pair<std::string, std::string>{"other.example", "HTTP/1.1 400 Bad Request"},
          {authority, "HTTP/1.1 200 OK"}}) {
        Result r = run_logged(
            sandbox({authority}, "raw GET http://" + authority + "/page HTTP/1.1\\r\\nHost: " + host + "\\r\\n\\r\\n"));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, expected + "\n") << host;
    }
    EXPECT_EQ(web.requests(), std::vector<std::string>{"GET /page host=" + authority});
}

// An origin that would serve pipelined requests: it answers the first head, then records every
// byte the connection brings for 500 ms.
class RecordingOrigin {
public:
    RecordingOrigin() : m_server([this](int fd) { serve(fd); }) { m_port = m_server.listen_tcp(); }
    uint16_t port() const { return m_port; }
    std::string received()
    {
        std::lock_guard lock(m_mutex);
        return m_received;
    }

private:
    void serve(int fd)
    {
        std::string got;
        bool answered = false;
        const auto deadline = Clock::now() + std::chrono::milliseconds(500);
        while (Clock::now() < deadline) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0)
                continue;
            char buf[4096];
            ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n <= 0)
                break;
            got.append(buf, static_cast<size_t>(n));
            if (!answered && got.find("\r\n\r\n") != std::string::npos) {
                send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
                answered = true;
            }
        }
        std::lock_guard lock(m_mutex);
        m_received += got;
    }
    std::mutex m_mutex;
    std::string m_received;
    uint16_t m_port = 0;
    ThreadServer m_server;
};

// Security: one request per connection: a request pipelined behind the first (to another site)
// never reaches the origin. Control: the same two requests through a CONNECT tunnel, which
// carries whatever the client sends, do reach it: the origin would have seen the second.
TEST_F(EgressBounds, APipelinedRequestNeverReachesTheOrigin)
{
    RecordingOrigin origin;
    const std::string authority = "127.0.0.1:" + std::to_string(origin.port());
    const std::string second = "GET /second HTTP/1.1\\r\\nHost: other.example\\r\\n\\r\\n";
    Result plain =
        run_logged(sandbox({authority}, "raw POST http://" + authority + "/first HTTP/1.1\\r\\nHost: " + authority +
                                            "\\r\\nContent-Length: 4\\r\\n\\r\\nbody" + second));
    EXPECT_EQ(plain.code, 0) << plain.err;
    EXPECT_EQ(plain.out, "HTTP/1.1 200 OK\n") << plain.err;
    std::string got = origin.received();
    EXPECT_TRUE(contains(got, "POST /first HTTP/1.1\r\n")) << got;
    EXPECT_TRUE(contains(got, "Connection: close\r\n")) << got;
    EXPECT_TRUE(got.size() >= 4 && got.substr(got.size() - 4) == "body") << got;
    EXPECT_FALSE(contains(got, "second")) << got;

    Result tunnel = run_logged(
        sandbox({authority}, "raw CONNECT " + authority +
                                 " HTTP/1.1\\r\\n\\r\\nGET /first HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" + second));
    EXPECT_EQ(tunnel.code, 0) << tunnel.err;
    EXPECT_EQ(tunnel.out, "HTTP/1.1 200 Connection established\n") << tunnel.err;
    EXPECT_TRUE(contains(origin.received(), "GET /second HTTP/1.1")) << origin.received();
}

// Security: a name that resolves to an address of the host's own interfaces is refused even when
// the address is public. cocoon runs in a network namespace of its own whose loopback also has
// 198.51.100.7 (a public-class address), with /etc/hosts naming own.test and other.test. Controls:
// a name for an address the host does not have is let through (a 502: nothing listens), and so is
// own.test once its address is listed.
TEST_F(EgressBounds, ANameForTheHostsOwnAddressIsRefused)
{
    if (::access("/usr/bin/unshare", X_OK) != 0 || ::access("/usr/sbin/ip", X_OK) != 0)
        GTEST_SKIP() << "needs /usr/bin/unshare and /usr/sbin/ip";
    write_file(m_dir / "hosts", "127.0.0.1 localhost\n198.51.100.7 own.test\n198.51.100.8 other.test\n");
    struct Case {
        std::string target;
        std::vector<std::string> allow;
        std::string expected;
        std::string result;  // the log line's
    } cases[] = {
        {"own.test:8080", {"own.test:8080"}, "HTTP/1.1 403 Forbidden", "refused"},
        {"other.test:8080", {"other.test:8080"}, "HTTP/1.1 502 Bad Gateway", "unreachable"},
        {"own.test:8080", {"own.test:8080", "198.51.100.7:8080"}, "HTTP/1.1 502 Bad Gateway", "unreachable"},
    };
    for (const Case& c : cases) {
        std::string script = "ip link set lo up && ip addr add 198.51.100.7/32 dev lo && mount --bind '" +
                             (m_dir / "hosts") + "' /etc/hosts && exec '" + cocoon_bin() + "'";
        for (const std::string& word : sandbox(c.allow, "raw CONNECT " + c.target + " HTTP/1.1\\r\\n\\r\\n"))
            script += " '" + word + "'";
        script += " 3>'" + m_log + "'";
        Result r = run({"/usr/bin/unshare", "-r", "-n", "-m", "/bin/sh", "-c", script}, "", 20000);
        EXPECT_EQ(r.code, 0) << c.target << ": " << r.err;
        EXPECT_EQ(r.out, c.expected + "\n") << c.target << ": " << r.err;
        EXPECT_TRUE(contains(read_file(m_log), "\"result\": \"" + c.result + "\"")) << read_file(m_log);
        if (c.expected.find("403") != std::string::npos) {
            EXPECT_TRUE(contains(read_file(m_log),
                                 "own.test resolves to 198.51.100.7, an address of this host that is not on the "
                                 "allowlist"))
                << read_file(m_log);
        }
    }
}

}  // namespace
}  // namespace cocoon::test
