// What the relay e2e tests share: the in-sandbox client's constants (tests/e2e/relay_client.cc
// is the client) and the Relay fixture, which runs it in a sandbox beside a host-side target.
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/e2e/relay_target.h"
#include "tests/support/refusal.h"

namespace cocoon::test::relay_e2e {

using namespace relay_e2e;

constexpr uint16_t kPort = 3128;
inline const std::string kPortText = std::to_string(kPort);
constexpr const char* kHelperEnv = "COCOON_E2E_RELAY";
// What 1 GiB down and 256 MiB up may take; twice this is a hang (a timeout, not a speed check:
// tools/bench/relay measures speed). The sanitizer build is several times slower (cocoon under ASan,
// the test's own pattern and hash loops at -O0 beside ASan's runtime); the relay moves the bytes in
// the kernel either way.
#if defined(COCOON_SANITIZED)
constexpr long long kTransferBudgetMs = 45000;
#else
constexpr long long kTransferBudgetMs = 15000;
#endif

// Waits up to 10 s for a file to appear (true), polling every 5 ms.
inline bool wait_for_file(const std::string& path)
{
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!exists(path)) {
        if (Clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

inline const std::vector<std::string> kProxyVars = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy",
                                                    "ALL_PROXY",  "NO_PROXY",    "no_proxy",   "NODE_USE_ENV_PROXY"};

// The page the host's HTTP server serves: 2000 numbered lines.
inline std::string page()
{
    std::string body;
    for (int i = 0; i < 2000; ++i)
        body += "line " + std::to_string(i) + " of the page behind the cocoon relay\n";
    return body;
}

class Relay : public ::testing::Test {
protected:
    // A sandbox with its own network: minimal root, /etc for curl, /proc, /dev, the relay of
    // kPort to m_socket, and this binary at /helper.
    std::vector<std::string> sandbox(const std::vector<std::string>& extra = {}) const
    {
        return args({minimal_root(),
                     {"--ro-bind", "/etc", "/etc", "--unshare-all", "--proc", "/proc", "--dev", "/dev", "--relay",
                      kPortText, m_socket, "--ro-bind", m_helper, "/helper"},
                     extra});
    }

    // `/helper` in sandbox(extra), as client `spec` (e.g. "echo 127.0.0.1 3128").
    Result client(const std::string& spec, const std::vector<std::string>& extra = {}, int timeout_ms = 20000) const
    {
        return run(args({{cocoon_bin()}, sandbox(extra), {"--setenv", kHelperEnv, spec, "/helper"}}), "", timeout_ms);
    }

    std::string client_spec(const std::string& mode, const std::string& more = "") const
    {
        return mode + " 127.0.0.1 " + kPortText + (more.empty() ? "" : " " + more);
    }

    // Waits for the client's "NAME.ready" in m_shared; false if it never came.
    bool wait_ready(const std::string& name) const { return wait_for_file(m_shared / (name + ".ready")); }
    void go(const std::string& name) const { write_file(m_shared / (name + ".go"), ""); }

    TempDir m_dir;
    TempDir m_shared;
    const std::string m_socket = m_dir / "proxy.sock";
    const std::string m_helper = self_exe();
};

}  // namespace cocoon::test::relay_e2e
