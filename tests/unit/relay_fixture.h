// The relay unit tests' fixture: a relay from 127.0.0.1 to a Unix socket in a temp dir, run on a
// thread of the test (tests/unit/relay_harness.h), with SIGPIPE ignored as relay.h asks.
#pragma once

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

namespace cocoon::relay_test {

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

}  // namespace cocoon::relay_test
