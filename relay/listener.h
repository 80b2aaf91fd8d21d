// What the relay's two files share, private to relay/: relay/relay.cc (the loop, connections,
// buffers) and relay/listener.cc (the listeners, connecting clients, the waiting queue, reports).
// Runs in: worker.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "base/unique_fd.h"
#include "relay/relay.h"

namespace cocoon::relay {

struct Listener {
    UniqueFd fd;
    std::shared_ptr<const Target> target;
    std::string name;  // "127.0.0.1:8080 -> /run/proxy.sock", for messages
    bool watched = true;
    std::chrono::steady_clock::time_point paused_until{};
    // Rate limit of this listener's messages.
    bool reported = false;
    std::chrono::steady_clock::time_point last_report{};
    size_t suppressed = 0;
    std::string last_suppressed;
};

// epoll_event.data.u64: its kind in the top 2 bits; a listener's or a watched fd's index below.
inline constexpr int kKindShift = 62;
inline constexpr uint64_t kTimerKind = 0;
inline constexpr uint64_t kListenerKind = 1;
inline constexpr uint64_t kConnectionKind = 2;
inline constexpr uint64_t kWatchKind = 3;

inline uint64_t listener_token(uint32_t index)
{
    return kListenerKind << kKindShift | index;
}

inline std::string error_text(const char* call, int err)
{
    return std::string(call) + ": " + std::strerror(err);
}

// Fixes a relayed TCP socket's kernel buffers at `bytes` each way (relay/relay.cc says why).
void bound_buffers(int fd, size_t bytes);

}  // namespace cocoon::relay
