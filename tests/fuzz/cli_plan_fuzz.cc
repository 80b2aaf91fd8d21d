// libFuzzer target: argv -> Options -> LaunchPlan (tools/cocoon/cli.cc, tools/cocoon/plan.cc), the path every
// command line takes before any process exists. The input is the arguments, NUL-separated. A
// refusal (UsageError, SysError) is a normal outcome; a crash, a sanitizer report or any other
// exception is a bug. --args and the seccomp options read fds through a reader that serves the
// rest of the input, so no fd of the fuzzer's is ever read or closed.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/sys_error.h"
#include "tools/cocoon/options.h"
#include "tools/cocoon/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    const std::string input(reinterpret_cast<const char*>(data), size);
    std::vector<std::string> args;
    size_t start = 0;
    for (size_t i = 0; i <= input.size(); ++i)
        if (i == input.size() || input[i] == '\0') {
            args.push_back(input.substr(start, i - start));
            start = i + 1;
        }
    if (args.size() > 256)
        return 0;
    const cocoon::tools::FdReader reader = [&](int fd, const std::string&) {
        return fd % 2 ? std::string("--unshare-net\0--chdir\0/\0", 23) : std::string(8 * (fd % 5), '\x06');
    };
    cocoon::tools::HostFacts host;
    host.uid = size % 2 ? 0 : 1000;
    host.gid = host.uid;
    host.environ = {"HOME=/home/u", "PATH=/usr/bin"};
    host.cwd = "/home/u";
    // --host-user's look-ups read these (a root caller's).
    host.passwd = "root:x:0:0:root:/root:/bin/sh\nagent:x:1500:1600::/home/agent:/bin/sh\n";
    host.group = "root:x:0:\nagents:x:1600:agent\n";
    try {
        cocoon::tools::Options options = cocoon::tools::parse_args(args, reader);
        (void)cocoon::tools::make_launch_plan(options, host);
    } catch (const cocoon::UsageError&) {
    } catch (const cocoon::SysError&) {
    }
    return 0;
}
