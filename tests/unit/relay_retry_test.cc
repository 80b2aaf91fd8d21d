// Relay unit tests of connects that wait: a full proxy backlog tried again, a client that waits too
// long reset, and a target that answers later (as the confined worker's does).
#include "tests/unit/relay_fixture.h"

using namespace cocoon;
using namespace cocoon::relay_test;

namespace cocoon::relay_test {  // named: a field of RelayTest::Retrying has its type (COCOON_UNITY_TESTS)

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

}  // namespace cocoon::relay_test

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
