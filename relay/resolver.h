// Name resolution for --egress, off the relay worker's loop: one thread of the worker runs c-ares
// (Debian's libc-ares: /etc/hosts, then DNS as /etc/resolv.conf says, no NSS modules to load into
// a static binary) and hands results back through an eventfd the worker's loop polls.
// Security: the worker lives in an empty network namespace and may not make a socket: c-ares
// reaches the name servers only through the UDP sockets the monitor made and connected, one per
// server of the host's resolv.conf (add_name_server; ares_set_socket_functions), UDP only
// (ARES_FLAG_IGNTC: a truncated answer is used as it is, never asked again over TCP). The answers,
// for names the sandbox chose, are parsed here, in the confined worker.
// Runs in: worker.
#pragma once

#include <sys/socket.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"

struct ares_addrinfo;  // <ares.h>

namespace cocoon::relay {

struct Resolution {
    uint64_t id = 0;
    std::vector<sockaddr_storage> addresses;  // in the order the resolver gave them, port set
    std::string error;  // empty when addresses were found
};

class Resolver {
public:
    // Throws SysError or UsageError when c-ares cannot start (no resolver configuration).
    Resolver();
    ~Resolver();
    Resolver(const Resolver&) = delete;
    Resolver& operator=(const Resolver&) = delete;

    // Readable when take() has results.
    int fd() const { return m_ready.get(); }
    void resolve(uint64_t id, const std::string& host, uint16_t port);
    std::vector<Resolution> take();
    // A UDP socket the monitor connected to a name server (ns/monitor/upstream.h): c-ares's socket
    // functions hand out copies of it for queries to that server.
    void add_name_server(UniqueFd socket);

private:
    struct Query {
        uint64_t id;
        std::string host;
        uint16_t port;
    };
    void run();
    // c-ares's callback for a query (its arg: the query's Pending): the Resolution, for take().
    static void on_done(void* arg, int status, int timeouts, ares_addrinfo* info);
    // c-ares's socket functions (ares_set_socket_functions), on the resolver thread.
    static int open_socket(int family, int type, int protocol, void* self);
    static int connect_socket(int fd, const sockaddr* address, socklen_t length, void* self);

    struct NameServer {
        UniqueFd socket;
        sockaddr_storage peer{};
    };
    std::mutex m_servers_mutex;  // the main thread adds, the resolver thread's c-ares looks
    std::vector<NameServer> m_servers;

    UniqueFd m_ready;  // eventfd: results are waiting
    UniqueFd m_wake;  // eventfd: queries are waiting, or stop
    std::mutex m_mutex;
    std::deque<Query> m_queries;
    std::vector<Resolution> m_results;
    bool m_stop = false;
    std::thread m_thread;
};

}  // namespace cocoon::relay
