// The relay's kernel socket buffers are bounded (issue 22): 300 relayed connections whose reader
// never reads, one way and then the other, must not make the relay's sockets hold more than a
// fixed amount each. Run by the test process against host-side servers; this binary is also the
// in-sandbox client (a helper mode, COCOON_E2E_BUFFERS).
//
// What is measured: the bytes queued in the relay's TCP sockets (the ones it accepted, local port
// kBuffersPort), read by the client from /proc/net/tcp inside the sandbox: tx_queue (written, not yet
// acknowledged by the reader) plus rx_queue (received, not yet read by the relay). The accepted
// sockets live in the sandbox's network namespace, so that file lists this sandbox's sockets and
// nothing else: the figure does not move with what other tests or users do on a shared machine,
// unlike /proc/net/sockstat's "TCP: mem", which is the whole host's (printed for information
// only). Payload bytes are what the kernel charges to TCP memory, plus each skb's overhead (a few
// percent with loopback's 64 KiB segments). The client's own sockets are the sandbox's choice (it
// could fill them without any relay): printed, not checked.
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/helper_binary.h"
#include "tests/e2e/relay_support.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

constexpr uint16_t kBuffersPort = 3128;
constexpr const char* kBuffersHelperEnv = "COCOON_E2E_BUFFERS";
constexpr size_t kConnections = 300;
// The most one relayed TCP socket may hold, both queues together. The relay sets SO_SNDBUF and
// SO_RCVBUF to 256 KiB, which the kernel doubles: 512 KiB of send queue, and a receive window
// within 512 KiB. Before that, loopback's send buffer autotuned to 4 MiB (tcp_wmem) at once.
constexpr uint64_t kPerSocketBound = kMiB;

// ---- The in-sandbox client ----------------------------------------------------------------------

struct Queues {
    size_t relay_sockets = 0;
    uint64_t relay_sum = 0, relay_max = 0;
    size_t client_sockets = 0;
    uint64_t client_sum = 0, client_max = 0;
};

// This network namespace's TCP sockets, by /proc/net/tcp and tcp6: "sl local rem st tx:rx ...",
// addresses as HEX:PORT (port in hex), queues in hex. Listeners (state 0A) are passed over.
Queues read_queues()
{
    Queues q;
    for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
        std::ifstream in(path);
        std::string line;
        std::getline(in, line);  // the header
        while (std::getline(in, line)) {
            std::istringstream fields(line);
            std::string sl, local, remote, state, queues;
            if (!(fields >> sl >> local >> remote >> state >> queues) || state == "0A")
                continue;
            const auto port = [](const std::string& address) {
                return std::stoul(address.substr(address.rfind(':') + 1), nullptr, 16);
            };
            const size_t colon = queues.find(':');
            const uint64_t bytes =
                std::stoull(queues.substr(0, colon), nullptr, 16) + std::stoull(queues.substr(colon + 1), nullptr, 16);
            if (port(local) == kBuffersPort) {
                ++q.relay_sockets;
                q.relay_sum += bytes;
                q.relay_max = std::max(q.relay_max, bytes);
            } else if (port(remote) == kBuffersPort) {
                ++q.client_sockets;
                q.client_sum += bytes;
                q.client_max = std::max(q.client_max, bytes);
            }
        }
    }
    return q;
}

// Calls push() every 100 ms until the queues have not grown by more than 1 MiB (of hundreds) for
// a second, or 20 s passed; prints the figures as "NAME VALUE" lines.
void settle_and_print(const std::function<void()>& push)
{
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::seconds(20);
    Queues q = read_queues();
    uint64_t base = q.relay_sum + q.client_sum;
    int quiet = 0;
    while (quiet < 10 && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        push();
        q = read_queues();
        const uint64_t total = q.relay_sum + q.client_sum;
        if (total > base + kMiB) {
            base = total;
            quiet = 0;
        } else {
            ++quiet;
        }
    }
    std::ifstream sockstat("/proc/net/sockstat");
    std::string text((std::istreambuf_iterator<char>(sockstat)), std::istreambuf_iterator<char>());
    const size_t tcp = text.find("TCP:");
    std::printf("settled_ms %lld\nrelay_sockets %zu\nrelay_sum %llu\nrelay_max %llu\nclient_sockets %zu\n"
                "client_sum %llu\nclient_max %llu\nhost_tcp %s\n",
                ms_since(start), q.relay_sockets, static_cast<unsigned long long>(q.relay_sum),
                static_cast<unsigned long long>(q.relay_max), q.client_sockets,
                static_cast<unsigned long long>(q.client_sum), static_cast<unsigned long long>(q.client_max),
                tcp == std::string::npos ? "?" : text.substr(tcp + 5, text.find('\n', tcp) - tcp - 5).c_str());
}

std::vector<UniqueFd> open_connections(size_t count)
{
    raise_nofile();
    std::vector<UniqueFd> conns;
    for (size_t i = 0; i < count; ++i) {
        UniqueFd fd = connect_tcp("127.0.0.1", kBuffersPort);
        if (!fd)
            break;
        conns.push_back(std::move(fd));
    }
    return conns;
}

// "down N": N connections whose host end writes without end; nothing is read here.
// "up N": N connections written to until the kernel takes no more; the host end never reads.
int run_client(const std::string& spec)
{
    std::istringstream in(spec);
    std::string mode;
    size_t count = 0;
    in >> mode >> count;
    std::vector<UniqueFd> conns = open_connections(count);
    if (conns.size() != count) {
        std::printf("error connect #%zu: %s\n", conns.size(), std::strerror(errno));
        return 1;
    }
    if (mode == "down") {
        settle_and_print([] {});
        return 0;
    }
    if (mode == "up") {
        // The client's own send buffers are kept small (512 KiB): they only need to keep the
        // relay's receive windows full, and 300 autotuned ones (4 MiB each) would take the host's
        // TCP memory near pressure for nothing the test measures.
        const int size = 256 * 1024;
        for (UniqueFd& fd : conns)
            if (::fcntl(fd.get(), F_SETFL, O_NONBLOCK) < 0 ||
                ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &size, sizeof size) < 0)
                return std::printf("error fcntl or setsockopt: %s\n", std::strerror(errno)), 1;
        static char chunk[65536];
        const auto fill = [&conns] {
            for (UniqueFd& fd : conns)
                while (::send(fd.get(), chunk, sizeof chunk, MSG_NOSIGNAL) > 0) {}
        };
        fill();
        settle_and_print(fill);
        return 0;
    }
    std::printf("unknown mode %s\n", mode.c_str());
    return 2;
}

[[maybe_unused]] const bool kBuffersClient = helper_mode(kBuffersHelperEnv, run_client);

// ---- Tests --------------------------------------------------------------------------------------

class RelayBuffers : public ::testing::Test {
protected:
    // The client `spec` in a sandbox with its own network and the relay of kBuffersPort to m_socket;
    // its "NAME VALUE" lines.
    std::map<std::string, std::string> attack(const std::string& spec)
    {
        raise_nofile();
        Result r =
            run(args({{cocoon_bin()},
                      minimal_root(),
                      {"--unshare-all", "--proc", "/proc", "--dev", "/dev", "--relay", std::to_string(kBuffersPort),
                       m_socket, "--ro-bind", self_exe(), "/helper", "--setenv", kBuffersHelperEnv, spec, "/helper"}}),
                "", 60000);
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        std::printf("%s", r.out.c_str());
        return results(r.out);
    }

    static uint64_t number(const std::map<std::string, std::string>& got, const std::string& name)
    {
        auto it = got.find(name);
        return it == got.end() ? UINT64_MAX : std::stoull(it->second);
    }

    void expect_bounded(const std::map<std::string, std::string>& got)
    {
        // Every connection is open and relayed while measured (none refused, none ended).
        EXPECT_EQ(number(got, "relay_sockets"), kConnections);
        EXPECT_LE(number(got, "relay_max"), kPerSocketBound) << "one relayed socket holds more than its bound";
        EXPECT_LE(number(got, "relay_sum"), kConnections * kPerSocketBound);
    }

    TempDir m_dir;
    const std::string m_socket = m_dir / "proxy.sock";
};

// The host proxy writes on every connection without end; the sandbox never reads. The relay reads
// while its download buffers last (128 of 256 KiB over all connections) and fills each TCP send
// buffer it can: those are what must stay bounded.
TEST_F(RelayBuffers, ASandboxThatNeverReadsHoldsBoundedBuffers)
{
    ThreadServer server([](int fd) {
        static const std::string chunk(65536, 'x');
        while (send_all(fd, chunk)) {}
    });
    server.listen_unix(m_socket);
    const auto got = attack("down " + std::to_string(kConnections));
    expect_bounded(got);
    // The attack ran: bytes piled up in the relay's sockets (about 60 MiB; over 1 GiB before their
    // buffers were bounded).
    EXPECT_GE(number(got, "relay_sum"), 16 * kMiB);
    server.stop();
}

// The sandbox writes on every connection until the kernel takes no more; the host proxy never
// reads. The relay splices while its pipes last (32 of 1 MiB), and the rest stays in its TCP
// receive buffers, which must stay bounded; so must what its Unix sockets push on the proxy
// (their SO_SNDBUF: 2 x 256 KiB, doubled by the kernel).
TEST_F(RelayBuffers, AProxyThatNeverReadsLeavesBoundedBuffers)
{
    std::mutex mutex;
    uint64_t unix_max = 0;
    ThreadServer server([&](int fd) {
        for (int i = 0; i < 600; ++i) {
            int queued = 0;
            if (::ioctl(fd, FIONREAD, &queued) == 0) {
                std::lock_guard lock(mutex);
                unix_max = std::max<uint64_t>(unix_max, static_cast<uint64_t>(queued));
            }
            pollfd pfd{fd, 0, 0};  // no events: only a hang-up or an error ends the wait
            if (::poll(&pfd, 1, 100) != 0)
                return;
        }
    });
    server.listen_unix(m_socket);
    const auto got = attack("up " + std::to_string(kConnections));
    expect_bounded(got);
    EXPECT_GE(number(got, "relay_sum"), 16 * kMiB);  // the attack ran (about 150 MiB)
    server.stop();
    std::lock_guard lock(mutex);
    std::printf("unix_max %llu\n", static_cast<unsigned long long>(unix_max));
    EXPECT_LE(unix_max, 2 * kMiB) << "a relayed Unix socket pushed more on the proxy than its send buffer";
}

}  // namespace
}  // namespace cocoon::test
