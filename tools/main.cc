// cocoon's entry point: argv -> Options -> LaunchPlan -> launch. Runs as the
// monitor, with the caller's privilege. Installed as `bwrap`, it says so in errors.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "ns/launch.h"
#include "tools/options.h"
#include "tools/plan.h"

extern char** environ;

namespace {

constexpr const char* kVersion = "0.1.0";

cocoon::tools::HostFacts read_host()
{
    cocoon::tools::HostFacts host;
    host.uid = ::getuid();
    host.gid = ::getgid();
    for (char** e = environ; *e; ++e)
        host.environ.emplace_back(*e);
    char cwd[4096];
    host.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
    host.has_user_ns = ::access("/proc/self/ns/user", F_OK) == 0;
    host.has_cgroup_ns = ::access("/proc/self/ns/cgroup", F_OK) == 0;
    return host;
}

} // namespace

int main(int argc, char** argv)
{
    const char* base = argc > 0 ? std::strrchr(argv[0], '/') : nullptr;
    std::string prog = (base ? std::string(base + 1) : std::string(argc > 0 ? argv[0] : "")) == "bwrap"
                           ? "bwrap"
                           : "cocoon";
    try {
        cocoon::tools::Options options = cocoon::tools::parse_args(std::vector<std::string>(argv + 1, argv + argc));
        if (options.help) {
            std::fputs(cocoon::tools::usage(prog).c_str(), stdout);
            return 0;
        }
        if (options.version) {
            std::printf("%s %s\n", prog == "bwrap" ? "bubblewrap (cocoon)" : "cocoon", kVersion);
            return 0;
        }
        return cocoon::ns::launch(cocoon::tools::make_launch_plan(options, read_host()));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", prog.c_str(), e.what());
        return 1;
    }
}
