// cocoon's entry point: argv -> Options -> LaunchPlan -> launch. Runs as the
// monitor, with the caller's privilege.
// Runs in: caller, monitor, pid1, worker: every image of cocoon starts here: the caller, which
//  becomes the monitor; PID 1's and the relay worker's re-exec.
#include "tools/cocoon/entry.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "base/sys.h"
#include "base/sys_error.h"
#include "ns/join.h"
#include "ns/launch.h"
#include "ns/plan.h"
#include "relay/host_socket.h"
#include "relay/worker.h"
#include "tools/cocoon/check.h"
#include "tools/cocoon/profile.h"
#include "tools/cocoon/options.h"
#include "tools/cocoon/plan.h"

extern char** environ;

namespace cocoon::tools {
namespace {

constexpr const char* kVersion = "0.1.0";

// What the plan needs of the host; namespace support is looked up only for
// the -try options that ask about it (each look-up is a path walk in /proc).
HostFacts read_host(const Options& o)
{
    HostFacts host;
    host.uid = ::getuid();
    host.gid = ::getgid();
    for (char** e = environ; *e; ++e)
        host.environ.emplace_back(*e);
    char cwd[4096];
    host.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "/";
    const sys::CapSets caps = sys::own_caps();
    host.permitted_caps = caps.permitted;
    host.effective_caps = caps.effective;
    // Start-up speed: --unshare-user-try asks only for a privileged root, which could do without
    // one (tools/cocoon/plan.cc): any other caller gets a user namespace, the kernel's support or
    // not, so the path walk (~10 us at the start) is saved there.
    if (o.unshare_user_try && sys::privileged_root(host.uid, host.effective_caps))
        host.has_user_ns = ::access("/proc/self/ns/user", F_OK) == 0;
    if (o.unshare_cgroup_try)
        host.has_cgroup_ns = ::access("/proc/self/ns/cgroup", F_OK) == 0;
    // --host-user names a user of the host's own files (tools/cocoon/passwd.h);
    // a non-root caller is refused by the planner without them.
    if (o.host_user && host.uid == 0) {
        auto read = [](const std::string& path) {
            const std::string what = "--host-user: can't read " + path;
            int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                throw SysError(errno, what);
            return sys::read_to_end_and_close(fd, size_t{16} << 20, what);
        };
        host.passwd = read("/etc/passwd");
        host.group = read("/etc/group");
    }
    // bwrap's rule: stdout, not stdin, decides the console.
    if (::isatty(STDOUT_FILENO))
        if (const char* tty = ::ttyname(STDOUT_FILENO))
            host.stdout_tty = tty;
    return host;
}

// Takes over every caller fd the options name, once. Each must be open, and a
// namespace fd of the right type: refused here, before any process or mount
// exists. From here on each is a UniqueFd with one owner. Then the fds the
// caller left inheritable that no option names: handed to the command, as
// bwrap does, or closed now (--close-fds).
// Security: a regular file as --egress-log is written by the relay worker, which a parsing bug
// could take over: through a file description of cocoon's own, O_WRONLY | O_APPEND, opened again
// through /proc/self/fd, so that the worker cannot lseek back and rewrite the lines already
// there (nor the caller's, which may be O_RDWR; the worker's allowlist keeps it from clearing
// O_APPEND, relay/worker_seccomp_gen.cc). A file the caller's uid cannot open for writing (an fd
// passed down by a more privileged parent) is refused: sharing the caller's description would
// leave the old lines to the worker. Pipes, terminals and sockets cannot be sought; the worker
// reopens the first two itself (the monitor does, for it: ns/monitor/relay_worker.cc).
UniqueFd append_only(ns::CallerFd log)
{
    struct stat st {};
    if (!log.fd || ::fstat(log.fd.get(), &st) < 0 || !S_ISREG(st.st_mode))
        return std::move(log.fd);
    UniqueFd own(::open(("/proc/self/fd/" + std::to_string(log.fd.get())).c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    if (!own)
        throw SysError(errno, "Can't reopen " + log.name + " for appending");
    return own;
}

ns::CallerFds take_caller_fds(const Options& o)
{
    const ns::FdNumbers& n = o.fds;
    // Listed first, before this function makes copies (CLOEXEC, as every fd
    // of cocoon's is, so they could not be listed anyway).
    const std::vector<int> inheritable = sys::inheritable_fds();
    for (auto [fd, name] : {std::pair{n.info, "--info-fd"},
                            {n.json_status, "--json-status-fd"},
                            {n.egress_log, "--egress-log"},
                            {n.sync, "--sync-fd"},
                            {n.block, "--block-fd"},
                            {n.userns_block, "--userns-block-fd"}})
        if (fd >= 0 && ::fcntl(fd, F_GETFD) < 0)
            throw SysError(errno, std::string("Invalid ") + name + " " + std::to_string(fd));
    for (auto [fd, type, name] : {std::tuple{n.userns, CLONE_NEWUSER, "--userns"},
                                  {n.userns2, CLONE_NEWUSER, "--userns2"},
                                  {n.pidns, CLONE_NEWPID, "--pidns"}})
        if (fd >= 0)
            ns::check_namespace_fd(fd, type, name);
    for (const mount::InputOp& op : o.mounts)
        if (auto use = mount::fd_use(op); use && ::fcntl(use->fd, F_GETFD) < 0)
            throw SysError(errno, "Invalid " + use->name());

    // An fd that two options name, or one of stdin, stdout and stderr, is
    // owned as a copy: the monitor must not close its own 0-2, and no fd may
    // have two owners. The mount ops' fds come first and keep their numbers.
    std::set<int> taken;
    auto take = [&](int fd, const std::string& option) {
        if (fd < 0)
            return ns::CallerFd();
        const std::string name = option + " " + std::to_string(fd);
        if (fd > 2 && taken.insert(fd).second)
            return ns::CallerFd{UniqueFd(fd), name};
        UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
        if (!copy)
            throw SysError(errno, "Can't use " + name);
        return ns::CallerFd{std::move(copy), name};
    };
    ns::CallerFds fds;
    for (const mount::InputOp& op : o.mounts)
        if (auto use = mount::fd_use(op))
            fds.sandbox.mount.emplace(use->fd, take(use->fd, use->option).fd);
    fds.monitor.info = take(n.info, "--info-fd").fd;
    fds.monitor.json_status = take(n.json_status, "--json-status-fd").fd;
    fds.monitor.egress_log = append_only(take(n.egress_log, "--egress-log"));
    fds.sandbox.sync = take(n.sync, "--sync-fd");
    fds.sandbox.block = take(n.block, "--block-fd");
    fds.sandbox.userns_block = take(n.userns_block, "--userns-block-fd");
    fds.sandbox.userns = take(n.userns, "--userns");
    fds.sandbox.userns2 = take(n.userns2, "--userns2");
    fds.sandbox.pidns = take(n.pidns, "--pidns");

    // Security: an fd the caller left open across its exec of cocoon is one
    // it means the sandbox to have (Codex hands over its proxy sockets so),
    // and bwrap passes each on: the command gets it at its number. Only
    // these: every fd of cocoon's own is CLOEXEC, and the command marks every
    // fd but these CLOEXEC again before its exec (exec_command), so none can
    // follow them. An fd an option names is that option's (see SandboxFds):
    // `taken` holds those above 2, and the parser has closed the seccomp
    // programs' (and --args') fds already.
    std::set<int> named(taken);
    for (const SeccompInput& s : o.seccomp)
        named.insert(s.fd);
    for (int fd : inheritable)
        if (!named.count(fd)) {
            // --close-fds: closed by the monitor at once, so not even the
            // sandbox's setup holds them, nor the monitor while it runs.
            UniqueFd owned(fd);
            if (!o.close_fds)
                fds.sandbox.inherited.push_back(std::move(owned));
        }
    return fds;
}

std::string program_name(int argc, char** argv)
{
    if (argc < 1)
        return "cocoon";
    const char* slash = std::strrchr(argv[0], '/');
    return std::strcmp(slash ? slash + 1 : argv[0], "bwrap") == 0 ? "bwrap" : "cocoon";
}

}  // namespace

// Start-up speed: a run ends with the sandbox, and what destructors and exit
// handlers would do then (free the plan, the locale facets, Boost's codecvt,
// libnl's caches: about a dozen page faults and their frees) only returns
// memory the kernel takes back anyway. Nothing of cocoon's waits for a
// destructor; stdio is flushed here.
int exit_now(int code)
{
#ifndef __SANITIZE_ADDRESS__
    std::fflush(nullptr);
    std::_Exit(code);
#endif
    return code;
}

// --dry-run: the options are planned as a run would plan them (a command line the planner
// refuses is refused here too; without a command, as if one followed), then printed; no fd is
// taken, no file opened for the sandbox, nothing made.
int print_dry_run(Options& options)
{
    std::vector<std::string> command = options.command;
    if (options.command.empty())
        options.command = {"true"};
    (void)make_launch_plan(options, read_host(options));
    std::fputs(dry_run_text(options.option_words, command).c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

int cocoon_main(int argc, char** argv)
{
    const std::string prog = program_name(argc, argv);
    const std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
    // Security: cocoon is not a setuid program: user namespaces give it what it needs, and none of
    // its code is written to hold privileges its caller lacks against input the caller controls
    // (the class of bwrap's setuid CVEs). Installed setuid or setgid, it refuses before anything
    // is parsed, the internal PID 1 mode included.
    if (::getuid() != ::geteuid() || ::getgid() != ::getegid()) {
        std::fprintf(stderr, "%s: refusing to run setuid or setgid: install cocoon without the s bits\n", prog.c_str());
        // At once: no exit handler runs with raised privileges (nor LeakSanitizer's, which cannot
        // work in a setuid process).
        std::fflush(stderr);
        std::_Exit(1);
    }
    if (ns::is_pid1_mode(args))
        ns::pid1_main(args);
    // The relay worker, which the monitor runs as a fresh image (relay/worker.h); refused setuid
    // as everything is, above.
    if (relay::is_worker_mode(args))
        relay::worker_entry();
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
            // bwrap's first line names the path it was run by, as given.
            std::fputs(usage(argc > 0 ? argv[0] : prog).c_str(), stdout);
            return 0;
        }
        if (options.check)
            return run_check();
        if (options.version) {
            std::printf("cocoon %s\n", kVersion);
            return 0;
        }
        for (const std::string& warning : options.warnings)
            say("<4>", warning);
        if (options.dry_run)
            return print_dry_run(options);
        const ns::LaunchPlan plan = make_launch_plan(options, read_host(options));
        ns::CallerFds fds = take_caller_fds(options);
        // Security: each --relay SOCKET is pinned now, before the sandbox exists: a link or
        // socket put at its path later is never reached (relay/host_socket.h).
        for (const ns::RelayEndpoint& r : plan.process.relays)
            fds.monitor.relay_sockets.push_back(std::make_shared<const relay::HostSocket>(
                r.socket, plan.mounts.no_follow_sources, "--relay " + std::to_string(r.port) + " " + r.socket));
        // The sandbox is gone: the plan's and the options' destructors would
        // only free memory.
        return exit_now(ns::launch(plan, std::move(fds)));
    } catch (const UsageError& e) {
        if (prog == "bwrap" && dynamic_cast<const NoCommandError*>(&e)) {
            std::fputs(usage(argc > 0 ? argv[0] : prog).c_str(), stderr);  // bwrap's answer
            return 1;
        }
        // Invoked as bwrap, bwrap's text alone: a script that matches it finds it whole.
        say("<3>", prog == "bwrap" || e.detail().empty() ? e.what() : std::string(e.what()) + " (" + e.detail() + ")");
        return 1;
    } catch (const std::exception& e) {
        say("<3>", e.what());
        return 1;
    }
}

}  // namespace cocoon::tools
