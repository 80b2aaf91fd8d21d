// Unit tests of the relay engine (relay/): loopback TCP relayed to Unix sockets in a temp dir,
// all inside the test's own process and without privilege; the relay runs on a thread of the test.
#include "tests/unit/relay_fixture.h"

using namespace cocoon;
using namespace cocoon::relay_test;

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

namespace cocoon::relay_test {

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

}  // namespace cocoon::relay_test

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
