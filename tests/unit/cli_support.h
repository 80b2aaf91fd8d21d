// What the command-line and plan unit tests share: canned host facts, cocoon_main on an argv,
// parse errors as text, and plans made from argument lists with canned fds.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "base/sys_error.h"
#include "tools/cocoon/entry.h"
#include "tools/cocoon/options.h"
#include "tools/cocoon/plan.h"

namespace cocoon::cli_test {

using tools::Options;
using tools::parse_args;

inline tools::HostFacts user_host()
{
    tools::HostFacts h;
    h.uid = 1000;
    h.gid = 1001;
    h.environ = {"HOME=/home/u", "PATH=/usr/bin"};
    h.cwd = "/home/u/work";
    return h;
}

inline tools::HostFacts root_host()
{
    tools::HostFacts h = user_host();
    h.uid = h.gid = 0;
    return h;
}

inline int run_main(std::vector<std::string> args)
{
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    return tools::cocoon_main(static_cast<int>(args.size()), argv.data());
}

// The message of the UsageError that parse_args throws, or "" if none.
inline std::string parse_error(std::vector<std::string> args)
{
    try {
        parse_args(args);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

template <typename T> const T& op(const Options& o, size_t i)
{
    return std::get<T>(o.mounts.at(i));
}

// An FdReader over canned contents; records which fds were read, in order.
struct FakeFds {
    std::map<int, std::string> contents;
    std::vector<int> read;
    tools::FdReader reader()
    {
        return [this](int fd, const std::string& context) {
            read.push_back(fd);
            auto it = contents.find(fd);
            if (it == contents.end())
                throw SysError(EBADF, context);
            return it->second;
        };
    }
};

inline ns::LaunchPlan plan_for(std::vector<std::string> args, const tools::HostFacts& host, FakeFds* fds = nullptr)
{
    FakeFds none;
    return tools::make_launch_plan(parse_args(args, (fds ? fds : &none)->reader()), host);
}

}  // namespace cocoon::cli_test
