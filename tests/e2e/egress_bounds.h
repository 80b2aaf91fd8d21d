// What the --egress bounds e2e tests share with their in-sandbox client (egress_bounds_client.cc):
// the ports, the client's environment variable, and the directory both see.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "relay/relay.h"
#include "tests/e2e/relay_target.h"

namespace cocoon::test::egress_bounds {

using namespace relay_e2e;

constexpr uint16_t kEgressPort = 3130;
inline const std::string kEgressPortText = std::to_string(kEgressPort);
constexpr uint16_t kRelayPort = 3131;
inline const std::string kRelayPortText = std::to_string(kRelayPort);
constexpr const char* kClientEnv = "COCOON_E2E_EGRESS_CLIENT";

inline bool wait_for(const std::string& path, int seconds = 20)
{
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (!exists(path)) {
        if (Clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

// utime + stime of a process, in clock ticks.
inline uint64_t cpu_ticks(pid_t pid)
{
    const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream in(stat.substr(stat.rfind(')') + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && in >> field; ++i) {
        if (i == 14)
            utime = std::stoull(field);
        if (i == 15)
            stime = std::stoull(field);
    }
    return utime + stime;
}

}  // namespace cocoon::test::egress_bounds
