// Small helpers shared by the e2e tests: building cocoon command lines and
// picking apart what the sandboxed command printed. Runs in the test process.
#pragma once

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <climits>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace cocoon::test {

// The concatenation of argument lists, in order.
inline std::vector<std::string> args(std::initializer_list<std::vector<std::string>> parts)
{
    std::vector<std::string> out;
    for (const auto& part : parts)
        out.insert(out.end(), part.begin(), part.end());
    return out;
}

// cocoon(minimal_root() + options + command).
inline Result in_sandbox(const std::vector<std::string>& options, const std::vector<std::string>& command)
{
    return cocoon(args({minimal_root(), options, command}));
}

inline std::vector<std::string> sh(const std::string& script)
{
    return {"sh", "-c", script};
}

// A shell line that waits (up to 10 s) until the sandbox's PID 1 has dropped its capabilities:
// PID 1 does so once the command is forked, and may wait for a CPU while the command runs. Its
// last step, no_new_privs, marks the end. A test that reads PID 1's /proc/1/status runs it first.
inline constexpr const char* kAwaitPid1Settled =
    "n=0; until grep -q '^NoNewPrivs:.1' /proc/1/status || [ $n -ge 200 ]; do n=$((n+1)); sleep 0.05; done; ";

// Whether the cocoon under test was built with -DCOCOON_TEST_HOOKS=ON: the set-up hook's
// variable's name (ns/setup/test_hook.h) is in the binary only then.
inline bool cocoon_has_setup_hook()
{
    std::ifstream in(cocoon_bin(), std::ios::binary);
    const std::string binary((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return binary.find("COCOON_TEST_SETUP_HOOK") != std::string::npos;
}

// What makes the command capability-free for this caller: nothing for an
// unprivileged caller (the default), --cap-drop ALL for root.
inline std::vector<std::string> no_caps()
{
    return is_root() ? std::vector<std::string>{"--cap-drop", "ALL"} : std::vector<std::string>{};
}

inline std::vector<std::string> lines(const std::string& text)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

inline std::set<std::string> line_set(const std::string& text)
{
    auto l = lines(text);
    return {l.begin(), l.end()};
}

inline bool contains(const std::string& haystack, const std::string& needle)
{
    return haystack.find(needle) != std::string::npos;
}

// Where the login-file tests put the login file in the sandbox.
constexpr const char* kLoginDest = "/home/agent/.cred";

// Words joined by single spaces ("--unshare-all --cap-drop ALL"), for a message.
inline std::string spaced(const std::vector<std::string>& words)
{
    std::string out;
    for (const std::string& word : words)
        out += (out.empty() ? "" : " ") + word;
    return out;
}

// Items one to a line, each indented, for a message.
inline std::string listed(const std::vector<std::string>& items)
{
    std::string out;
    for (const std::string& item : items)
        out += "\n  " + item;
    return out;
}

// The inode that identifies the file (a namespace) open at fd, or "?".
inline std::string inode_of(int fd)
{
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? std::to_string(st.st_ino) : "?";
}

// An exit line of --json-status-fd without the resource report's members
// (which tests/e2e/usage_test.cc checks): { "exit-code": N[, "exit-signal": S] }.
inline std::string exit_status_only(const std::string& line)
{
    static const std::regex usage(
        ", \"(wall-time-us|cpu-user-us|cpu-system-us|memory-peak-bytes|pids-peak|tmpfs-peak-bytes)\": "
        "[0-9]+|, \"accounting\": \"[a-z+]+\"|, \"relay-worker-cpu-us\": [0-9]+");
    return std::regex_replace(line, usage, "");
}

// The number after "name": in a JSON line (--json-status-fd), or UINT64_MAX if absent.
inline uint64_t json_number(const std::string& line, const std::string& name)
{
    std::smatch m;
    if (!std::regex_search(line, m, std::regex("\"" + name + "\": ([0-9]+)")))
        return UINT64_MAX;
    return std::stoull(m[1]);
}

// A probe's "NAME RESULT" lines (tests/e2e/probe) as NAME -> RESULT.
inline std::map<std::string, std::string> results(const std::string& out)
{
    std::map<std::string, std::string> m;
    for (const std::string& line : lines(out))
        if (size_t sp = line.find(' '); sp != std::string::npos)
            m[line.substr(0, sp)] = line.substr(sp + 1);
    return m;
}

// This test binary's own path (helper modes run it as a sandbox's command).
inline std::string self_exe()
{
    char buf[PATH_MAX] = {};
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// The unprivileged user of the tests: cocoon-test. tools/test makes it before the first test runs;
// no test makes it (tests run two at a time, and two useradds race). A root test that needs it and
// finds it missing fails, naming tools/test: a skip would hide the unprivileged half of the test.
inline constexpr const char* kTestUser = "cocoon-test";
inline constexpr const char* kNoTestUser =
    "no user cocoon-test: tools/test makes it before the first test (useradd --system cocoon-test)";
struct TestUser {
    uid_t uid = 0;
    gid_t gid = 0;
};

inline std::optional<TestUser> test_user()
{
    passwd* pw = ::getpwnam(kTestUser);
    if (!pw)
        return std::nullopt;
    return TestUser{pw->pw_uid, pw->pw_gid};
}

// The CPU time (user + system, seconds) process `pid` has used so far, by its /proc stat; -1 if
// it is gone. For the monitor's cost under a storm the sandbox makes.
inline double cpu_seconds(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(in, text);  // the stream, not a streambuf iterator: a read error is a failed read
    const size_t close = text.rfind(')');
    if (close == std::string::npos)
        return -1;
    std::istringstream fields(text.substr(close + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
        if (i == 14)
            utime = std::stoull(field);
        if (i == 15)
            stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A command that starts two busy loops and leaves them running: it waits until they have used
// 0.3 s of CPU by their own /proc stat (however loaded the host is), prints "ticks N" with that
// figure and exits. Needs a /proc of the sandbox's PID namespace. busy_loops_seen: the figure in
// seconds, from the command's output (-1 if missing).
inline std::vector<std::string> busy_loops()
{
    return {"sh", "-c",
            "(while :; do :; done) & a=$!; (while :; do :; done) & b=$!; t=0; "
            "while [ $t -lt 30 ]; do sleep 0.05; "
            "set -- $(cut -d' ' -f14,15 /proc/$a/stat /proc/$b/stat); t=$(($1+$2+$3+$4)); done; "
            "echo ticks $t"};
}

inline double busy_loops_seen(const std::string& out)
{
    const auto got = results(out);
    auto it = got.find("ticks");
    return it == got.end() ? -1 : std::stod(it->second) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// The value of a "Name:\tvalue" line of a /proc/PID/status text, or "" if absent.
inline std::string status_field(const std::string& status, const std::string& name)
{
    for (const std::string& line : lines(status))
        if (line.rfind(name + ":", 0) == 0) {
            std::string value = line.substr(name.size() + 1);
            value.erase(0, value.find_first_not_of(" \t"));
            return value;
        }
    return "";
}

// The relay worker of the cocoon process `cocoon` (relay/worker.h: a child named
// "cocoon-relay"), or -1. It starts with the monitor's loop: waits up to 2 s for it.
inline pid_t relay_worker(pid_t cocoon)
{
    for (int tries = 0; tries < 200; ++tries) {
        std::ifstream children("/proc/" + std::to_string(cocoon) + "/task/" + std::to_string(cocoon) + "/children");
        for (pid_t child; children >> child;) {
            std::ifstream comm("/proc/" + std::to_string(child) + "/comm");
            std::string name;
            if (std::getline(comm, name) && name == "cocoon-relay")
                return child;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
}

}  // namespace cocoon::test
