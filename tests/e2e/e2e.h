// Small helpers shared by the e2e tests: building cocoon command lines and
// picking apart what the sandboxed command printed. Runs in the test process.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
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

// An exit line of --json-status-fd without the resource report's members
// (which tests/e2e/usage_test.cc checks): { "exit-code": N[, "exit-signal": S] }.
inline std::string exit_status_only(const std::string& line)
{
    static const std::regex usage(
        ", \"(wall-time-us|cpu-user-us|cpu-system-us|memory-peak-bytes|pids-peak|tmpfs-peak-bytes)\": "
        "[0-9]+|, \"accounting\": \"[a-z+]+\"");
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

}  // namespace cocoon::test
