// Unit tests of the relay engine (relay/): loopback TCP relayed to Unix sockets in a temp dir,
// all inside the test's own process and without privilege; the relay runs on a thread of the test.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "relay/host_socket.h"
#include "relay/relay.h"
#include "tests/support/process.h"
#include "tests/unit/relay_harness.h"

using namespace cocoon;
using namespace cocoon::relay_test;

namespace {

// SIGPIPE is ignored during these tests, as relay.h asks of the relay's process (splice raises
// it when the proxy is gone): the monitor ignores it too. The disposition is restored after each
// test.
class RelayTest : public ::testing::Test {
protected:
    void SetUp() override
    {
        struct sigaction ignore {};
        ignore.sa_handler = SIG_IGN;
        ::sigaction(SIGPIPE, &ignore, &m_old_sigpipe);
    }
    void TearDown() override { ::sigaction(SIGPIPE, &m_old_sigpipe, nullptr); }

    // A relay from a new 127.0.0.1 (or ::1) listener to proxy.sock in a temp dir.
    Address listen(relay::Relay& relay, int family = AF_INET)
    {
        UniqueFd listener = listen_on(loopback(family));
        Address addr = address_of(listener.get());
        relay.add_listener(std::move(listener), pin(socket_path()));
        return addr;
    }
    std::string socket_path() const { return m_dir / "proxy.sock"; }
    // The socket at path, pinned as the monitor pins a --relay's (it must exist).
    static std::shared_ptr<const relay::HostSocket> pin(const std::string& path, bool no_follow = true)
    {
        return std::make_shared<const relay::HostSocket>(path, no_follow, "--relay 3128 " + path);
    }

    // One connection through a running relay: a proxy listening on
    // socket_path(), the relay and its thread, the client's end and the
    // proxy's (server is invalid if the relay never connected).
    struct Connected {
        explicit Connected(RelayTest& test)
            : proxy(listen_on(unix_address(test.socket_path()))), addr(test.listen(relay)), runner(relay),
              client(connect_to(addr)), server(accept_one(proxy.get()))
        {
        }
        UniqueFd proxy;
        relay::Relay relay;
        Address addr;
        RelayRunner runner;
        UniqueFd client, server;
    };
    void check_cap(bool upload);
    struct Retrying;

    test::TempDir m_dir;

private:
    struct sigaction m_old_sigpipe {};
};

}  // namespace

TEST_F(RelayTest, CarriesEveryByteBothWaysAtOnce)
{
    constexpr uint64_t kBytes = 256 * kMiB;
    Connected connected(*this);
    auto& [proxy, relay, addr, runner, client, server] = connected;
    ASSERT_TRUE(server);
    Received at_server, at_client;
    const auto start = Clock::now();
    {
        // Full duplex: both sides write their stream and read the other's, then shut down writing.
        std::jthread up([&] {
            send_pattern(client.get(), 0, kBytes);
            ::shutdown(client.get(), SHUT_WR);
        });
        std::jthread down([&] {
            send_pattern(server.get(), 777, kBytes);
            ::shutdown(server.get(), SHUT_WR);
        });
        std::jthread server_reads([&] { at_server = receive_pattern(server.get(), 0); });
        at_client = receive_pattern(client.get(), 777);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(at_server.bytes, kBytes);
    EXPECT_TRUE(at_server.intact);
    EXPECT_TRUE(at_server.eof);
    EXPECT_EQ(at_client.bytes, kBytes);
    EXPECT_TRUE(at_client.intact);
    EXPECT_TRUE(at_client.eof);
    std::printf("relay: 2 x %llu MiB in %.2f s\n", static_cast<unsigned long long>(kBytes / kMiB), seconds);
    // Both EOFs passed on: the relay closes the pair by itself.
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

TEST_F(RelayTest, HalfCloseFromClientStillCarriesTheReply)
{
    constexpr uint64_t kRequest = uint64_t{100} * 1024, kReply = 8 * kMiB;
    Connected connected(*this);
    auto& [proxy, relay, addr, runner, client, server] = connected;
    ASSERT_TRUE(server);
    ASSERT_EQ(send_pattern(client.get(), 0, kRequest), kRequest);
    ASSERT_EQ(::shutdown(client.get(), SHUT_WR), 0);

    // The server sees the whole request, then EOF, and only then replies.
    Received request = receive_pattern(server.get(), 0);
    EXPECT_EQ(request.bytes, kRequest);
    EXPECT_TRUE(request.intact);
    ASSERT_TRUE(request.eof);
    std::jthread reply([&] {
        send_pattern(server.get(), 5, kReply);
        server.reset();
    });
    Received got = receive_pattern(client.get(), 5);
    EXPECT_EQ(got.bytes, kReply);
    EXPECT_TRUE(got.intact);
    EXPECT_TRUE(got.eof);
    reply.join();
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

TEST_F(RelayTest, HalfCloseFromProxyStillCarriesTheRequest)
{
    constexpr uint64_t kRequest = 8 * kMiB;
    Connected connected(*this);
    auto& [proxy, relay, addr, runner, client, server] = connected;
    ASSERT_TRUE(server);
    ASSERT_EQ(::shutdown(server.get(), SHUT_WR), 0);
    char byte;
    EXPECT_EQ(::recv(client.get(), &byte, 1, 0), 0);  // the client sees the EOF

    std::jthread request([&] {
        send_pattern(client.get(), 9, kRequest);
        ::shutdown(client.get(), SHUT_WR);
    });
    Received got = receive_pattern(server.get(), 9);
    EXPECT_EQ(got.bytes, kRequest);
    EXPECT_TRUE(got.intact);
    EXPECT_TRUE(got.eof);
    request.join();
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

TEST_F(RelayTest, ResetByProxyResetsTheClient)
{
    Connected connected(*this);
    auto& [proxy, relay, addr, runner, client, server] = connected;
    ASSERT_TRUE(server);
    ASSERT_TRUE(send_all(client.get(), "unread", 6));
    pollfd pfd{server.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
    // A Unix socket closed with bytes unread is the Unix form of a reset (SO_LINGER does
    // nothing there, set as a TCP server would).
    reset_close(server);

    pfd = {client.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 1000), 1);
    char byte;
    EXPECT_EQ(::recv(client.get(), &byte, 1, 0), -1);
    EXPECT_EQ(errno, ECONNRESET);
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

TEST_F(RelayTest, ResetByClientClosesTheProxySide)
{
    Connected connected(*this);
    auto& [proxy, relay, addr, runner, client, server] = connected;
    ASSERT_TRUE(server);
    ASSERT_TRUE(send_all(client.get(), "x", 1));
    char byte;
    ASSERT_EQ(recv_exact(server.get(), &byte, 1), 1u);
    reset_close(client);

    // Not a half-close: the proxy's socket is closed outright, so its writes fail with EPIPE.
    pollfd pfd{server.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 1000), 1);
    ssize_t n = ::recv(server.get(), &byte, 1, 0);
    EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET));
    EXPECT_EQ(::send(server.get(), "y", 1, MSG_NOSIGNAL), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

TEST_F(RelayTest, WritingToAGonePeerResetsWithoutASignal)
{
    Connected connected(*this);
    auto& [proxy, relay, addr, runner, client, server] = connected;
    ASSERT_TRUE(server);
    // The proxy takes what came and closes cleanly; the client goes on sending. The relay's next
    // send to the proxy fails with EPIPE (SIGPIPE, without MSG_NOSIGNAL), which resets the client.
    ASSERT_TRUE(send_all(client.get(), "first", 5));
    char buf[5];
    ASSERT_EQ(recv_exact(server.get(), buf, 5), 5u);
    server.reset();
    std::vector<char> chunk(size_t{64} * 1024, 'x');
    int err = 0;
    for (int i = 0; i < 1000 && !err; ++i) {
        if (::send(client.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) < 0)
            err = errno;
        else
            std::this_thread::sleep_for(1ms);
    }
    EXPECT_TRUE(err == ECONNRESET || err == EPIPE) << std::strerror(err);
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

namespace {

// The last number of a sysctl file ("4096 131072 6291456": the maximum).
uint64_t sysctl_max(const char* path)
{
    std::ifstream file(path);
    uint64_t value = 0, last = 0;
    while (file >> value)
        last = value;
    return last;
}

// The writer sends 200 MiB while the reader pauses 1 s, then reads slowly, then at full speed.
void check_backpressure(int writer, int reader)
{
    constexpr uint64_t kTotal = 200 * kMiB;
    Pattern::get();  // the table is in RSS before the baseline
    std::atomic<uint64_t> sent{0};
    const long rss_before = vm_rss_kib();
    std::jthread write([&] {
        send_pattern(writer, 3, kTotal, &sent);
        ::shutdown(writer, SHUT_WR);
    });
    std::this_thread::sleep_for(1s);
    const uint64_t sent_while_paused = sent.load();
    const long rss_paused = vm_rss_kib();
    // The kernel's socket buffers on both sides (TCP's autotune up to net.ipv4.tcp_rmem and
    // tcp_wmem; the Unix socket's are a few MiB) plus one relay buffer or pipe. Without
    // backpressure the writer would be done with all 200 MiB by now.
    const uint64_t kernel = sysctl_max("/proc/sys/net/ipv4/tcp_rmem") + sysctl_max("/proc/sys/net/ipv4/tcp_wmem");
    EXPECT_LT(sent_while_paused, std::min(kTotal / 2, kernel + 16 * kMiB));
    Received got = receive_pattern(reader, 3, Clock::now() + 300ms);
    const long rss_after = vm_rss_kib();
    EXPECT_EQ(got.bytes, kTotal);
    EXPECT_TRUE(got.intact);
    EXPECT_TRUE(got.eof);
    EXPECT_LT(std::max(rss_paused, rss_after) - rss_before, 4 * 1024) << "KiB of VmRSS growth";
    std::printf("relay: %.1f MiB sent while the reader paused; VmRSS %+ld KiB paused, %+ld KiB after\n",
                static_cast<double>(sent_while_paused) / kMiB, rss_paused - rss_before, rss_after - rss_before);
}

}  // namespace

TEST_F(RelayTest, SlowClientDoesNotMakeTheRelayBuffer)
{
    UniqueFd proxy = listen_on(unix_address(socket_path()));
    relay::Relay relay;
    Address addr = listen(relay);
    RelayRunner runner(relay);
    UniqueFd client = connect_to(addr);
    UniqueFd server = accept_one(proxy.get());
    ASSERT_TRUE(server);
    check_backpressure(server.get(), client.get());
}

TEST_F(RelayTest, SlowProxyDoesNotMakeTheRelayBuffer)
{
    UniqueFd proxy = listen_on(unix_address(socket_path()));
    relay::Relay relay;
    Address addr = listen(relay);
    RelayRunner runner(relay);
    UniqueFd client = connect_to(addr);
    UniqueFd server = accept_one(proxy.get());
    ASSERT_TRUE(server);
    check_backpressure(client.get(), server.get());
}

namespace {

// One buffer (download) and one pipe (upload) for the whole relay.
relay::RelayOptions tiny_budget()
{
    relay::RelayOptions options;
    options.buffer_size = 64 * 1024;
    options.pipe_size = 64 * 1024;
    options.max_in_flight = 128 * 1024;
    return options;
}

}  // namespace

// One connection's stalled transfer holds the relay's only buffer (download) or pipe (upload);
// another connection's bytes in the same direction wait for it, and come once the reader reads.
void RelayTest::check_cap(bool upload)
{
    UniqueFd proxy = listen_on(unix_address(socket_path()));
    relay::Relay relay(tiny_budget());
    Address addr = listen(relay);
    RelayRunner runner(relay);
    UniqueFd stalled = connect_to(addr);
    UniqueFd stalled_server = accept_one(proxy.get());
    UniqueFd other = connect_to(addr);
    UniqueFd other_server = accept_one(proxy.get());
    ASSERT_TRUE(stalled_server && other_server);
    const int stalled_writer = upload ? stalled.get() : stalled_server.get();
    const int stalled_reader = upload ? stalled_server.get() : stalled.get();
    const int other_writer = upload ? other.get() : other_server.get();
    const int other_reader = upload ? other_server.get() : other.get();

    // A transfer nobody reads: the socket buffers fill, then the relay holds its only buffer or
    // pipe with bytes the destination cannot take.
    constexpr uint64_t kTotal = 64 * kMiB;
    std::atomic<uint64_t> sent{0};
    std::jthread writer([&] {
        send_pattern(stalled_writer, 5, kTotal, &sent);
        ::shutdown(stalled_writer, SHUT_WR);
    });
    ASSERT_TRUE(wait_until([&] {
        const uint64_t before = sent.load();
        std::this_thread::sleep_for(200ms);
        return sent.load() == before && before > 0;
    })) << "the stalled transfer never stopped";
    // The other connection's bytes wait: they do not come while the first is stalled ...
    ASSERT_TRUE(send_all(other_writer, "bytes", 5));
    pollfd pfd{other_reader, POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 300), 0) << "a second " << (upload ? "pipe" : "buffer") << " was lent";
    // ... and come once the stalled reader reads.
    Received got = receive_pattern(stalled_reader, 5);
    EXPECT_EQ(got.bytes, kTotal);
    EXPECT_TRUE(got.intact);
    char buf[5];
    ASSERT_EQ(recv_exact(other_reader, buf, 5), 5u);
    EXPECT_EQ(std::string(buf, 5), "bytes");
}

TEST_F(RelayTest, BuffersInFlightAreCappedAcrossConnections)
{
    check_cap(false);
}

TEST_F(RelayTest, PipesInFlightAreCappedAcrossConnections)
{
    check_cap(true);
}

TEST_F(RelayTest, ManyTransfersShareOneBufferAndOnePipe)
{
    constexpr size_t kConnections = 8;
    constexpr uint64_t kBytes = 8 * kMiB;
    UniqueFd proxy = listen_on(unix_address(socket_path()));
    relay::Relay relay(tiny_budget());
    Address addr = listen(relay);
    std::vector<UniqueFd> clients, servers;
    {
        RelayRunner runner(relay);
        for (size_t i = 0; i < kConnections; ++i) {
            clients.push_back(connect_to(addr));
            servers.push_back(accept_one(proxy.get()));
            ASSERT_TRUE(servers.back());
        }
        // Every connection uploads and downloads at once, each with its own pattern.
        std::vector<Received> up(kConnections), down(kConnections);
        {
            std::vector<std::jthread> threads;
            for (size_t i = 0; i < kConnections; ++i) {
                threads.emplace_back([&, i] {
                    send_pattern(clients[i].get(), i, kBytes);
                    ::shutdown(clients[i].get(), SHUT_WR);
                });
                threads.emplace_back([&, i] {
                    send_pattern(servers[i].get(), 1000 + i, kBytes);
                    ::shutdown(servers[i].get(), SHUT_WR);
                });
                threads.emplace_back([&, i] { up[i] = receive_pattern(servers[i].get(), i); });
                threads.emplace_back([&, i] { down[i] = receive_pattern(clients[i].get(), 1000 + i); });
            }
        }
        for (size_t i = 0; i < kConnections; ++i) {
            EXPECT_EQ(up[i].bytes, kBytes) << "upload " << i;
            EXPECT_TRUE(up[i].intact && up[i].eof) << "upload " << i;
            EXPECT_EQ(down[i].bytes, kBytes) << "download " << i;
            EXPECT_TRUE(down[i].intact && down[i].eof) << "download " << i;
        }
        clients.clear();
        servers.clear();
        ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
    }
    // The runner is stopped: everything lent came back.
    EXPECT_EQ(relay.lent_buffer_count(), 0u);
    EXPECT_EQ(relay.lent_pipe_count(), 0u);
    EXPECT_EQ(relay.starved_count(), 0u);
}

TEST_F(RelayTest, ServesAThousandConcurrentConnections)
{
    constexpr size_t kClients = 1000;
    // Per connection: the client, the relay's two sockets, the server's.
    NofileLimit limit(count_fds() + kClients * 4 + 100);
    if (!limit.ok())
        GTEST_SKIP() << "RLIMIT_NOFILE cannot be raised to " << kClients * 4 + 100 << " fds";
    EchoServer server(socket_path());
    relay::Relay relay;
    Address addr = listen(relay);
    RelayRunner runner(relay);

    std::vector<UniqueFd> clients;
    for (size_t i = 0; i < kClients; ++i)
        clients.push_back(connect_to(addr));
    // All of them at once, each relayed to its own proxy connection.
    ASSERT_TRUE(wait_until([&] { return relay.connection_count() == kClients; }))
        << relay.connection_count() << " relayed";
    ASSERT_TRUE(wait_until([&] { return server.open_connections() == kClients; }))
        << server.open_connections() << " at the proxy";
    auto message = [](size_t i) { return "hello from client " + std::to_string(i) + std::string(40, '.'); };
    for (size_t i = 0; i < kClients; ++i)
        ASSERT_TRUE(send_all(clients[i].get(), message(i).data(), message(i).size()));
    size_t good = 0;
    for (size_t i = 0; i < kClients; ++i) {
        std::string back(message(i).size(), '\0');
        if (recv_exact(clients[i].get(), back.data(), back.size()) == back.size() && back == message(i))
            ++good;
    }
    EXPECT_EQ(good, kClients);
    clients.clear();
    EXPECT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
}

// The proxy's listener closes (its file stays): each client is reset at once, the relay goes on
// serving its other listeners, and the failures are reported.
TEST_F(RelayTest, ProxyDownClosesOnlyThatClient)
{
    testing::internal::CaptureStderr();  // the default sink writes to stderr
    std::string err;
    Address addr;
    {
        UniqueFd proxy = listen_on(unix_address(socket_path()));
        EchoServer other(m_dir / "other.sock");
        relay::Relay relay;
        addr = listen(relay);
        UniqueFd other_listener = listen_on(loopback());
        const Address other_addr = address_of(other_listener.get());
        relay.add_listener(std::move(other_listener), pin(m_dir / "other.sock"));
        RelayRunner runner(relay);

        proxy.reset();
        expect_refused_promptly(addr);
        expect_refused_promptly(addr);
        EXPECT_EQ(relay.connection_count(), 0u);

        UniqueFd client = connect_to(other_addr);
        EXPECT_TRUE(echoes(client.get(), "still serving"));
        runner.stop();
        relay.close_all();  // reports what was suppressed
        err = testing::internal::GetCapturedStderr();
    }
    const std::string name = "cocoon: relay: 127.0.0.1:" + std::to_string(port_of(addr)) + " -> " + socket_path();
    EXPECT_NE(err.find(name + ": connect: Connection refused\n"), std::string::npos) << err;
    // The second failure came within the same second: counted, then reported on close.
    EXPECT_NE(err.find(name + ": 1 more failure, the last: connect: Connection refused\n"), std::string::npos) << err;
}

// The socket is pinned when the listener is added: what is at its path later is never reached,
// neither a link to another socket renamed over it nor another socket; connections still reach the
// socket found at the start, which no longer has a name.
TEST_F(RelayTest, ASwapAtTheSocketPathChangesNothing)
{
    EchoServer proxy(socket_path());
    UniqueFd decoy = listen_on(unix_address(m_dir / "decoy.sock"));
    relay::Relay relay;
    Address addr = listen(relay);
    RelayRunner runner(relay);

    UniqueFd before = connect_to(addr);
    EXPECT_TRUE(echoes(before.get(), "before"));
    ASSERT_EQ(::symlink((m_dir / "decoy.sock").c_str(), (m_dir / "link").c_str()), 0);
    ASSERT_EQ(::rename((m_dir / "link").c_str(), socket_path().c_str()), 0);
    UniqueFd through_link = connect_to(addr);
    EXPECT_TRUE(echoes(through_link.get(), "after a link"));
    ASSERT_EQ(::rename((m_dir / "decoy.sock").c_str(), socket_path().c_str()), 0);
    UniqueFd through_socket = connect_to(addr);
    EXPECT_TRUE(echoes(through_socket.get(), "after a socket"));
    // The decoy was never connected to.
    ASSERT_EQ(::fcntl(decoy.get(), F_SETFL, O_NONBLOCK), 0);
    EXPECT_LT(::accept4(decoy.get(), nullptr, nullptr, SOCK_CLOEXEC), 0);
    EXPECT_EQ(errno, EAGAIN);
}

TEST_F(RelayTest, ReportsFailuresAtMostOncePerSecondWithACount)
{
    LogLines log;
    relay::RelayOptions options;
    options.log = log.sink();
    relay::Relay relay(options);
    // A socket file nobody listens on.
    listen_on(unix_address(socket_path())).reset();
    Address addr = listen(relay);
    RelayRunner runner(relay);

    for (int i = 0; i < 30; ++i)
        expect_refused_promptly(addr);
    std::this_thread::sleep_for(1300ms);
    auto lines = log.lines();
    ASSERT_EQ(lines.size(), 2u);
    for (const auto& line : lines)
        EXPECT_EQ(line.second.rfind("cocoon: relay: 127.0.0.1:", 0), 0u) << line.second;
    EXPECT_NE(lines[0].second.find("connect: Connection refused"), std::string::npos);
    EXPECT_NE(lines[1].second.find(": 29 more failures, the last: connect: Connection refused"), std::string::npos)
        << lines[1].second;
    EXPECT_GE(lines[1].first - lines[0].first, 950ms);
}

namespace {

// A target in another process, as the relay worker's (relay/worker.cc): connect() only asks; the
// answers come later, through Relay::connected on the relay's thread, each connected to the pinned
// socket, as many as the test allows (the next `refuse` of them refused instead).
class DeferredTarget : public relay::Target {
public:
    explicit DeferredTarget(std::shared_ptr<const relay::HostSocket> host) : m_host(std::move(host)) {}
    int connect(UniqueFd& socket) const override
    {
        socket.reset();
        ++m_asked;
        return EINPROGRESS;
    }
    bool takes_socket() const override { return false; }
    const std::string& path() const override { return m_host->path(); }

    void allow(int n) { m_allowed += n; }
    void refuse(int n) { m_refuse += n; }
    int asked() const { return m_asked; }
    // Called after each turn of the relay.
    void answer(relay::Relay& relay)
    {
        for (; m_answered < std::min(m_asked.load(), m_allowed.load()); ++m_answered) {
            UniqueFd socket;
            int err = ECONNREFUSED;
            if (m_refuse > 0)
                --m_refuse;
            else
                err = m_host->connect(socket);
            relay.connected(std::move(socket), err);
        }
    }

private:
    std::shared_ptr<const relay::HostSocket> m_host;
    mutable std::atomic<int> m_asked{0};
    std::atomic<int> m_allowed{0}, m_refuse{0};
    int m_answered = 0;
};

// `message` from the client reaches the server, and back.
bool carries(int client, int server, const std::string& message)
{
    std::string got(message.size(), '\0');
    if (!send_all(client, message.data(), message.size()) || recv_exact(server, got.data(), got.size()) != got.size() ||
        got != message)
        return false;
    return send_all(server, message.data(), message.size()) &&
           recv_exact(client, got.data(), got.size()) == got.size() && got == message;
}

}  // namespace

// A proxy listening with `backlog` on socket_path() (0: one connection that nobody accepts fills
// it, and the next connect is EAGAIN), a relay to it whose messages go to `log`, and the relay's
// thread. With Target::kDeferred the relay's target answers later, as the worker's does.
struct RelayTest::Retrying {
    enum Target { kPinned, kDeferred };
    Retrying(RelayTest& test, int backlog, Target kind = kPinned, relay::RelayOptions options = {})
        : proxy(listen_on(unix_address(test.socket_path()), backlog)), relay(logged(options, log)),
          target(kind == kDeferred ? std::make_shared<DeferredTarget>(pin(test.socket_path())) : nullptr),
          addr(target ? listen_deferred() : test.listen(relay)),
          runner(relay, target ? std::function<void()>([this] { target->answer(relay); }) : std::function<void()>())
    {
    }
    static relay::RelayOptions logged(relay::RelayOptions options, LogLines& log)
    {
        options.log = log.sink();
        return options;
    }
    Address listen_deferred()
    {
        UniqueFd listener = listen_on(loopback());
        const Address at = address_of(listener.get());
        relay.add_listener(std::move(listener), target);
        return at;
    }
    LogLines log;
    UniqueFd proxy;
    relay::Relay relay;
    std::shared_ptr<DeferredTarget> target;
    Address addr;
    RelayRunner runner;
};

// The proxy's backlog is full: the extra client waits (its connect is tried again), and is
// relayed once the proxy has accepted the one before it.
TEST_F(RelayTest, FullProxyBacklogQueuesTheExtraClient)
{
    Retrying retrying(*this, 0);
    auto& [log, proxy, relay, target, addr, runner] = retrying;

    UniqueFd first = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 1; }));
    UniqueFd second = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return runner.counts().waiting == 1; }));
    std::this_thread::sleep_for(100ms);  // several refused retries
    EXPECT_EQ(runner.counts().waiting, 1u);
    EXPECT_EQ(relay.connection_count(), 1u);
    // The proxy takes the first; the second's retry then finds room.
    UniqueFd server1 = accept_one(proxy.get());
    ASSERT_TRUE(server1);
    ASSERT_TRUE(wait_until([&] { return runner.counts().connections == 2 && runner.counts().waiting == 0; }, 2s));
    UniqueFd server2 = accept_one(proxy.get());
    ASSERT_TRUE(server2);
    for (auto [client, server] : {std::pair{&first, &server1}, {&second, &server2}}) {
        ASSERT_TRUE(send_all(client->get(), "ping", 4));
        char buf[4];
        ASSERT_EQ(recv_exact(server->get(), buf, 4), 4u);
        EXPECT_EQ(std::string(buf, 4), "ping");
    }
    EXPECT_FALSE(log.contains("connect:")) << "a waiting client was reported as refused";
}

// A client whose proxy never makes room gives up after connect_retry_total: an RST, one line.
TEST_F(RelayTest, AClientWaitingTooLongIsReset)
{
    relay::RelayOptions options;
    options.connect_retry_total = 200ms;
    Retrying retrying(*this, 0, Retrying::kPinned, options);
    auto& [log, proxy, relay, target, addr, runner] = retrying;

    UniqueFd first = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 1; }));
    expect_refused_promptly(addr, 2s);
    EXPECT_TRUE(wait_until([&] { return log.contains("backlog stayed full for 200 ms"); }, 1s));
    // The relay resets the client and logs the line before it takes the client off its queue, in
    // the same turn: the queue is read once that turn is over.
    EXPECT_EQ(runner.counts_after_a_turn().waiting, 0u);
    // The first is still relayed, and works once the proxy accepts it.
    EXPECT_EQ(relay.connection_count(), 1u);
    UniqueFd server = accept_one(proxy.get());
    ASSERT_TRUE(server);
    ASSERT_TRUE(send_all(first.get(), "ping", 4));
    char buf[4];
    ASSERT_EQ(recv_exact(server.get(), buf, 4), 4u);
    EXPECT_EQ(std::string(buf, 4), "ping");
}

// A client waits, in the kernel's queues, until its target answers; then it is relayed.
TEST_F(RelayTest, AnAsynchronousTargetRelaysOnceItAnswers)
{
    Retrying retrying(*this, 4096, Retrying::kDeferred);
    auto& [log, proxy, relay, target, addr, runner] = retrying;

    UniqueFd client = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return runner.counts().pending == 1; }));
    ASSERT_TRUE(send_all(client.get(), "ping", 4));
    EXPECT_FALSE(accept_one(proxy.get(), 200ms)) << "the proxy was reached before the answer";
    EXPECT_EQ(relay.connection_count(), 0u);
    target->allow(1);
    UniqueFd server = accept_one(proxy.get());
    ASSERT_TRUE(server);
    char buf[4];
    ASSERT_EQ(recv_exact(server.get(), buf, 4), 4u);
    EXPECT_EQ(std::string(buf, 4), "ping");
    EXPECT_TRUE(carries(client.get(), server.get(), "pong"));
    const RelayCounts counts = runner.counts_after_a_turn();
    EXPECT_EQ(counts.pending, 0u);
    EXPECT_EQ(counts.connections, 1u);
}

// Answers go to the requests in order: a refused one closes its own client only.
TEST_F(RelayTest, AnAsynchronousTargetsAnswersKeepTheirOrder)
{
    Retrying retrying(*this, 4096, Retrying::kDeferred);
    auto& [log, proxy, relay, target, addr, runner] = retrying;

    UniqueFd first = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return runner.counts().pending == 1; }));
    UniqueFd second = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return runner.counts().pending == 2; }));
    target->refuse(1);
    target->allow(2);
    expect_closed_within(first.get(), 2s);
    UniqueFd server = accept_one(proxy.get());
    ASSERT_TRUE(server);
    EXPECT_TRUE(carries(second.get(), server.get(), "second"));
    EXPECT_TRUE(wait_until([&] { return log.contains("connect: Connection refused"); }, 1s));
    EXPECT_EQ(relay.connection_count(), 1u);
}

// EAGAIN answered (the host's backlog is full) puts the client in the waiting queue; it is asked
// for again, one at a time, until the proxy makes room.
TEST_F(RelayTest, AnAsynchronousTargetsFullBacklogQueuesTheClient)
{
    Retrying retrying(*this, 0, Retrying::kDeferred);
    auto& [log, proxy, relay, target, addr, runner] = retrying;
    target->allow(1000);

    UniqueFd first = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 1; }));
    UniqueFd second = connect_to(addr);
    ASSERT_TRUE(wait_until([&] { return runner.counts().waiting == 1; }));
    std::this_thread::sleep_for(100ms);  // several refused retries
    EXPECT_GT(target->asked(), 3) << "the waiting client was not asked for again";
    EXPECT_EQ(runner.counts().waiting, 1u);
    EXPECT_EQ(relay.connection_count(), 1u);
    UniqueFd server1 = accept_one(proxy.get());
    ASSERT_TRUE(server1);
    ASSERT_TRUE(wait_until([&] { return runner.counts().connections == 2 && runner.counts().waiting == 0; }, 2s));
    UniqueFd server2 = accept_one(proxy.get());
    ASSERT_TRUE(server2);
    EXPECT_TRUE(carries(first.get(), server1.get(), "first"));
    EXPECT_TRUE(carries(second.get(), server2.get(), "second"));
    EXPECT_FALSE(log.contains("connect:")) << "a waiting client was reported as refused";
}

TEST_F(RelayTest, LeavesNoFdBehindAfterThousandsOfConnections)
{
    std::optional<EchoServer> server(std::in_place, socket_path());
    LogLines log;
    relay::RelayOptions options;
    options.log = log.sink();
    relay::Relay relay(options);
    Address addr = listen(relay);
    const size_t baseline = count_fds() - 1;  // less the proxy's listener, which closes below
    {
        RelayRunner runner(relay);
        // 2,000 connections, 20 at a time: echoes, with every fourth batch reset by its clients.
        for (int batch = 0; batch < 100; ++batch) {
            std::vector<UniqueFd> clients;
            for (int i = 0; i < 20; ++i)
                clients.push_back(connect_to(addr));
            for (size_t i = 0; i < clients.size(); ++i) {
                if (batch % 4 == 3) {
                    send_all(clients[i].get(), "bye", 3);
                    reset_close(clients[i]);
                } else {
                    ASSERT_TRUE(echoes(clients[i].get(), "batch " + std::to_string(batch)));
                }
            }
        }
        ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 0 && server->open_connections() == 0; }));
        // And 200 that fail: the proxy is gone (its listener closed).
        server.reset();
        for (int i = 0; i < 200; ++i)
            expect_refused_promptly(addr);
        ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 0; }));
    }
    // The runner is stopped: reading the pools from this thread is safe now. Nothing is lent;
    // the only fds left are the spare pipes'.
    EXPECT_EQ(relay.lent_buffer_count(), 0u);
    EXPECT_EQ(relay.lent_pipe_count(), 0u);
    EXPECT_LE(relay.spare_pipe_count(), relay::Relay::kMaxSparePipes);
    EXPECT_EQ(count_fds(), baseline + 2 * relay.spare_pipe_count());
    EXPECT_LE(relay.spare_buffer_count(), relay::Relay::kMaxSpareBytes / relay::RelayOptions().buffer_size);
    relay.close_all();
    EXPECT_EQ(count_fds(), baseline - 3);  // the listener, the spare Unix socket and the pinned one
}

TEST_F(RelayTest, ServesIpv6Loopback)
{
    UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const Address loop = loopback(AF_INET6);
    if (!probe || ::bind(probe.get(), loop.get(), loop.len) < 0)
        GTEST_SKIP() << "no ::1 here";
    probe.reset();
    EchoServer server(socket_path());
    relay::Relay relay;
    Address addr = listen(relay, AF_INET6);
    RelayRunner runner(relay);
    UniqueFd client = connect_to(addr);
    EXPECT_TRUE(echoes(client.get(), "over ::1"));
}

TEST_F(RelayTest, OutOfFdsPausesAcceptingWithoutSpinning)
{
    constexpr size_t kClients = 8;
    EchoServer server(socket_path());
    LogLines log;
    relay::RelayOptions options;
    options.log = log.sink();
    relay::Relay relay(options);
    Address addr = listen(relay);
    RelayRunner runner(relay);

    std::vector<UniqueFd> clients;
    for (size_t i = 0; i < kClients; ++i)
        clients.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    {
        // Three fds left for the relay and the echo server together: the relay runs out after
        // a connection or two; the other clients wait in the listen backlog.
        NofileLimit limit(limit_leaving(3));
        ASSERT_TRUE(limit.ok());
        for (UniqueFd& c : clients) {
            ASSERT_EQ(::connect(c.get(), addr.get(), addr.len), 0);
            set_timeouts(c.get(), 5s);
        }
        std::this_thread::sleep_for(100ms);
        const uint64_t iterations = runner.iterations();
        const auto cpu = runner.cpu();
        std::this_thread::sleep_for(500ms);
        // 10 ms run_once timeouts make ~50 rounds, the 100 ms pauses a few more; a relay spinning
        // on the readable listener would make hundreds of thousands.
        EXPECT_LT(runner.iterations() - iterations, 200u);
        EXPECT_LT(runner.cpu() - cpu, 50ms);
        EXPECT_LT(relay.connection_count(), kClients);
    }
    EXPECT_TRUE(log.contains("Too many open files"));
    // fds are back: every client is served, none was dropped.
    for (size_t i = 0; i < kClients; ++i)
        EXPECT_TRUE(echoes(clients[i].get(), "client " + std::to_string(i))) << i;
}

TEST_F(RelayTest, StopsAcceptingAtMaxConnections)
{
    EchoServer server(socket_path());
    relay::RelayOptions options;
    options.max_connections = 2;
    relay::Relay relay(options);
    Address addr = listen(relay);
    RelayRunner runner(relay);

    std::vector<UniqueFd> clients;
    for (int i = 0; i < 4; ++i)
        clients.push_back(connect_to(addr));
    ASSERT_TRUE(wait_until([&] { return relay.connection_count() == 2; }));
    EXPECT_TRUE(echoes(clients[0].get(), "one"));
    EXPECT_TRUE(echoes(clients[1].get(), "two"));
    // The third waits in the backlog: its bytes go nowhere yet.
    ASSERT_TRUE(send_all(clients[2].get(), "three", 5));
    pollfd pfd{clients[2].get(), POLLIN, 0};
    EXPECT_EQ(::poll(&pfd, 1, 200), 0);
    EXPECT_EQ(relay.connection_count(), 2u);
    // One closes; the third is accepted and its bytes arrive.
    clients[0].reset();
    char buf[5];
    ASSERT_EQ(recv_exact(clients[2].get(), buf, 5), 5u);
    EXPECT_EQ(std::string(buf, 5), "three");
}

TEST_F(RelayTest, CloseAllAndTheDestructorCloseEverything)
{
    EchoServer server(socket_path());
    const size_t before = count_fds();
    Address addr;
    std::vector<UniqueFd> clients;
    {
        relay::Relay relay;
        addr = listen(relay);
        RelayRunner runner(relay);
        for (int i = 0; i < 10; ++i) {
            clients.push_back(connect_to(addr));
            ASSERT_TRUE(echoes(clients.back().get(), "open"));
        }
        runner.stop();
        relay.close_all();
        EXPECT_EQ(relay.connection_count(), 0u);
        for (UniqueFd& c : clients)
            expect_closed_within(c.get(), 1s);
        // The listener is closed too.
        UniqueFd late(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        EXPECT_EQ(::connect(late.get(), addr.get(), addr.len), -1);
        EXPECT_EQ(errno, ECONNREFUSED);

        // A relay with live connections, destroyed without close_all.
        relay::Relay other;
        Address other_addr = listen(other);
        RelayRunner other_runner(other);
        UniqueFd client = connect_to(other_addr);
        ASSERT_TRUE(echoes(client.get(), "open"));
        other_runner.stop();
        clients.push_back(std::move(client));
    }
    expect_closed_within(clients.back().get(), 1s);
    clients.clear();
    ASSERT_TRUE(wait_until([&] { return server.open_connections() == 0; }));
    EXPECT_EQ(count_fds(), before);
}

TEST_F(RelayTest, RejectsWhatIsNotAListeningTcpSocket)
{
    relay::Relay relay;
    UniqueFd proxy = listen_on(unix_address(socket_path()));
    const auto target = pin(socket_path());
    UniqueFd udp(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    EXPECT_THROW(relay.add_listener(std::move(udp), target), UsageError);
    UniqueFd unconnected(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_THROW(relay.add_listener(std::move(unconnected), target), UsageError);
    EXPECT_THROW(relay.add_listener(listen_on(unix_address(m_dir / "other.sock")), target), UsageError);
    UniqueFd not_socket(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    EXPECT_THROW(relay.add_listener(std::move(not_socket), target), SysError);
    EXPECT_NO_THROW(relay.add_listener(listen_on(loopback()), target));
    EXPECT_NO_THROW(relay.add_listener(listen_on(loopback(AF_INET6)), target));
}

// What a --relay SOCKET must be at start, and how each refusal reads.
TEST_F(RelayTest, PinsOnlyASocket)
{
    const auto message = [](const std::function<void()>& pin_it) -> std::string {
        try {
            pin_it();
        } catch (const std::exception& e) {
            return e.what();
        }
        return "(pinned)";
    };
    const std::string missing = m_dir / "missing.sock";
    EXPECT_EQ(message([&] { pin(missing); }), "--relay 3128 " + missing + ": No such file or directory");
    test::write_file(m_dir / "file", "not a socket");
    EXPECT_EQ(message([&] { pin(m_dir / "file"); }), "--relay 3128 " + m_dir / "file" + ": not a Unix socket");
    EXPECT_EQ(message([&] { pin(m_dir.path()); }), "--relay 3128 " + m_dir.path() + ": not a Unix socket");

    // A link, at the end or in the middle: refused with no_follow, followed once without.
    UniqueFd proxy = listen_on(unix_address(socket_path()));
    ASSERT_EQ(::symlink(socket_path().c_str(), (m_dir / "link.sock").c_str()), 0);
    ASSERT_EQ(::symlink(m_dir.path().c_str(), (m_dir / "dir").c_str()), 0);
    for (const std::string& path : {m_dir / "link.sock", m_dir / "dir/proxy.sock"}) {
        EXPECT_EQ(message([&] { pin(path); }),
                  "--relay 3128 " + path + ": a component is a symbolic link (refused by --no-follow-sources)");
        EXPECT_EQ(message([&] { pin(path, false); }), "(pinned)");
    }
    // The address is the fd's /proc link, whatever the path's length.
    const auto pinned = pin(socket_path());
    const std::string address(reinterpret_cast<const sockaddr_un*>(pinned->address())->sun_path);
    EXPECT_EQ(address.rfind("/proc/self/fd/", 0), 0u) << address;
    EXPECT_EQ(pinned->path(), socket_path());
}

namespace cocoon::relay {
namespace {

// --egress hands the relay connected pairs (Relay::adopt): their bytes are relayed and counted,
// and the count reaches the close hook whether the connection ends by itself or with close_all.
TEST(RelayAdopt, CountsWhatItRelaysAndReportsItAtTheEnd)
{
    ::signal(SIGPIPE, SIG_IGN);
    for (bool ends_by_itself : {true, false}) {
        Relay relay;
        int client[2], upstream[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client), 0);
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, upstream), 0);
        UniqueFd app(client[0]), origin(upstream[1]);
        uint64_t up = 0, down = 0;
        int calls = 0;
        ASSERT_TRUE(relay.adopt(UniqueFd(client[1]), UniqueFd(upstream[0]), [&](uint64_t u, uint64_t d) {
            up = u;
            down = d;
            ++calls;
        }));
        ASSERT_EQ(::write(app.get(), "hello", 5), 5);
        ASSERT_EQ(::write(origin.get(), "hi", 2), 2);
        char buf[8];
        auto readable = [](int fd) {
            pollfd p{fd, POLLIN, 0};
            return ::poll(&p, 1, 0) == 1;
        };
        for (int i = 0; i < 200 && !(readable(origin.get()) && readable(app.get())); ++i)
            relay.run_once(10);
        EXPECT_EQ(::read(origin.get(), buf, sizeof buf), 5);
        EXPECT_EQ(::read(app.get(), buf, sizeof buf), 2);
        if (ends_by_itself) {
            ::shutdown(app.get(), SHUT_WR);
            ::shutdown(origin.get(), SHUT_WR);
            for (int i = 0; i < 100 && calls == 0; ++i)
                relay.run_once(10);
        } else {
            relay.close_all();
        }
        EXPECT_EQ(calls, 1) << (ends_by_itself ? "ended by itself" : "close_all");
        EXPECT_EQ(up, 5U);
        EXPECT_EQ(down, 2U);
        EXPECT_EQ(relay.connection_count(), 0U);
    }
}

// Security: a plain HTTP request's connection passes on its body and nothing after it (a
// pipelined request to another site); the origin is not sent a FIN for it, and its answer still
// reaches the client. Control: without the limit the same bytes go through.
TEST(RelayAdopt, AnUploadLimitStopsWhatTheClientSendsLater)
{
    ::signal(SIGPIPE, SIG_IGN);
    for (bool limited : {true, false}) {
        for (bool splice_upload : {true, false}) {
            RelayOptions options;
            options.splice_upload = splice_upload;
            Relay relay(options);
            int client[2], upstream[2];
            ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client), 0);
            ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, upstream), 0);
            UniqueFd app(client[0]), origin(upstream[1]);
            std::optional<uint32_t> limit;
            if (limited)
                limit = 3;
            ASSERT_TRUE(relay.adopt(UniqueFd(client[1]), UniqueFd(upstream[0]), {}, limit));
            const std::string sent = "abcGET http://other.example/ HTTP/1.1\r\n\r\n";
            ASSERT_EQ(::write(app.get(), sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
            for (int i = 0; i < 20; ++i)
                relay.run_once(10);
            std::string got(256, '\0');
            ssize_t n = ::recv(origin.get(), got.data(), got.size(), MSG_DONTWAIT);
            ASSERT_GT(n, 0);
            got.resize(static_cast<size_t>(n));
            EXPECT_EQ(got, limited ? "abc" : sent) << splice_upload;
            // No EOF reached the origin: the relay did not shut down its side.
            EXPECT_EQ(::recv(origin.get(), got.data(), got.size(), MSG_DONTWAIT), -1);
            EXPECT_EQ(errno, EAGAIN);
            ASSERT_EQ(::write(origin.get(), "answer", 6), 6);
            ::shutdown(origin.get(), SHUT_WR);
            char buf[16];
            for (int i = 0; i < 100 && ::recv(app.get(), buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK) < 6; ++i)
                relay.run_once(10);
            EXPECT_EQ(::recv(app.get(), buf, sizeof buf, MSG_DONTWAIT), 6);
            if (limited) {
                // The connection is done once the answer ends.
                for (int i = 0; i < 100 && relay.connection_count() > 0; ++i)
                    relay.run_once(10);
                EXPECT_EQ(relay.connection_count(), 0U);
            }
        }
    }
}

// Handshakes elsewhere (--egress) hold reservations that count like connections.
TEST(RelayAdopt, ReservationsCountAgainstMaxConnections)
{
    RelayOptions options;
    options.max_connections = 2;
    Relay relay(options);
    EXPECT_TRUE(relay.reserve());
    EXPECT_TRUE(relay.reserve());
    EXPECT_FALSE(relay.reserve());
    EXPECT_FALSE(relay.has_room());
    relay.release();
    EXPECT_TRUE(relay.has_room());
    int client[2], upstream[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client), 0);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, upstream), 0);
    UniqueFd app(client[0]), origin(upstream[1]);
    // adopt turns the remaining reservation into the connection: still one room left.
    ASSERT_TRUE(relay.adopt(UniqueFd(client[1]), UniqueFd(upstream[0]), {}));
    EXPECT_EQ(relay.connection_count(), 1U);
    EXPECT_TRUE(relay.has_room());
    EXPECT_TRUE(relay.reserve());
    EXPECT_FALSE(relay.has_room());
}

}  // namespace
}  // namespace cocoon::relay

// Relay::watch: the caller's fds in the relay's one wait, called while readable, until unwatched
// (here by the callback itself, which must not pull the callback from under its own feet).
TEST(RelayWatch, CallsBackWhileReadableUntilUnwatched)
{
    relay::Relay relay;
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    UniqueFd read_end(p[0]), write_end(p[1]);
    int calls = 0;
    std::string got;
    relay.watch(read_end.get(), [&] {
        char c;
        while (::read(read_end.get(), &c, 1) == 1)
            got += c;
        if (++calls == 2)
            relay.unwatch(read_end.get());
    });
    relay.run_once(0);
    EXPECT_EQ(calls, 0) << "called with nothing to read";
    ASSERT_EQ(::write(write_end.get(), "a", 1), 1);
    relay.run_once(1000);
    EXPECT_EQ(calls, 1);
    ASSERT_EQ(::write(write_end.get(), "b", 1), 1);
    relay.run_once(1000);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(got, "ab");
    ASSERT_EQ(::write(write_end.get(), "c", 1), 1);
    relay.run_once(100);
    EXPECT_EQ(calls, 2) << "called after unwatch";
}
