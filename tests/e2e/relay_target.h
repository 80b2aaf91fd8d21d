// The host end of a relay for the relay e2e tests: a scripted Unix stream server (Target), run by
// the test process.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tests/e2e/relay_support.h"

namespace cocoon::test::relay_e2e {

// What the scripted server saw; the tests wait on it.
struct TargetState {
    std::vector<std::string> events;  // one line per finished command
    int held = 0;  // "hold" connections open now
    int hold_ended = 0;  // "hold" connections that saw EOF or an error
    int echoes = 0;  // "echo" connections finished
    uint64_t download_sent = 0;  // bytes the latest "download" has written so far
};

// The host end of a relay: a Unix stream server that reads one command line per connection.
//   download N SEED  writes N bytes of Pattern(SEED), then closes; records "sent <hash>"
//   upload           reads to EOF; records and replies "received <hash>"
//   echo             echoes until EOF
//   halfclose        reads to EOF, records "halfclose got <hash>", only then replies with a line
//                    and 1 MiB of Pattern(7), and records "halfclose reply <hash of the reply>"
//   serverfirst      writes a greeting, shuts its side down, reads to EOF: "serverfirst got <text>"
//   reset            waits until more bytes arrived, closes without reading them (ECONNRESET)
//   closeafter N     reads N bytes, closes while the client still sends: "closed after N"
//   hold             replies "held", waits for EOF or an error: "hold ended eof|error ..."
class Target {
public:
    explicit Target(const std::string& path) : m_path(path), m_server([this](int fd) { serve(fd); })
    {
        m_server.listen_unix(path);
    }
    // The same server on 127.0.0.1 (for --egress, which reaches TCP servers): port() says where.
    struct OnTcp {};
    explicit Target(OnTcp) : m_server([this](int fd) { serve(fd); }) { m_port = m_server.listen_tcp(); }
    uint16_t port() const { return m_port; }

    ThreadServer& server() { return m_server; }
    const std::string& path() const { return m_path; }

    TargetState state()
    {
        std::lock_guard lock(m_mutex);
        return m_state;
    }

    // Waits until `done` holds for the state (true) or timeout_ms passed (false).
    bool wait(const std::function<bool(const TargetState&)>& done, int timeout_ms)
    {
        std::unique_lock lock(m_mutex);
        return m_changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done(m_state); });
    }

    bool has_event(const std::string& event)
    {
        std::lock_guard lock(m_mutex);
        return std::find(m_state.events.begin(), m_state.events.end(), event) != m_state.events.end();
    }

private:
    void update(const std::function<void(TargetState&)>& change)
    {
        {
            std::lock_guard lock(m_mutex);
            change(m_state);
        }
        m_changed.notify_all();
    }
    void record(const std::string& event)
    {
        update([&](TargetState& s) { s.events.push_back(event); });
    }

    void serve(int fd)
    {
        const std::optional<std::string> line = read_line(fd);
        if (!line)
            return;
        std::istringstream in(*line);
        std::string command;
        in >> command;
        if (command == "download") {
            uint64_t size = 0, seed = 0;
            in >> size >> seed;
            download(fd, size, seed);
        } else if (command == "upload") {
            StreamHash got;
            if (read_hashed(fd, got)) {
                record("received " + got.text());
                send_all(fd, "received " + got.text() + "\n");
            }
        } else if (command == "echo") {
            echo(fd);
        } else if (command == "halfclose") {
            half_close(fd);
        } else if (command == "serverfirst") {
            send_all(fd, "hello from the server\n");
            ::shutdown(fd, SHUT_WR);
            std::string got;
            if (read_to_eof(fd, got))
                record("serverfirst got " + got);
        } else if (command == "reset") {
            // The bytes after the command stay unread: closing now makes the peer's socket
            // report ECONNRESET (SO_LINGER {1, 0} is the TCP way of saying the same).
            pollfd pfd{fd, POLLIN, 0};
            ::poll(&pfd, 1, 5000);
            linger hard{1, 0};
            ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
            record("reset");
        } else if (command == "hold") {
            hold(fd);
        } else if (command == "closeafter") {
            uint64_t limit = 0;
            in >> limit;
            std::vector<char> buf(64 * 1024);
            uint64_t got = 0;
            while (got < limit) {
                ssize_t n = ::recv(fd, buf.data(), std::min<uint64_t>(buf.size(), limit - got), 0);
                if (n <= 0)
                    return;
                got += static_cast<uint64_t>(n);
            }
            record("closed after " + std::to_string(got));
        }
    }

    void download(int fd, uint64_t size, uint64_t seed)
    {
        Pattern pattern(seed);
        StreamHash sent;
        std::vector<char> buf(kMiB);
        update([](TargetState& s) { s.download_sent = 0; });
        while (sent.bytes() < size) {
            const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - sent.bytes()));
            pattern.fill(buf.data(), n);
            if (!send_all(fd, buf.data(), n))
                return;
            sent.update(buf.data(), n);
            update([&](TargetState& s) { s.download_sent = sent.bytes(); });
        }
        record("sent " + sent.text());
    }

    static bool read_hashed(int fd, StreamHash& hash)
    {
        const auto update = [&](const char* data, size_t len) { hash.update(data, len); };
        return read_to_eof(fd, update, kMiB);
    }

    void echo(int fd)
    {
        char buf[65536];
        for (;;) {
            ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0 || !send_all(fd, buf, static_cast<size_t>(n)))
                break;
        }
        update([](TargetState& s) { ++s.echoes; });
    }

    void half_close(int fd)
    {
        StreamHash got;
        if (!read_hashed(fd, got))
            return;
        record("halfclose got " + got.text());
        std::string reply = "after your EOF I got " + got.text() + "\n";
        reply.resize(reply.size() + kMiB);
        Pattern(7).fill(reply.data() + reply.size() - kMiB, kMiB);
        StreamHash sent;
        sent.update(reply);
        if (send_all(fd, reply))
            record("halfclose reply " + sent.text());
    }

    void hold(int fd)
    {
        update([](TargetState& s) { ++s.held; });
        send_all(fd, "held\n");
        std::string rest;
        const bool eof = read_to_eof(fd, rest);
        const std::string how = eof ? "eof" : std::string("error ") + std::strerror(errno);
        update([&](TargetState& s) {
            --s.held;
            ++s.hold_ended;
            s.events.push_back("hold ended " + how);
        });
    }

    uint16_t m_port = 0;
    std::string m_path;
    std::mutex m_mutex;
    std::condition_variable m_changed;
    TargetState m_state;
    ThreadServer m_server;  // last: its threads use the members above until it is destroyed
};

}  // namespace cocoon::test::relay_e2e
