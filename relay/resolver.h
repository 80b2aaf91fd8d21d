// Name resolution for --egress, off the relay worker's loop: one thread of the worker runs c-ares
// (Debian's libc-ares: /etc/hosts, then DNS as /etc/resolv.conf says, no NSS modules to load into
// a static binary) and hands results back through an eventfd the worker's loop polls.
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

private:
    struct Query {
        uint64_t id;
        std::string host;
        uint16_t port;
    };
    void run();
    // c-ares's callback for a query (its arg: the query's Pending): the Resolution, for take().
    static void on_done(void* arg, int status, int timeouts, ares_addrinfo* info);

    UniqueFd m_ready;  // eventfd: results are waiting
    UniqueFd m_wake;  // eventfd: queries are waiting, or stop
    std::mutex m_mutex;
    std::deque<Query> m_queries;
    std::vector<Resolution> m_results;
    bool m_stop = false;
    std::thread m_thread;
};

}  // namespace cocoon::relay
