// Relay unit tests of its bounds (fds, connections, pinned sockets), of pairs handed over
// (Relay::adopt, as --egress does) and of Relay::watch.
#include "tests/unit/relay_fixture.h"

using namespace cocoon;
using namespace cocoon::relay_test;

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
