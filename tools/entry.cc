// cocoon's entry point: argv -> Options -> LaunchPlan -> launch. Runs as the
// monitor, with the caller's privilege.
#include "tools/entry.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/capability.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <tuple>
#include <vector>

#include "base/sys_error.h"
#include "ns/join.h"
#include "ns/launch.h"
#include "tools/options.h"
#include "tools/plan.h"

extern char** environ;

namespace cocoon::tools {
namespace {

constexpr const char* kVersion = "0.1.0";

HostFacts read_host()
{
    HostFacts host;
    host.uid = ::getuid();
    host.gid = ::getgid();
    for (char** e = environ; *e; ++e)
        host.environ.emplace_back(*e);
    char cwd[4096];
    host.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (capget(&header, data) == 0)
        host.permitted_caps = data[0].permitted | (static_cast<ns::CapSet>(data[1].permitted) << 32);
    host.has_user_ns = ::access("/proc/self/ns/user", F_OK) == 0;
    host.has_cgroup_ns = ::access("/proc/self/ns/cgroup", F_OK) == 0;
    // bwrap's rule: stdout, not stdin, decides the console.
    if (::isatty(STDOUT_FILENO))
        if (const char* tty = ::ttyname(STDOUT_FILENO))
            host.stdout_tty = tty;
    return host;
}

std::string program_name(int argc, char** argv)
{
    if (argc < 1)
        return "cocoon";
    const char* slash = std::strrchr(argv[0], '/');
    return std::strcmp(slash ? slash + 1 : argv[0], "bwrap") == 0 ? "bwrap" : "cocoon";
}

}  // namespace

int cocoon_main(int argc, char** argv)
{
    const std::string prog = program_name(argc, argv);
    const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
    // --level-prefix: sd-daemon's "<N>" before each line, as bwrap writes it
    // (3 = LOG_ERR, 4 = LOG_WARNING), so a journal keeps the level. Looked for
    // before parsing, so that a parse error is prefixed too.
    bool level_prefix = level_prefix_requested(args);
    auto say = [&](const char* level, const std::string& text) {
        std::fprintf(stderr, "%s%s: %s\n", level_prefix ? level : "", prog.c_str(), text.c_str());
    };
    try {
        Options options = parse_args(args);
        level_prefix = level_prefix || options.level_prefix;
        if (options.help) {
            std::fputs(usage(prog).c_str(), stdout);
            return 0;
        }
        if (options.version) {
            std::printf("cocoon %s\n", kVersion);
            return 0;
        }
        for (const std::string& warning : options.warnings)
            say("<4>", warning);
        ns::LaunchPlan plan = make_launch_plan(options, read_host());
        if (level_prefix)
            plan.log_prefix = "<4>";
        for (auto [fd, name] : {std::pair{options.info_fd, "--info-fd"},
                                {options.json_status_fd, "--json-status-fd"},
                                {options.sync_fd, "--sync-fd"},
                                {options.block_fd, "--block-fd"},
                                {options.userns_block_fd, "--userns-block-fd"}})
            if (fd >= 0 && ::fcntl(fd, F_GETFD) < 0)
                throw SysError(errno, std::string("Invalid ") + name + " " + std::to_string(fd));
        // Namespace fds: open and of the right type, before any process exists.
        for (auto [fd, type, name] : {std::tuple{options.userns_fd, CLONE_NEWUSER, "--userns"},
                                      {options.userns2_fd, CLONE_NEWUSER, "--userns2"},
                                      {options.pidns_fd, CLONE_NEWPID, "--pidns"}})
            if (fd >= 0)
                ns::check_namespace_fd(fd, type, name);
        // A closed fd is refused here, before any process or mount exists.
        for (const mount::Op& op : options.mounts)
            if (auto use = mount::fd_use(op); use && ::fcntl(use->fd, F_GETFD) < 0)
                throw SysError(errno, std::string("Invalid ") + use->option + " " + std::to_string(use->fd));
        for (const ns::RelayEndpoint& r : options.relays) {
            struct stat st;
            if (::stat(r.socket.c_str(), &st) < 0)
                throw SysError(errno, "--relay " + std::to_string(r.port) + " " + r.socket);
            if (!S_ISSOCK(st.st_mode))
                throw UsageError("--relay " + std::to_string(r.port) + " " + r.socket + ": not a Unix socket");
        }
        return ns::launch(plan);
    } catch (const std::exception& e) {
        say("<3>", e.what());
        return 1;
    }
}

}  // namespace cocoon::tools
