// The launch sequence. launch() runs in the monitor; child_main() is the first
// process of the sandbox (PID 1 when there is a PID namespace), which holds
// every capability over its new namespaces until it drops them before exec.
#include "ns/launch.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <linux/keyctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <optional>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "mount/apply.h"
#include "net/listener.h"
#include "net/loopback.h"
#include "ns/channel.h"
#include "ns/env.h"
#include "ns/host_user.h"
#include "ns/join.h"
#include "ns/monitor/monitor.h"
#include "ns/monitor/terminal.h"
#include "ns/uid_map.h"
#include "ns/seccomp_policy.h"
#include "ns/userns_limit.h"
#include "reaper/reaper.h"
#include "reaper/status.h"

extern char** environ;

namespace cocoon::ns {
namespace {

void set_no_new_privs()
{
    // Security: no exec in the sandbox (setuid binaries, file capabilities)
    // can ever gain privilege.
    check(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)");
}

void set_parent_death_signal()
{
    check(::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)");
}

// bwrap's rule: --chdir, else the caller's cwd if it exists in the sandbox,
// else the command's $HOME, else "/". Sets PWD to match.
void enter_working_dir(const LaunchPlan& plan, std::vector<std::string>& env)
{
    std::string cwd = "/";
    if (const auto& dir = plan.process.chdir) {
        check(::chdir(dir->c_str()), "Can't chdir to " + *dir);
        cwd = *dir;
    } else if (::chdir(plan.host_cwd.c_str()) == 0) {
        cwd = plan.host_cwd;
    } else if (auto home = get_env(env, "HOME"); home && ::chdir(home->c_str()) == 0) {
        cwd = *home;
    } else {
        check(::chdir("/"), "Can't chdir to /");
    }
    set_env(env, "PWD", cwd);
}

// Start-up speed: the setup chain (monitor -> PID 1 -> PID 2) runs one step at
// a time, so it is kept on the CPU cocoon started on: each hand-off is then a
// local context switch rather than the wake-up of an idle CPU, which is slow
// on virtual machines. Every process gets the caller's affinity back before
// it does real work: the monitor with release(), the sandbox's processes
// (forked with the pin) with restore().
class CpuPin {
public:
    CpuPin()
    {
        cpu_set_t caller, one;
        int cpu = ::sched_getcpu();
        if (cpu < 0 || ::sched_getaffinity(0, sizeof caller, &caller) < 0)
            return;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (::sched_setaffinity(0, sizeof one, &one) == 0)
            m_caller = caller;
    }
    CpuPin(const CpuPin&) = delete;
    CpuPin& operator=(const CpuPin&) = delete;
    ~CpuPin() { release(); }

    void restore() const
    {
        if (m_caller)
            ::sched_setaffinity(0, sizeof *m_caller, &*m_caller);
    }
    void release()
    {
        restore();
        m_caller.reset();
    }

private:
    std::optional<cpu_set_t> m_caller;
};

// What one launch decides when it starts, beside the (const) plan.
struct LaunchContext {
    bool terminal_foreground = false;  // cocoon's group owned the terminal: the command gets it
    sigset_t caller_mask{};  // the signal mask the command gets back
    CpuPin pin;
    UniqueFd exe;  // cocoon's own binary (O_PATH), for plan.reexec_pid1
    std::vector<LoginSeed> login_seeds;  // --login-file: what the first process writes at each DEST
    int command_cgroup_procs = -1;  // the command's leaf cgroup.procs, for PID 2 (SandboxCgroup)
    bool send_command_pidfd = false;  // PID 2 sends its pidfd to the monitor (ns/monitor/command_watch.h)
    bool tmpfs_report = false;  // --json-status-fd: the monitor measures the sandbox's tmpfs mounts
};

constexpr const char* kPid1Mode = "--internal-pid1";

// Security: never leave a sandbox running unsupervised. SIGKILL, then wait.
void kill_and_reap(int pidfd)
{
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    siginfo_t info;
    while (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED) < 0 && errno == EINTR) {}
}

// Makes our process group the terminal's foreground one. SIGTTOU is blocked
// meanwhile: tcsetpgrp from a background group would stop us otherwise.
void take_terminal()
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::sigprocmask(SIG_BLOCK, &ttou, &old);
    ::tcsetpgrp(STDIN_FILENO, ::getpgrp());
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

// Puts the command in its own process group (--forward-signals signals that
// group), and hands it the terminal when cocoon had it.
void own_process_group(const LaunchContext& ctx)
{
    check(::setpgid(0, 0), "setpgid");
    if (ctx.terminal_foreground)
        take_terminal();
}

// --block-fd, --userns-block-fd: waits until fd has a byte or EOF, takes the
// byte, and closes the fd (the caller handed it over for this one use). poll
// first, so an O_NONBLOCK fd blocks too.
void wait_for_fd(CallerFd fd)
{
    pollfd pfd{fd.get(), POLLIN, 0};
    while (::poll(&pfd, 1, -1) < 0)
        if (errno != EINTR)
            throw SysError(errno, fd.name);
    char byte;
    while (::read(fd.get(), &byte, 1) < 0 && errno == EINTR) {}
}

// --lock-file: a shared POSIX lock on each file, held as long as this process
// keeps the returned fds (bwrap's lock, so a caller can test it with F_GETLK
// or wait for the sandbox with F_SETLKW). Paths are in the new root.
std::vector<UniqueFd> take_locks(const LaunchPlan& plan)
{
    std::vector<UniqueFd> held;
    for (const std::string& dest : plan.process.lock_files) {
        std::string path = dest.empty() || dest[0] != '/' ? "/" + dest : dest;
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd)
            throw SysError(errno, "Unable to open lock file " + dest);
        struct flock lock {};
        lock.l_type = F_RDLCK;
        lock.l_whence = SEEK_SET;
        if (::fcntl(fd.get(), F_SETLK, &lock) < 0)
            throw SysError(errno, "Unable to lock file " + dest);
        held.push_back(std::move(fd));
    }
    return held;
}

// --seccomp, --add-seccomp-fd: the caller's filters, in command-line order (the
// kernel runs the last one first). prctl, as bwrap does, so a filter that lets
// the next one load need only allow prctl(PR_SET_SECCOMP).
void load_seccomp(const LaunchPlan& plan)
{
    for (const std::vector<sock_filter>& program : plan.seccomp) {
        sock_fprog prog{static_cast<unsigned short>(program.size()), const_cast<sock_filter*>(program.data())};
        check(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0),
              "Unable to set up system call filtering as requested: prctl(PR_SET_SECCOMP)");
    }
}

// Closes every fd above 2 but those in `keep` (negative entries are ignored).
void close_fds_except(std::vector<int> keep)
{
    std::sort(keep.begin(), keep.end());
    unsigned first = 3;
    for (int fd : keep) {
        if (fd < static_cast<int>(first))
            continue;
        if (static_cast<unsigned>(fd) > first)
            check(::close_range(first, static_cast<unsigned>(fd) - 1, 0), "close_range");
        first = static_cast<unsigned>(fd) + 1;
    }
    check(::close_range(first, ~0U, 0), "close_range");
}

// The command's process: final privileges, then exec. Throws on failure.
// proc_dir: the host's /proc, held for --disable-userns only. keep: the one
// caller fd the command keeps (--sync-fd with --as-pid-1), else invalid.
// What the command's exec needs, made before PID 1 forks it: PID 2 then
// allocates nothing between fork and exec. Start-up speed: every heap write
// there (building strings, and malloc_consolidate walking the arena) is a
// copy-on-write page fault on the path to the command's first instruction.
struct ExecImage {
    std::vector<std::string> env;
    std::vector<char*> argv, envp;
    const char* program = nullptr;
    std::vector<int> inherited;  // SandboxFds::inherited: open in the command
};

// Enters the working directory (so PWD is known) and builds argv and envp.
ExecImage prepare_exec(const LaunchPlan& plan, const std::vector<UniqueFd>& inherited)
{
    ExecImage image;
    for (const UniqueFd& fd : inherited)
        image.inherited.push_back(fd.get());
    image.env = plan.env;
    enter_working_dir(plan, image.env);
    for (const std::string& arg : plan.argv)
        image.argv.push_back(const_cast<char*>(arg.c_str()));
    image.argv.push_back(nullptr);
    // --argv0: the program is still found by the command's first word.
    image.program = image.argv[0];
    if (plan.process.argv0)
        image.argv[0] = const_cast<char*>(plan.process.argv0->c_str());
    for (const std::string& entry : image.env)
        image.envp.push_back(const_cast<char*>(entry.c_str()));
    image.envp.push_back(nullptr);
    return image;
}

[[noreturn]] void exec_command(const LaunchPlan& plan, const LaunchContext& ctx, ExecImage& image, int proc_dir,
                               CallerFd keep, CapSet bounding = kAllCaps)
{
    if (plan.process.new_session)
        // Security: a new session has no controlling terminal, so the command
        // cannot push input into the caller's terminal with TIOCSTI.
        check(::setsid(), "setsid");
    else if (plan.process.forward_signals)
        own_process_group(ctx);

    // --uid/--gid with --userns: ids that the joined namespace maps.
    if (plan.switch_gid)
        check(::setresgid(*plan.switch_gid, *plan.switch_gid, *plan.switch_gid),
              "unable to switch to gid " + std::to_string(*plan.switch_gid));
    if (plan.switch_uid) {
        // Security: PR_SET_KEEPCAPS keeps the permitted set across the switch
        // away from uid 0 (the effective set is cleared regardless); it lasts
        // only until exec, and apply_caps below trims the set to what the
        // plan allows, so the command gets no capability the plan does not name.
        check(::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), "prctl(PR_SET_KEEPCAPS)");
        check(::setresuid(*plan.switch_uid, *plan.switch_uid, *plan.switch_uid),
              "unable to switch to uid " + std::to_string(*plan.switch_uid));
    }
    // Security: --disable-userns: the command gets a user namespace of its own
    // that is the last one allowed, so it can make no more (and its
    // capabilities, if any, are over that namespace only). Before apply_caps:
    // the new namespace comes with a full capability set to trim.
    if (plan.process.disable_userns)
        enter_nested_user_namespace(proc_dir);
    if (plan.process.disable_userns || plan.process.assert_userns_disabled)
        assert_user_namespaces_disabled();
    apply_caps(plan.caps, plan.ambient_caps, bounding);
    set_no_new_privs();
    // Security: the fds that cross into the sandbox are stdin, stdout and
    // stderr, `keep`, and those the caller left inheritable for the command
    // (as bwrap passes them: the caller's decision, taken by tools/entry.cc
    // before cocoon opened anything). Nothing of cocoon's may follow them:
    // the setup channel would let the command forge the monitor's messages,
    // a directory fd of setup's would be a way back into the host's tree. So
    // every fd is marked CLOEXEC here, whatever its own flag says, and only
    // those named are unmarked.
    check(::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC), "close_range");
    if (keep)
        check(::fcntl(keep.fd.release(), F_SETFD, 0), keep.name);
    for (int fd : image.inherited)
        if (::fcntl(fd, F_SETFD, 0) < 0)
            throw SysError(errno, "fcntl(F_SETFD) of inherited fd " + std::to_string(fd));

    environ = image.envp.data();  // execvp searches the command's PATH, not ours
    ::sigprocmask(SIG_SETMASK, &ctx.caller_mask, nullptr);
    ctx.pin.restore();
    // Security: a session keyring of its own, new and empty: none of the
    // caller's keys is reachable, and nothing the command files there
    // outlives it. Before the policy, which refuses keyctl. EPERM: keyctl is
    // refused already (cocoon in a cocoon sandbox), so no keyring is
    // reachable to leave; ENOSYS: a kernel without keys.
    if (::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0 && errno != EPERM && errno != ENOSYS)
        throw SysError(errno, "Can't join a new session keyring (keyctl)");
    // Security: the filters come last, after no_new_privs (which the kernel
    // requires of an unprivileged filter), so they need to allow nothing but
    // the exec itself: cocoon's default policy, then the caller's, which
    // stack on it (the kernel runs them all; the strictest answer wins).
    if (plan.process.default_seccomp)
        load_default_seccomp_policy();
    load_seccomp(plan);
    ::execvp(image.program, image.argv.data());
    throw SysError(errno, "execvp " + plan.argv[0]);
}

// PID 2 (between fork and exec) has an exception boundary of its own: it
// reports to the monitor and exits, never unwinding into PID 1's frames.
[[noreturn]] void command_main(const LaunchPlan& plan, const LaunchContext& ctx, ExecImage& image, int proc_dir,
                               int sock, CapSet bounding)
{
    try {
        move_into_command_cgroup(ctx.command_cgroup_procs, (plan.clone_flags & CLONE_NEWCGROUP) != 0);
        if (ctx.send_command_pidfd) {
            UniqueFd self(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
            if (!self)
                throw SysError(errno, "pidfd_open");
            send_message(sock, PidfdMsg{false, std::move(self)});
        }
        exec_command(plan, ctx, image, proc_dir, CallerFd(), bounding);
    } catch (const std::exception& e) {
        send_message(sock, error_message(e, "13 (exec)"));
    }
    ::_exit(1);
}

NamespacesMsg own_namespaces(const LaunchPlan& plan)
{
    NamespacesMsg msg;
    for (size_t i = 0; i < kReportedNamespaces.size(); ++i) {
        struct stat st;
        std::string path = std::string("/proc/self/ns/") + kReportedNamespaces[i].name;
        if ((plan.clone_flags & kReportedNamespaces[i].clone_flag) && ::stat(path.c_str(), &st) == 0)
            msg.inodes[i] = st.st_ino;
    }
    return msg;
}

// Dies with the monitor; and if the monitor is gone already (it died between
// clone and here), goes now: its end of the channel is closed then.
void die_with_monitor(int sock)
{
    set_parent_death_signal();
    pollfd pfd{sock, POLLIN, 0};
    if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP))
        ::_exit(1);
}

// One byte from the monitor: it wrote the id maps (--host-user, launch()),
// or, once per --login-file, it watches DEST (monitor.cc).
void wait_for_monitor(int sock)
{
    char byte;
    ssize_t n;
    while ((n = ::recv(sock, &byte, 1, 0)) < 0 && errno == EINTR) {}
    if (n != 1)
        ::_exit(1);  // the monitor is gone
}

// Whether PID 2 shares PID 1's memory until its exec (vfork, see child_main).
// Never with --disable-userns: the kernel refuses a user namespace to a
// process sharing its memory (and a new one comes with a full bounding set).
bool command_shares_memory(const LaunchPlan& plan)
{
    return !plan.reexec_pid1 && !plan.process.disable_userns && !plan.process.assert_userns_disabled;
}

// The bounding set PID 1 and PID 2 have after the fork: the first process
// drops it before a vfork, once for both.
CapSet bounding_after_fork(const LaunchPlan& plan)
{
    return command_shares_memory(plan) ? plan.caps : kAllCaps;
}

// PID 1's last act before it reaps, in this image or a fresh one: it tells
// the command (held at the start of PID 2) that it may go on.
void release_command(int go)
{
    if (go >= 0 && ::write(go, "1", 1) != 1)
        ::_exit(1);  // PID 2 then sees EOF and gives up too
}

// Reaps until the command exits; reports its status to the monitor, exits.
[[noreturn]] void reap(pid_t command, bool forward, int sock)
{
    int status = reaper::run(command, forward);
    // A new PID namespace's init (never a holder outside one: -1 would mean
    // every process of the caller's) ends what is left, for the report.
    if (::getpid() == 1)
        reaper::end_leftovers();
    // A signal's number and core flag are more than this process's exit
    // code can carry; an exit code is carried whole, and the monitor is not
    // woken once more for it (start-up speed: it waits for this exit next).
    if (!WIFEXITED(status))
        send_message(sock, StatusMsg{status});
    // Exiting as PID 1 makes the kernel kill every process left in the sandbox.
    ::_exit(reaper::exit_code(status));
}

// PID 1 after the fork: no privilege, not ptraceable, reaping until the
// command exits. go: with plan.reexec_pid1, the pipe that releases the
// command, written once PID 1 runs as a fresh image (see below).
[[noreturn]] void be_reaper(const LaunchPlan& plan, const LaunchContext& ctx, pid_t command, int sock, UniqueFd go,
                            CapSet bounding)
{
    // Security: the command runs as the same uid; without this it could
    // ptrace PID 1 and use the setup channel or PID 1's bounding set. This
    // holds even against a command given --cap-add ALL: a non-dumpable
    // process may be ptraced (or its memory read, its /proc/PID/ns opened)
    // only with CAP_SYS_PTRACE in the user namespace that owns its mm. A
    // forked mm stays in the namespace the sandbox was made from (the
    // caller's, or the one --userns names), over which the command holds
    // nothing. With reexec_pid1 the new image does it first thing
    // (pid1_main) and the command waits until then; this image stays
    // dumpable meanwhile, so the caller, told the child-pid at step 1, may
    // open /proc/PID/ns/* at every moment (this mm is the caller's
    // namespace's, where a non-dumpable process refuses the caller).
    // (After a vfork the first process did it already, before the command ran.)
    if (!plan.reexec_pid1 && !command_shares_memory(plan))
        check(::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)");
    // Off the command's CPU first: what PID 1 does from here on is not on
    // the start-up path, and the command (PID 2) is.
    ctx.pin.restore();
    apply_caps(0, false, bounding);
    set_no_new_privs();
    if (plan.reexec_pid1) {
        // --info-fd/--json-status-fd with a new user namespace: the caller
        // must be able to open /proc/PID/ns of the child-pid it is told (to
        // join the sandbox, as with bwrap), and the kernel lets it only if
        // PID 1's mm belongs to a user namespace the caller owns. An exec
        // makes a new mm in the current one, the sandbox's. Security: the
        // command holds no CAP_SYS_PTRACE there (make_launch_plan asks for
        // that), so it still cannot reach PID 1; and it waits on `go` until
        // the new image has made itself non-dumpable again.
        for (int fd : {sock, go.get()})
            check(::fcntl(fd, F_SETFD, 0), "fcntl(F_SETFD)");
        // The new image keeps this process's name (bwrap's PID 1 is called
        // as the caller called it), which exec would replace.
        char name[16] = {};
        ::prctl(PR_GET_NAME, name, 0, 0, 0);
        const std::string args[] = {name,
                                    kPid1Mode,
                                    std::to_string(command),
                                    plan.process.forward_signals ? "1" : "0",
                                    std::to_string(sock),
                                    std::to_string(go.get())};
        std::vector<char*> argv;
        for (const std::string& arg : args)
            argv.push_back(const_cast<char*>(arg.c_str()));
        argv.push_back(nullptr);
        char* envp[] = {nullptr};
        ::syscall(SYS_execveat, ctx.exe.get(), "", argv.data(), envp, AT_EMPTY_PATH);
        throw SysError(errno, "Can't run PID 1 as a fresh image (execveat)");
    }
    reap(command, plan.process.forward_signals, sock);
}

// The sandbox's first process. Never returns: it execs the command, becomes
// the reaper, or reports what failed (and in which step) to the monitor and
// exits 1. fds: the caller's fds the sandbox uses (this process's copies).
[[noreturn]] void child_main(const LaunchPlan& plan, const LaunchContext& ctx, SandboxFds fds, bool report, int sock)
{
    std::string_view step;  // constant text: naming a step allocates nothing
    try {
        // 1. Report the new namespaces (--info-fd, --json-status-fd) while
        // /proc/self/ns is still ours to read.
        step = "1 (namespace report)";
        if (report)
            send_message(sock, own_namespaces(plan));
        // 2. User namespace: map the caller's ids, or with --userns-block-fd
        // wait for the caller to write the maps (it learnt our pid from --info-fd).
        step = "2 (id maps)";
        if (fds.userns_block)
            wait_for_fd(std::move(fds.userns_block));
        else if (plan.host_user)
            wait_for_monitor(sock);  // maps naming another user are the monitor's to write
        else if (plan.clone_flags & CLONE_NEWUSER)
            write_id_maps(plan.uid, plan.real_uid, plan.gid, plan.real_gid);
        // 3. --disable-userns: cap the user namespaces below ours at one.
        step = "3 (user namespace limit)";
        UniqueFd proc_dir = plan.process.disable_userns ? limit_user_namespaces() : UniqueFd();
        // 4. Die with the monitor (--die-with-parent, --forward-signals).
        step = "4 (parent death signal)";
        if (plan.process.die_with_parent || plan.process.forward_signals)
            die_with_monitor(sock);
        // 5. UTS namespace: hostname.
        step = "5 (hostname)";
        if (const auto& name = plan.process.hostname)
            check(::sethostname(name->data(), name->size()), "sethostname");
        // 6. Network namespace: lo up, as bwrap does; nothing else exists in it.
        step = "6 (loopback)";
        if (plan.clone_flags & CLONE_NEWNET)
            net::loopback_up();
        if (plan.process.egress)
            net::add_loopback_address(net::kTransparentNet);
        // 7. Relay listeners on the sandbox's loopback, handed to the monitor:
        // the sandbox sees only 127.0.0.1:PORT, never the host's socket.
        step = "7 (relay listeners)";
        // --egress: the proxy's, then the transparent listeners and the resolver's socket.
        for (const RelayEndpoint& relay : plan.process.relays)
            send_message(sock, ListenersMsg{net::listen_loopback(relay.port, "--relay")});
        if (const auto& egress = plan.process.egress) {
            send_message(sock, ListenersMsg{net::listen_loopback(egress->port, "--egress")});
            send_message(sock, ListenersMsg{net::listen_transparent(egress->transparent_ports)});
            std::vector<UniqueFd> dns;
            dns.push_back(net::dns_socket());
            send_message(sock, ListenersMsg{std::move(dns)});
        }
        // 8. Mount namespace: the new root, in command-line order, then
        // pivot_root; the data and --bind-fd fds are used up here.
        step = "8 (mounts)";
        // Security: --host-user: the sources are opened with the caller's
        // (root's) rights; then this process becomes USER for good, before it
        // makes anything, so that everything the sandbox makes or touches on
        // the host from here on, the command most of all, is USER's doing.
        std::function<void()> sources_opened;
        if (plan.host_user)
            sources_opened = [&] {
                step = "8 (--host-user)";
                become_host_user(plan.uid, plan.gid);
                step = "8 (mounts)";
            };
        std::vector<UniqueFd> tmpfs = mount::apply(plan.mounts, std::move(fds.mount), sources_opened);
        // --json-status-fd: the monitor measures what the tmpfs mounts hold
        // through these fds, never through paths the command controls.
        if (ctx.tmpfs_report && !tmpfs.empty()) {
            tmpfs.resize(std::min(tmpfs.size(), kMaxTmpfsReported));
            send_message(sock, TmpfsMsg{std::move(tmpfs)});
        }
        tmpfs.clear();
        // --login-file: each DEST starts as SRC's copy; the monitor gets its
        // directory (a tmpfs) to watch and to read DEST through.
        step = "8 (login files)";
        for (size_t i = 0; i < plan.process.login_files.size(); ++i)
            send_message(sock, LoginDirMsg{static_cast<uint32_t>(i),
                                           seed_login_file(plan.process.login_files[i], ctx.login_seeds[i])});
        // The command starts only once the monitor watches every DEST: a
        // renewal made before the watch would come with no event, and only
        // a close event says that an in-place writer is done.
        for (size_t i = 0; i < plan.process.login_files.size(); ++i)
            wait_for_monitor(sock);
        // 9. --lock-file: this process holds the locks until the sandbox ends
        // (the command's copies of the fds close at exec; a POSIX lock
        // belongs to the process that took it).
        step = "9 (lock files)";
        std::vector<UniqueFd> locks = take_locks(plan);
        // 10. --userns2: setup is done; PID 1 and the command live in this
        // user namespace, below the one that owns the sandbox's namespaces.
        step = "10 (--userns2)";
        if (fds.userns2)
            join_namespace(fds.userns2, CLONE_NEWUSER);
        fds.userns2 = {};
        // 11. --block-fd: setup is done; wait for the caller's go.
        step = "11 (--block-fd)";
        if (fds.block)
            wait_for_fd(std::move(fds.block));
        // 12. A PID namespace (or --sync-fd/--lock-file, which need a holder
        // that outlives the command's exec): stay as PID 1 to reap, and fork
        // the command (13, PID 2).
        step = "12 (reaper)";
        if (plan.fork_command) {
            sigset_t block = reaper::signals_to_block(plan.process.forward_signals);
            check(::sigprocmask(SIG_SETMASK, &block, nullptr), "sigprocmask");
            pid_t holder = ::getpid();
            // plan.reexec_pid1: the command waits until PID 1 runs as a fresh
            // image and is non-dumpable again (be_reaper).
            UniqueFd go_read, go_write;
            if (plan.reexec_pid1) {
                int go[2];
                check(::pipe2(go, O_CLOEXEC), "pipe2");
                go_read.reset(go[0]);
                go_write.reset(go[1]);
            }
            ExecImage image = prepare_exec(plan, fds.inherited);
            // Start-up speed: PID 2 shares PID 1's memory until its exec
            // (vfork), so neither the page tables of cocoon's image are
            // copied nor its pages copied on write: ~100 us of the start-up
            // path. PID 1 waits meanwhile, so PID 2 writes nothing PID 1
            // reads afterwards (the go pipe is unused here; `environ` is
            // PID 1's no more). Not where PID 2 waits for PID 1 (the go pipe
            // of reexec_pid1) or makes a user namespace, which the kernel
            // refuses to a process sharing its memory.
            const bool share_memory = command_shares_memory(plan);
            // Security: PID 1 is stopped until the command runs, so it cannot
            // make itself non-dumpable in time (be_reaper): it does so now. The
            // flag belongs to the memory, which PID 2 leaves at its exec.
            // The bounding set both processes end with is dropped here, once:
            // PID 1 would otherwise drop it while the command starts on its CPU.
            if (share_memory) {
                check(::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)");
                drop_bounding(plan.caps);
            }
            pid_t command = static_cast<pid_t>(check(share_memory ? ::vfork() : ::fork(), "fork"));
            if (command == 0) {
                go_write.reset();
                char byte;
                if (go_read && ::read(go_read.get(), &byte, 1) != 1)
                    ::_exit(1);  // PID 1 failed and reported why
                go_read.reset();
                // Without a PID namespace the kernel does not end the command
                // with this process; --die-with-parent still must.
                if (!(plan.clone_flags & CLONE_NEWPID) &&
                    (plan.process.die_with_parent || plan.process.forward_signals)) {
                    set_parent_death_signal();
                    if (::getppid() != holder)
                        ::_exit(1);
                }
                command_main(plan, ctx, image, proc_dir.get(), sock, bounding_after_fork(plan));
            }
            // Security: the holder keeps only what it needs of the caller's
            // fds (bwrap's init does the same): a pipe or directory the
            // caller let slip through must not live on in a process that may
            // outlive cocoon. The fds handed over to the command are its
            // alone: a pipe's reader waiting for EOF sees it when the
            // command closes its end, as under bwrap, whose init closes them.
            fds.inherited.clear();
            proc_dir.reset();
            go_read.reset();
            // PID 1 holds no directory of the command's (prepare_exec entered
            // it): a busy working directory would make its unmount fail.
            check(::chdir("/"), "chdir /");
            std::vector<int> keep{sock, fds.sync.get(), ctx.exe.get(), go_write.get()};
            for (const UniqueFd& lock : locks)
                keep.push_back(lock.get());
            close_fds_except(keep);
            be_reaper(plan, ctx, command, sock, std::move(go_write), bounding_after_fork(plan));
        }
        // 13. Otherwise this process becomes the command, and the one that
        // keeps --sync-fd.
        step = "13 (exec)";
        ExecImage image = prepare_exec(plan, fds.inherited);
        exec_command(plan, ctx, image, proc_dir.get(), std::move(fds.sync));
    } catch (const std::exception& e) {
        send_message(sock, error_message(e, std::string(step)));
        ::_exit(1);
    }
}

// --die-with-parent watches the parent process (not the thread that started
// us, as PR_SET_PDEATHSIG would) through a pidfd.
UniqueFd watch_parent()
{
    pid_t parent = ::getppid();
    UniqueFd fd(static_cast<int>(::syscall(SYS_pidfd_open, parent, 0)));
    if (!fd)
        throw SysError(errno, "--die-with-parent: pidfd_open(" + std::to_string(parent) + ")");
    if (::getppid() != parent)
        throw UsageError("--die-with-parent: the parent process has already exited");
    return fd;
}

}  // namespace

bool is_pid1_mode(const std::vector<std::string>& args)
{
    return !args.empty() && args[0] == kPid1Mode;
}

void pid1_main(const std::vector<std::string>& args)
{
    // First of all: nothing in the sandbox may ptrace this image (the
    // command is held until release_command, below).
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || args.size() != 5 || ::getpid() != 1)
        ::_exit(1);
    ::prctl(PR_SET_NAME, program_invocation_name, 0, 0, 0);
    auto number = [](const std::string& text) { return static_cast<int>(std::strtol(text.c_str(), nullptr, 10)); };
    const pid_t command = number(args[1]);
    const int sock = number(args[3]), go = number(args[4]);
    ::fcntl(sock, F_SETFD, FD_CLOEXEC);
    release_command(go);
    ::close(go);
    reap(command, args[2] == "1", sock);
}

int launch(const LaunchPlan& plan, CallerFds fds)
{
    // The report's clock and CPU baseline start here, and only for a report
    // (the clock's first read faults in the vDSO's data pages: ~20 us).
    std::optional<UsageMeter> usage;
    if (fds.monitor.json_status)
        usage.emplace();
    LaunchContext ctx;
    ctx.tmpfs_report = static_cast<bool>(fds.monitor.json_status);
    ctx.terminal_foreground =
        plan.process.forward_signals && ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
    UniqueFd parent = plan.process.die_with_parent ? watch_parent() : UniqueFd();

    int sv[2];
    check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
    UniqueFd sock(sv[0]), child_sock(sv[1]);

    // Block the signals the monitor will read from a signalfd before the
    // sandbox exists, so none is lost or kills us in between.
    sigset_t handled = monitor_signals(plan);
    check(::sigprocmask(SIG_BLOCK, &handled, &ctx.caller_mask), "sigprocmask");

    // --login-file: every SRC is opened and read before the sandbox exists.
    LoginFiles logins(plan.process.login_files, plan.log_prefix, plan.mounts.no_follow_sources);
    ctx.login_seeds = logins.seeds();
    // The caller's terminals, as they are before the command can change them.
    Terminals terminals = Terminals::save();

    const bool report = fds.monitor.info || fds.monitor.json_status;
    // The sandbox's cgroup, limits set, before the first process exists.
    SandboxCgroup cgroup =
        SandboxCgroup::make(plan.process.cgroup, static_cast<bool>(fds.monitor.json_status), plan.log_prefix);
    // The first process goes into the sandbox's cgroup when it stays as PID 1
    // (its PID 2 then moves itself into the command's leaf), else straight
    // into the leaf: it is the command.
    const int first_cgroup = plan.fork_command ? cgroup.fd() : cgroup.command_fd();
    if (plan.fork_command) {
        ctx.command_cgroup_procs = cgroup.command_procs_fd();
        ctx.send_command_pidfd = cgroup.pid1_movable();
    }
    if (plan.reexec_pid1) {
        ctx.exe.reset(::open("/proc/self/exe", O_PATH | O_CLOEXEC));
        if (!ctx.exe)
            throw SysError(errno, "Can't open /proc/self/exe");
    }
    // The first process's view: none of the monitor's own fds. The joining
    // helper drops them too, but keeps the cgroup's until it has cloned.
    auto in_helper = [&] {
        sock.reset();
        parent.reset();
        fds.monitor = {};
        logins = LoginFiles();
        terminals.forget();
    };
    auto in_child = [&] {
        in_helper();
        cgroup.close_in_child();
    };
    sys::Cloned first;
    if (fds.sandbox.userns || fds.sandbox.pidns) {
        // --userns, --pidns: a helper joins them and clones the first process.
        JoinedChild joined =
            clone_in_joined_namespaces(plan, fds.sandbox, child_sock.get(), first_cgroup, in_helper, [&] {
                cgroup.close_in_child();
                child_main(plan, ctx, std::move(fds.sandbox), report, child_sock.get());
            });
        if (!joined.pidfd || joined.pid <= 0) {
            if (joined.pidfd)
                kill_and_reap(joined.pidfd.get());
            auto msg = receive_queued_message(sock.get());
            if (auto* err = msg ? std::get_if<ErrorMsg>(&*msg) : nullptr)
                rethrow(*err);
            throw UsageError("Joining the namespaces failed");
        }
        first = sys::Cloned{joined.pid, std::move(joined.pidfd)};
    } else {
        try {
            first = sys::clone3(plan.clone_flags, first_cgroup);
        } catch (const SysError& e) {
            throw SysError(e.code(), "Creating new namespace failed");
        }
        if (first.pid == 0) {
            in_child();
            child_main(plan, ctx, std::move(fds.sandbox), report, child_sock.get());
        }
    }
    child_sock.reset();
    // --host-user: the first process waits for its id maps (child_main, step 2).
    if (plan.host_user) {
        try {
            map_host_user(first.pid, plan.uid, plan.real_uid, plan.gid, plan.real_gid);
            if (::send(sock.get(), "1", 1, MSG_NOSIGNAL) != 1)
                throw SysError(errno, "--host-user: send");
        } catch (...) {
            kill_and_reap(first.pidfd.get());
            throw;
        }
    }
    // The sandbox has its own copies. The monitor keeps none (as bwrap's), so
    // the sync fd reaches EOF exactly when the sandbox ends, cocoon alive or not.
    fds.sandbox = {};
    ctx.pin.release();
    if (!plan.process.relays.empty()) {
        // Each relayed connection holds about two fds in the monitor; use the
        // whole hard limit (the sandbox was cloned with the caller's limits).
        rlimit limit;
        if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
            limit.rlim_cur = limit.rlim_max;
            ::setrlimit(RLIMIT_NOFILE, &limit);
        }
    }

    int code;
    try {
        code = monitor({plan, first.pid, first.pidfd.get(), std::move(sock), std::move(parent), std::move(fds.monitor),
                        usage, cgroup, std::move(logins), terminals});
    } catch (...) {
        // After a setup error the sandbox is gone already; the signal then
        // finds nothing.
        kill_and_reap(first.pidfd.get());
        (void)terminals.restore();
        throw;
    }
    if (ctx.terminal_foreground)
        take_terminal();  // back from the sandbox's (now gone) process group
    return code;
}

}  // namespace cocoon::ns
