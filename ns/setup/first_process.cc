// The sandbox's first process (PID 1 when there is a PID namespace), which
// holds every capability over its new namespaces until it drops them before
// exec: its set-up steps, the command's exec, and PID 1 the reaper.
// Runs in: setup, pid1, pid2: the first process sets up, forks PID 2, and becomes PID 1.
#include "ns/launch_context.h"
#include "ns/setup/command.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "mount/apply.h"
#include "net/listener.h"
#include "net/loopback.h"
#include "ns/channel.h"
#include "ns/host_user.h"
#include "ns/join.h"
#include "ns/setup/spawn.h"
#include "ns/setup/uid_map.h"
#include "ns/setup/userns_limit.h"
#include "reaper/reaper.h"
#include "reaper/status.h"
#include "relay/fd_message.h"
#ifdef COCOON_TEST_HOOKS
#include "ns/setup/test_hook.h"
#endif

namespace cocoon::ns {
namespace {

constexpr const char* kPid1Mode = "--internal-pid1";

#ifdef COCOON_TEST_HOOKS
// Test-only: read from the environment by child_main; PID 1 keeps it unless it re-executes.
std::optional<test_hook::SetupHook> g_setup_hook;
#endif

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

// Reaps until the command exits; reports its status to the monitor, exits. logins: the run has
// --login-file.
[[noreturn]] void reap(pid_t command, bool forward, bool logins, int sock)
{
#ifdef COCOON_TEST_HOOKS
    if (g_setup_hook)
        test_hook::misbehave(*g_setup_hook, sock, true);
#endif
    int status = reaper::run(command, forward);
    bool told = false;
    // A new PID namespace's init (never a holder outside one: -1 would mean
    // every process of the caller's) ends what is left, for the report.
    if (::getpid() == 1) {
        // A process the command left may be writing a --login-file DEST in place: the kill cuts
        // it short. The monitor is told first and reads what DEST became (the kill is a stop
        // like one it sends); its answer, or 2 s, and then the kill.
        if (logins && reaper::has_children()) {
            send_message(sock, StatusMsg{status, true});
            told = true;
            pollfd answer{sock, POLLIN, 0};
            while (::poll(&answer, 1, 2000) < 0 && errno == EINTR) {}
            // Read, not left queued: a socket closed with unread data resets its peer's reads.
            char byte;
            (void)::recv(sock, &byte, 1, MSG_DONTWAIT);
        }
        reaper::end_leftovers();
    }
    // A signal's number and core flag are more than this process's exit
    // code can carry; an exit code is carried whole, and the monitor is not
    // woken once more for it (start-up speed: it waits for this exit next).
    if (!told && !WIFEXITED(status))
        send_message(sock, StatusMsg{status});
    // Exiting as PID 1 makes the kernel kill every process left in the sandbox.
    ::_exit(reaper::exit_status(status).code);
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
    // (Without reexec_pid1 the first process did it already, before the fork:
    // fork_command_and_reap.)
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
        const std::string args[] = {
            name,
            kPid1Mode,
            std::to_string(command),
            std::to_string((plan.process.forward_signals ? 1 : 0) | (plan.process.login_files.empty() ? 0 : 2)),
            std::to_string(sock),
            std::to_string(go.get())};
        std::vector<char*> argv;
        for (const std::string& arg : args)
            argv.push_back(const_cast<char*>(arg.c_str()));
        argv.push_back(nullptr);
#ifndef COCOON_TEST_HOOKS
        char* envp[] = {nullptr};
#else
        // Test-only: the re-executed PID 1 keeps the hook (ns/setup/test_hook.h).
        char* envp[] = {nullptr, nullptr};
        std::string hook_env;
        if (g_setup_hook) {
            hook_env = std::string(test_hook::kSetupEnv) + "=" + g_setup_hook->mode + ":" +
                       std::to_string(g_setup_hook->delay_ms);
            envp[0] = hook_env.data();
        }
#endif
        ::syscall(SYS_execveat, ctx.exe.get(), "", argv.data(), envp, AT_EMPTY_PATH);
        throw SysError(errno, "Can't run PID 1 as a fresh image (execveat)");
    }
    reap(command, plan.process.forward_signals, !plan.process.login_files.empty(), sock);
}

// What the first process's steps share: the plan, the caller's fds it uses
// (this process's copies), and what a step keeps for a later one.
struct Setup {
    const LaunchPlan& plan;
    const LaunchContext& ctx;
    SandboxFds fds;
    bool report;
    int sock;  // the setup channel to the monitor
    std::string_view step;  // the step running, for its error; constant text (allocates nothing)
    UniqueFd proc_dir;  // --disable-userns: the host's /proc, for the command's nested namespace
    std::vector<UniqueFd> locks;  // --lock-file
};

// 1. Report the new namespaces (--info-fd, --json-status-fd) while
// /proc/self/ns is still ours to read.
void report_namespaces(Setup& s)
{
    if (!s.report)
        return;
    NamespacesMsg msg;
    for (size_t i = 0; i < kReportedNamespaces.size(); ++i) {
        struct stat st;
        std::string path = std::string("/proc/self/ns/") + kReportedNamespaces[i].name;
        // A network namespace made beside set-up is not this process's yet: the monitor, which
        // made it, reports it.
        const unsigned long long flag = kReportedNamespaces[i].clone_flag;
        if ((s.plan.clone_flags & flag) && !(flag == CLONE_NEWNET && s.ctx.netns_beside) &&
            ::stat(path.c_str(), &st) == 0)
            msg.inodes[i] = st.st_ino;
    }
    send_message(s.sock, msg);
}

// 2. User namespace: map the caller's ids, or with --userns-block-fd wait for
// the caller to write the maps (it learnt our pid from --info-fd).
void map_ids(Setup& s)
{
    const LaunchPlan& plan = s.plan;
    if (s.fds.userns_block)
        wait_for_fd(std::move(s.fds.userns_block));
    else if (plan.host_user)
        wait_for_monitor(s.sock);  // maps naming another user are the monitor's to write
    else if (plan.clone_flags & CLONE_NEWUSER)
        write_id_maps(plan.uid, plan.real_uid, plan.gid, plan.real_gid);
}

// 3. --disable-userns: cap the user namespaces below ours at one.
void limit_nested_user_namespaces(Setup& s)
{
    if (s.plan.process.disable_userns)
        s.proc_dir = limit_user_namespaces();
}

// 4. Die with the monitor (--die-with-parent, --forward-signals); and if the
// monitor is gone already (it died between clone and here), go now: its end of
// the channel is closed then.
void die_with_the_monitor(Setup& s)
{
    if (!s.plan.process.die_with_parent && !s.plan.process.forward_signals)
        return;
    set_parent_death_signal();
    pollfd pfd{s.sock, POLLIN, 0};
    if (::poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP))
        ::_exit(1);
}

// 5. UTS namespace: hostname.
// The sandbox's UTS namespace is this process's own to name, so a refusal (EPERM) under a seccomp
// filter is the filter's: a container's default profile (Podman's, Docker's) refuses sethostname
// without CAP_SYS_ADMIN. Said so, in bwrap's words first.
void set_hostname(Setup& s)
{
    const auto& name = s.plan.process.hostname;
    if (!name || ::sethostname(name->data(), name->size()) == 0)
        return;
    const int err = errno;
    const std::string what = "Can't set hostname to " + *name;
    if (err != EPERM || !sys::under_seccomp_filter())
        throw SysError(err, what);
    throw UsageError(what + ": " + std::strerror(err) +
                     ": refused by the seccomp filter cocoon runs under, in the sandbox's own UTS namespace (a "
                     "container's default profile refuses sethostname without CAP_SYS_ADMIN: run the container "
                     "with a profile that allows it, --security-opt seccomp=PROFILE), or leave out --hostname");
}

// 6. Network namespace: lo up, as bwrap does; nothing else exists in it but,
// for --egress, the synthetic addresses' network (relay/dns.h).
void bring_up_loopback(Setup& s)
{
    // Made beside set-up: lo came up there, or comes up once the namespace is joined.
    if ((s.plan.clone_flags & CLONE_NEWNET) && !s.ctx.netns_beside)
        net::loopback_up();
    if (s.plan.process.egress)
        net::add_loopback_address(net::kTransparentNet);
}

// 7. Relay listeners on the sandbox's loopback, handed to the monitor: the
// sandbox sees only 127.0.0.1:PORT, never the host's socket. --egress: the
// proxy's, then the transparent listeners and the resolver's socket. Each
// message names its kind (and index): the monitor infers nothing from order.
void send_listeners(Setup& s)
{
    const std::vector<RelayEndpoint>& relays = s.plan.process.relays;
    for (size_t i = 0; i < relays.size(); ++i)
        send_message(s.sock, ListenersMsg{Wire::RelayListener, static_cast<uint32_t>(i),
                                          net::listen_loopback(relays[i].port, "--relay")});
    if (const auto& egress = s.plan.process.egress) {
        send_message(s.sock, ListenersMsg{Wire::EgressProxy, 0, net::listen_loopback(egress->port, "--egress")});
        std::vector<UniqueFd> transparent = net::listen_transparent(egress->transparent_ports);
        for (size_t i = 0; i < transparent.size(); ++i) {
            std::vector<UniqueFd> one;
            one.push_back(std::move(transparent[i]));
            send_message(s.sock, ListenersMsg{Wire::Transparent, static_cast<uint32_t>(i), std::move(one)});
        }
        std::vector<UniqueFd> dns;
        dns.push_back(net::dns_socket());
        send_message(s.sock, ListenersMsg{Wire::Resolver, 0, std::move(dns)});
    }
}

// 8. Mount namespace: the new root, in command-line order, then pivot_root;
// the data and --bind-fd fds are used up here.
void build_root(Setup& s)
{
    const LaunchPlan& plan = s.plan;
    // Security: --host-user: the sources are opened with the caller's
    // (root's) rights; then this process becomes USER for good, before it
    // makes anything, so that everything the sandbox makes or touches on
    // the host from here on, the command most of all, is USER's doing.
    std::function<void()> sources_opened;
    if (plan.host_user)
        sources_opened = [&] {
            s.step = "8 (--host-user)";
            become_host_user(plan.uid, plan.gid);
            s.step = "8 (mounts)";
        };
    std::vector<UniqueFd> tmpfs = mount::apply(plan.mounts, std::move(s.fds.mount), sources_opened);
    // --json-status-fd: the monitor measures what the tmpfs mounts hold
    // through these fds, never through paths the command controls.
    if (s.ctx.tmpfs_report && !tmpfs.empty()) {
        tmpfs.resize(std::min(tmpfs.size(), kMaxTmpfsReported));
        send_message(s.sock, TmpfsMsg{std::move(tmpfs)});
    }
}

// 8. --login-file: each DEST starts as SRC's copy; the monitor gets its
// directory (a tmpfs) to watch and to read DEST through. The command starts
// only once the monitor watches every DEST: a renewal made before the watch
// would come with no event, and only a close event says that an in-place
// writer is done.
void seed_login_files(Setup& s)
{
    const std::vector<LoginFile>& files = s.plan.process.login_files;
    for (size_t i = 0; i < files.size(); ++i)
        send_message(s.sock, LoginDirMsg{static_cast<uint32_t>(i), seed_login_file(files[i], s.ctx.login_seeds[i])});
    for (size_t i = 0; i < files.size(); ++i)
        wait_for_monitor(s.sock);
}

// 9. --lock-file: a shared POSIX lock on each file (bwrap's lock, so a caller
// can test it with F_GETLK or wait for the sandbox with F_SETLKW), held by this
// process until the sandbox ends (the command's copies of the fds close at
// exec; a POSIX lock belongs to the process that took it). Paths are in the
// new root.
void lock_files(Setup& s)
{
    for (const std::string& dest : s.plan.process.lock_files) {
        std::string path = dest.empty() || dest[0] != '/' ? "/" + dest : dest;
        UniqueFd fd = sys::check_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC), "Unable to open lock file " + dest);
        struct flock lock {};
        lock.l_type = F_RDLCK;
        lock.l_whence = SEEK_SET;
        if (::fcntl(fd.get(), F_SETLK, &lock) < 0)
            throw SysError(errno, "Unable to lock file " + dest);
        s.locks.push_back(std::move(fd));
    }
}

// 10. --userns2: setup is done; PID 1 and the command live in this user
// namespace, below the one that owns the sandbox's namespaces.
void enter_userns2(Setup& s)
{
    if (s.fds.userns2)
        join_namespace(s.fds.userns2, CLONE_NEWUSER);
    s.fds.userns2 = {};
}

// 11. --block-fd: setup is done; wait for the caller's go.
void wait_for_block_fd(Setup& s)
{
    if (s.fds.block)
        wait_for_fd(std::move(s.fds.block));
}

#ifdef COCOON_TEST_HOOKS
// Test-only: set-up misbehaves on the setup channel (ns/setup/test_hook.h), once it is done.
void run_test_hook(Setup& s)
{
    if (g_setup_hook)
        test_hook::misbehave(*g_setup_hook, s.sock, false);
}
#endif

// The command's cgroup leaf where the monitor made the sandbox's cgroup while set-up ran
// (LaunchContext::command_cgroup_channel): its one CommandCgroupMsg, with the leaf and its
// cgroup.procs or no fd (no cgroup). Waits for it; the fds are O_CLOEXEC, and PID 1 closes them
// after the fork (hold_and_reap). With LaunchContext::netns_beside, the network namespace comes
// last: this process joins it here, before the command exists, and brings lo up where the monitor
// could not.
CommandCgroup command_cgroup_from_monitor(int channel, bool netns_beside)
{
    CommandCgroupMsg msg;
    std::array<UniqueFd, 3> fds;
    const int err = relay::receive_msg(channel, msg, fds);
    ::close(channel);
    if (err)
        throw SysError(err == ECONNRESET ? EPIPE : err, "the monitor's command cgroup message");
    const size_t received =
        static_cast<size_t>(std::count_if(fds.begin(), fds.end(), [](const UniqueFd& fd) { return fd.valid(); }));
    const size_t netns_fds = msg.netns == CommandCgroupMsg::kNetnsFd ? 1 : 0;
    const size_t cgroup_fds = received - std::min(received, netns_fds);
    if (msg.kind != CommandCgroupMsg{}.kind || (msg.netns != 0) != netns_beside ||
        msg.netns > CommandCgroupMsg::kNetnsMakeIt || received < netns_fds || (cgroup_fds != 0 && cgroup_fds != 2))
        throw SysError(EBADMSG, "the monitor's command cgroup message");
    // Where the helper failed, or a filter refuses this process setns: the namespace made here, as
    // the clone would have made it (ns/launch.cc, make_netns_beside).
    bool lo_up = msg.lo_up != 0;
    const bool joined = msg.netns == CommandCgroupMsg::kNetnsFd && ::setns(fds[cgroup_fds].get(), CLONE_NEWNET) == 0;
    if (msg.netns == CommandCgroupMsg::kNetnsFd)
        fds[cgroup_fds].reset();  // joined or not, never taken for the leaf below (fds[0] without a cgroup)
    if (msg.netns && !joined) {
        // The clone's words for the same failure (bwrap's too).
        check(::unshare(CLONE_NEWNET), "Creating new namespace failed");
        lo_up = false;
    }
    if (msg.netns && !lo_up)
        net::loopback_up();
    return {fds[0].release(), fds[1].release(), msg.send_pidfd != 0};
}

// What PID 1 does while the monitor's cgroup message is on its way, time it would otherwise spend
// waiting: the IPC namespace (LaunchContext::ipc_beside) and the command's confinement
// (confined_before_fork), which the command inherits.
void work_while_the_monitor_sends(const LaunchPlan& plan, const LaunchContext& ctx)
{
    if (ctx.ipc_beside)
        check(::unshare(CLONE_NEWIPC), "Creating new namespace failed");  // the clone's words (bwrap's too)
    if (ctx.confined_before_fork)
        confine_for_command(plan);
}

// PID 1 once PID 2 exists: keeps what it needs, then reaps.
[[noreturn]] void hold_and_reap(Setup& s, pid_t command, UniqueFd go_write)
{
#ifdef COCOON_TEST_HOOKS
    if (g_setup_hook)
        test_hook::pause_pid1(*g_setup_hook);
#endif
    // Security: the holder keeps only what it needs of the caller's
    // fds (bwrap's init does the same): a pipe or directory the
    // caller let slip through must not live on in a process that may
    // outlive cocoon. The fds handed over to the command are its
    // alone: a pipe's reader waiting for EOF sees it when the
    // command closes its end, as under bwrap, whose init closes them.
    s.fds.inherited.clear();
    s.proc_dir.reset();
    // PID 1 holds no directory of the command's (prepare_exec entered
    // it): a busy working directory would make its unmount fail.
    check(::chdir("/"), "chdir /");
    std::vector<int> keep{s.sock, s.fds.sync.get(), s.ctx.exe.get(), go_write.get()};
    for (const UniqueFd& lock : s.locks)
        keep.push_back(lock.get());
    close_fds_except(keep);
    be_reaper(s.plan, s.ctx, command, s.sock, std::move(go_write), bounding_after_fork(s.plan));
}

// 12. A PID namespace (or --sync-fd/--lock-file, which need a holder that
// outlives the command's exec): stay as PID 1 to reap, and fork the command
// (PID 2). Returns only without plan.fork_command.
void fork_command_and_reap(Setup& s)
{
    const LaunchPlan& plan = s.plan;
    const LaunchContext& ctx = s.ctx;
    const int sock = s.sock;
    if (!plan.fork_command)
        return;
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
    ExecImage image = prepare_exec(plan, s.fds.inherited);
    // Start-up speed: PID 2 shares PID 1's memory until its exec
    // (vfork), so neither the page tables of cocoon's image are
    // copied nor its pages copied on write: ~100 us of the start-up
    // path. PID 1 waits meanwhile, so PID 2 writes nothing PID 1
    // reads afterwards (the go pipe is unused here; `environ` is
    // PID 1's no more). Not where PID 2 waits for PID 1 (the go pipe
    // of reexec_pid1) or makes a user namespace, which the kernel
    // refuses to a process sharing its memory. (volatile, as in_leaf: read after a return twice.)
    const volatile bool share_memory = command_shares_memory(plan);
    // The bounding set both processes end with is dropped here, once:
    // PID 1 would otherwise drop it while the command starts on its CPU.
    if (share_memory)
        drop_bounding(plan.caps);
    // Start-up speed: PID 2 is cloned straight into the command's cgroup leaf (CLONE_INTO_CGROUP)
    // where PID 1 may write the sandbox cgroup's cgroup.procs (its owner: not after --host-user
    // made it another user). Moving a running process there instead waits for an RCU grace
    // period in the kernel: 9-13 ms measured. Elsewhere PID 2 moves itself (enter_command_cgroup).
    // (clone3 itself is never refused here: the monitor made this process with it.) Waited for
    // as late as may be, but while this process is still dumpable: the monitor's network
    // namespace helper joins its user namespace through its pidfd, which the kernel allows only
    // where it could ptrace-read it.
    work_while_the_monitor_sends(plan, ctx);
    const CommandCgroup cgroup = ctx.command_cgroup_channel >= 0
                                     ? command_cgroup_from_monitor(ctx.command_cgroup_channel, ctx.netns_beside)
                                     : ctx.command_cgroup;
    // Security: PID 1 is non-dumpable before the command can run, so the
    // command never finds it reachable (after the fork PID 1 may wait for
    // a CPU while the command starts; after a vfork it is stopped until
    // the command runs). The flag belongs to the memory: PID 2 leaves a
    // shared one at its exec, and a forked copy is made dumpable again
    // below (its /proc files, its nested user namespace's maps among them,
    // stay its own). Not with reexec_pid1: this image stays dumpable for
    // the caller until the fresh one takes over (be_reaper).
    const int dumpable = ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    if (!plan.reexec_pid1)
        check(::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)");
    volatile bool in_leaf = cgroup.leaf >= 0;
    clone_args args{};
    args.flags = (in_leaf ? CLONE_INTO_CGROUP : 0) | (share_memory ? CLONE_VM | CLONE_VFORK : 0);
    args.exit_signal = SIGCHLD;
    args.cgroup = in_leaf ? static_cast<unsigned long long>(cgroup.leaf) : 0;
    long forked = cocoon_clone3(&args, sizeof args);
    if (forked < 0 && in_leaf) {
        in_leaf = false;
        args.flags &= ~static_cast<unsigned long long>(CLONE_INTO_CGROUP);
        args.cgroup = 0;
        forked = cocoon_clone3(&args, sizeof args);
    }
    if (forked < 0)
        throw SysError(static_cast<int>(-forked), "fork");
    const auto command = static_cast<pid_t>(forked);
    if (command == 0) {
        if (!share_memory && !plan.reexec_pid1 && dumpable == 1)
            check(::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)");
        go_write.reset();
        char byte;
        if (go_read && ::read(go_read.get(), &byte, 1) != 1)
            ::_exit(1);  // PID 1 failed and reported why
        go_read.reset();
        // Without a PID namespace the kernel does not end the command
        // with this process; --die-with-parent still must.
        if (!(plan.clone_flags & CLONE_NEWPID) && (plan.process.die_with_parent || plan.process.forward_signals)) {
            set_parent_death_signal();
            if (::getppid() != holder)
                ::_exit(1);
        }
        command_main(plan, ctx, image, s.proc_dir.get(), sock, bounding_after_fork(plan), cgroup, in_leaf);
    }
    go_read.reset();
    hold_and_reap(s, command, std::move(go_write));
}

// 13. Otherwise this process becomes the command, and the one that keeps
// --sync-fd.
void exec_here(Setup& s)
{
    ExecImage image = prepare_exec(s.plan, s.fds.inherited);
    exec_command(s.plan, s.ctx, image, s.proc_dir.get(), std::move(s.fds.sync));
}

// The first process's steps, in order; each error names its step.
struct Step {
    std::string_view name;
    void (*run)(Setup&);
};
constexpr Step kSteps[] = {
    {"1 (namespace report)", report_namespaces},
    {"2 (id maps)", map_ids},
    {"3 (user namespace limit)", limit_nested_user_namespaces},
    {"4 (parent death signal)", die_with_the_monitor},
    {"5 (hostname)", set_hostname},
    {"6 (loopback)", bring_up_loopback},
    {"7 (relay listeners)", send_listeners},
    {"8 (mounts)", build_root},
    {"8 (login files)", seed_login_files},
    {"9 (lock files)", lock_files},
    {"10 (--userns2)", enter_userns2},
    {"11 (--block-fd)", wait_for_block_fd},
#ifdef COCOON_TEST_HOOKS
    {"11 (test hook)", run_test_hook},
#endif
    {"12 (reaper)", fork_command_and_reap},
    {"13 (exec)", exec_here},
};

}  // namespace

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

[[noreturn]] void child_main(const LaunchPlan& plan, const LaunchContext& ctx, SandboxFds fds, bool report, int sock)
{
    ctx.pin.leave_batch();
    Setup s{plan, ctx, std::move(fds), report, sock, {}, {}, {}};
#ifdef COCOON_TEST_HOOKS
    g_setup_hook = test_hook::setup_hook_from_env();
#endif
    try {
        for (const Step& step : kSteps) {
            s.step = step.name;
            step.run(s);
        }
        throw SysError(EINVAL, "the command was neither run nor forked");  // the last step never returns
    } catch (const std::exception& e) {
        send_message(sock, error_message(e, std::string(s.step)));
        ::_exit(1);
    }
}

bool is_pid1_mode(const std::vector<std::string>& args)
{
    return !args.empty() && args[0] == kPid1Mode;
}

void pid1_main(const std::vector<std::string>& args)
{
    // First of all: nothing in the sandbox may ptrace this image (the
    // command is held until it gets the go byte, below).
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || args.size() != 5 || ::getpid() != 1)
        ::_exit(1);
    ::prctl(PR_SET_NAME, program_invocation_name, 0, 0, 0);
    auto number = [](const std::string& text) { return static_cast<int>(std::strtol(text.c_str(), nullptr, 10)); };
    const pid_t command = number(args[1]);
    const int sock = number(args[3]), go = number(args[4]);
    ::fcntl(sock, F_SETFD, FD_CLOEXEC);
    // PID 1's last act before it reaps, as a fresh image: it tells the command
    // (held at the start of PID 2) that it may go on.
    if (go >= 0 && ::write(go, "1", 1) != 1)
        ::_exit(1);  // PID 2 then sees EOF and gives up too
    ::close(go);
#ifdef COCOON_TEST_HOOKS
    g_setup_hook = test_hook::setup_hook_from_env();
#endif
    const int flags = number(args[2]);  // 1: --forward-signals; 2: --login-file
    reap(command, (flags & 1) != 0, (flags & 2) != 0, sock);
}

}  // namespace cocoon::ns
