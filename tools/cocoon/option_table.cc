// The option table: each of cocoon's options (bwrap's, then cocoon's own) with its arguments, its
// --help line and what it does to Options, in bwrap's rules and words. Read by the machinery in
// tools/cocoon/cli.cc. Pure.
// Runs in: caller.
#include "tools/cocoon/option_table.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/sys_error.h"
#include "tools/cocoon/plan.h"

namespace cocoon::tools {
namespace {

// The table's handlers take their arguments as V.
using V = OptionArgs;

// --proxy-env PORT: what HTTP clients (curl, Python, Node with
// NODE_USE_ENV_PROXY) read to send everything through the relay.
void add_proxy_env(Options& o, uint16_t port)
{
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"})
        o.env.push_back(ns::SetEnv{name, url});
    for (const char* name : {"NO_PROXY", "no_proxy"})
        o.env.push_back(ns::SetEnv{name, "127.0.0.1,localhost,::1"});
    o.env.push_back(ns::SetEnv{"NODE_USE_ENV_PROXY", "1"});
}

constexpr const char* kDanglingOverlaySrc =
    "--overlay-src must be followed by another --overlay-src or one of --overlay, --tmp-overlay, or --ro-overlay";

// The options --perms and --size may come before (bwrap's list).
bool takes_perms(const std::string& name)
{
    for (const char* n : {"bind-data", "ro-bind-data", "file", "dir", "tmpfs"})
        if (name == n)
            return true;
    return false;
}

// --login-file SRC DEST: DEST's directory becomes a tmpfs of its own, made
// where the option stands (command-line order), so the command may put a temp
// file beside DEST and rename it over DEST. Its size is --size's, if one comes
// before the option, else kLoginDirSize: agents that keep their whole state
// beside the login (~/.claude) need the caller to say how much.
// --login-file-try (may_be_missing) is the same with an SRC that may be missing.
void add_login_file(Options& o, const std::string& src, const std::string& dest, bool may_be_missing)
{
    const std::optional<unsigned long long> size = std::exchange(o.next_size, std::nullopt);
    const std::string what = ns::LoginFile{src, dest, may_be_missing}.option();
    if (src.empty())
        throw UsageError(what + ": SRC is empty");
    std::string path;
    try {
        path = mount::normalize_dest(dest);
    } catch (const UsageError& e) {
        throw UsageError(what + ": " + e.what());
    }
    const std::string parent = path.substr(0, path.rfind('/'));
    if (parent.empty())
        throw UsageError(what + ": DEST must be below a directory other than /, which becomes a tmpfs of its own");
    for (const ns::LoginFile& other : o.process.login_files)
        if (other.dest == path)
            throw UsageError(what + ": DEST given twice");
    o.process.login_files.push_back(ns::LoginFile{src, path, may_be_missing});
    // A tmpfs given earlier for that very directory (another login file's,
    // or a fresh home's) serves; a second one would hide the first's files.
    auto names_parent = [&](const std::string& other) {
        try {
            return mount::normalize_dest(other) == parent;
        } catch (const UsageError&) {
            return false;  // make_plan refuses it in words of its own
        }
    };
    for (const mount::InputOp& op : o.mounts)
        if (auto* t = std::get_if<mount::Tmpfs>(&op); t && names_parent(t->dest)) {
            if (size)
                throw UsageError("--size before " + what + ": " + parent +
                                 " is a tmpfs given earlier, which keeps its own size");
            return;
        }
    o.mounts.push_back(mount::Tmpfs{parent, 0700, size.value_or(mount::kLoginDirSize), mount::kDirMode});
}

// The mode an op gets (the pending --perms, else bwrap's default for it) and
// the mode of the parents it creates.
std::pair<mode_t, mode_t> take_perms(Options& o, mode_t fallback)
{
    std::optional<mode_t> perms = std::exchange(o.next_perms, std::nullopt);
    if (!perms)
        return {fallback, mount::kDirMode};
    return {*perms, mount::parent_mode_for(*perms)};
}

template <mount::DataKind Kind, mode_t Fallback> void data(Options& o, const V& a)
{
    auto [mode, parents] = take_perms(o, Fallback);
    o.mounts.push_back(mount::Data{parse_fd(a[0]), a[1], Kind, mode, parents});
}

template <mount::BindKind Kind> void bind_fd(Options& o, const V& a)
{
    o.mounts.push_back(mount::Bind{"", a[1], Kind, false, parse_fd(a[0])});
}

template <mount::BindKind Kind, bool Optional> void bind(Options& o, const V& a)
{
    o.mounts.push_back(mount::Bind{a[0], a[1], Kind, Optional});
}

// An overlay option takes every --overlay-src given since the last one. The
// count rules (bwrap's) are checked by mount::make_plan.
template <mount::OverlayKind Kind> void overlay(Options& o, const V& a)
{
    mount::Overlay op{std::exchange(o.next_overlay_srcs, {}), "", "", a.back(), Kind};
    // --size bounds --tmp-overlay's upper layer (check_modifiers refuses it before the others).
    op.size = std::exchange(o.next_size, std::nullopt).value_or(0);
    if (Kind == mount::OverlayKind::ReadWrite) {
        op.upper = a[0];
        op.work = a[1];
    }
    o.mounts.push_back(std::move(op));
}

// bwrap's rule for an option that holds one value: a repeat replaces the
// value given before, with a warning (said even when both are the same).
void note_repeat(Options& o, bool given_before, const char* option)
{
    if (given_before)
        o.warnings.push_back(std::string("Only the last ") + option + " option will take effect");
}

// An option's name as a template argument (fd_option<..., "--info-fd">).
template <size_t N> struct Name {
    // NOLINTNEXTLINE(google-explicit-constructor): made from a literal in a template argument
    constexpr Name(const char (&text)[N]) { std::copy_n(text, N, value); }
    char value[N];
};

template <int ns::FdNumbers::*Member, Name Option> void fd_option(Options& o, const V& a)
{
    note_repeat(o, o.fds.*Member >= 0, Option.value);
    o.fds.*Member = parse_fd(a[0]);
}

// bwrap's rules: --seccomp and --add-seccomp-fd exclude each other; a later
// --seccomp replaces an earlier one (with a warning), --add-seccomp-fd adds.
void add_seccomp(Options& o, bool repeatable, const std::string& fd_text)
{
    const std::string option = repeatable ? "--add-seccomp-fd" : "--seccomp";
    int fd = parse_fd(fd_text);
    if (!o.seccomp.empty()) {
        bool had_repeatable = o.seccomp.back().option.rfind("--add-seccomp-fd", 0) == 0;
        if (repeatable && !had_repeatable)
            throw UsageError("--add-seccomp-fd cannot be combined with --seccomp");
        if (!repeatable && had_repeatable)
            throw UsageError("--seccomp cannot be combined with --add-seccomp-fd");
        if (!repeatable) {
            note_repeat(o, true, "--seccomp");
            o.seccomp.clear();
        }
    }
    o.seccomp.push_back(SeccompInput{option + " " + std::to_string(fd), fd, {}});
}

template <bool Options::*Member> void flag(Options& o, const V&)
{
    o.*Member = true;
}

template <bool ns::ProcessOptions::*Member> void process_flag(Options& o, const V&)
{
    o.process.*Member = true;
}

using mount::BindKind;

// bwrap's options.
constexpr OptionSpec kSpecs[] = {
    {"help", "", "Print this help", flag<&Options::help>},
    {"version", "", "Print version", flag<&Options::version>},
    // Spliced in by parse_args before the table sees the options.
    {"args", "FD", "Parse NUL-separated arguments from FD", [](Options&, const V&) {}},
    {"unshare-all", "", "Unshare every namespace (user and cgroup if possible)",
     [](Options& o, const V&) {
         o.unshare_user_try = o.unshare_pid = o.unshare_net = o.unshare_ipc = o.unshare_uts = o.unshare_cgroup_try =
             true;
     }},
    {"share-net", "", "Keep the host's network namespace", [](Options& o, const V&) { o.unshare_net = false; }},
    {"unshare-user", "", "Create a new user namespace (implied when not root)", flag<&Options::unshare_user>},
    {"unshare-user-try", "", "Create a new user namespace if possible", flag<&Options::unshare_user_try>},
    {"unshare-ipc", "", "Create a new IPC namespace", flag<&Options::unshare_ipc>},
    {"unshare-pid", "", "Create a new PID namespace", flag<&Options::unshare_pid>},
    {"unshare-net", "", "Create a new network namespace", flag<&Options::unshare_net>},
    {"unshare-uts", "", "Create a new UTS namespace", flag<&Options::unshare_uts>},
    {"unshare-cgroup", "", "Create a new cgroup namespace", flag<&Options::unshare_cgroup>},
    {"unshare-cgroup-try", "", "Create a new cgroup namespace if possible", flag<&Options::unshare_cgroup_try>},
    {"uid", "UID", "Uid in the sandbox (needs a user namespace)",
     [](Options& o, const V& a) {
         note_repeat(o, o.uid.has_value(), "--uid");
         o.uid = static_cast<uid_t>(parse_ugid("uid", a[0]));
     }},
    {"gid", "GID", "Gid in the sandbox (needs a user namespace)",
     [](Options& o, const V& a) {
         note_repeat(o, o.gid.has_value(), "--gid");
         o.gid = static_cast<gid_t>(parse_ugid("gid", a[0]));
     }},
    {"hostname", "NAME", "Hostname in the sandbox (needs --unshare-uts)",
     [](Options& o, const V& a) {
         note_repeat(o, o.process.hostname.has_value(), "--hostname");
         o.process.hostname = a[0];
     }},
    {"chdir", "DIR", "Change directory to DIR",
     [](Options& o, const V& a) {
         note_repeat(o, o.process.chdir.has_value(), "--chdir");
         o.process.chdir = a[0];
     }},
    {"clearenv", "", "Unset all environment variables",
     [](Options& o, const V&) { o.env.emplace_back(std::in_place_type<ns::ClearEnv>); }},
    {"setenv", "VAR VALUE", "Set an environment variable",
     [](Options& o, const V& a) {
         o.env.push_back(ns::SetEnv{a[0], a[1]});
     }},
    {"unsetenv", "VAR", "Unset an environment variable",
     [](Options& o, const V& a) { o.env.push_back(ns::UnsetEnv{a[0]}); }},
    {"bind", "SRC DEST", "Bind mount the host path SRC on DEST", bind<BindKind::ReadWrite, false>},
    {"bind-try", "SRC DEST", "Like --bind, skipped if SRC is missing", bind<BindKind::ReadWrite, true>},
    {"dev-bind", "SRC DEST", "Like --bind, allowing device access", bind<BindKind::Dev, false>},
    {"dev-bind-try", "SRC DEST", "Like --dev-bind, skipped if SRC is missing", bind<BindKind::Dev, true>},
    {"ro-bind", "SRC DEST", "Bind mount the host path SRC read-only on DEST", bind<BindKind::ReadOnly, false>},
    {"ro-bind-try", "SRC DEST", "Like --ro-bind, skipped if SRC is missing", bind<BindKind::ReadOnly, true>},
    {"remount-ro", "DEST", "Remount DEST read-only (not recursive)",
     [](Options& o, const V& a) { o.mounts.push_back(mount::RemountRo{a[0]}); }},
    {"proc", "DEST", "Mount a new procfs on DEST",
     [](Options& o, const V& a) { o.mounts.push_back(mount::Proc{a[0]}); }},
    {"dev", "DEST", "Mount a new /dev on DEST (--size before it: DEST/shm's size, else 64 MiB)",
     [](Options& o, const V& a) {
         o.mounts.push_back(mount::Dev{a[0], std::exchange(o.next_size, std::nullopt).value_or(mount::kShmSize)});
     }},
    {"bind-fd", "FD DEST", "Bind mount the directory or file open at FD on DEST", bind_fd<BindKind::ReadWrite>},
    {"ro-bind-fd", "FD DEST", "Like --bind-fd, read-only", bind_fd<BindKind::ReadOnly>},
    {"tmpfs", "DEST", "Mount a new tmpfs on DEST",
     [](Options& o, const V& a) {
         auto [mode, parents] = take_perms(o, mount::kDirMode);
         unsigned long long size = std::exchange(o.next_size, std::nullopt).value_or(0);
         o.mounts.push_back(mount::Tmpfs{a[0], mode, size, parents});
     }},
    {"fresh-home", "PATH", "Mount an empty tmpfs (mode 0700, the command's) on PATH and set HOME=PATH",
     [](Options& o, const V& a) {
         // --size bounds it as it bounds a --tmpfs: what the agent may
         // keep in memory under its home.
         mount::Tmpfs home{a[0], 0700, std::exchange(o.next_size, std::nullopt).value_or(0)};
         home.fresh_home = true;
         o.mounts.push_back(std::move(home));
         o.env.push_back(ns::SetEnv{"HOME", a[0]});
     }},
    {"mqueue", "DEST", "Mount a new mqueue on DEST",
     [](Options& o, const V& a) { o.mounts.push_back(mount::Mqueue{a[0]}); }},
    {"dir", "DEST", "Create a directory at DEST",
     [](Options& o, const V& a) {
         auto [mode, parents] = take_perms(o, mount::kDirMode);
         o.mounts.push_back(mount::Dir{a[0], mode, parents});
     }},
    {"file", "FD DEST", "Copy from FD to a new file DEST (mode 0666)", data<mount::DataKind::File, mount::kFileMode>},
    {"bind-data", "FD DEST", "Copy from FD to a file bind-mounted on DEST (mode 0600)",
     data<mount::DataKind::Bind, mount::kDataMode>},
    {"ro-bind-data", "FD DEST", "Like --bind-data, read-only", data<mount::DataKind::RoBind, mount::kDataMode>},
    {"chmod", "OCTAL PATH", "Change the permissions of PATH (must exist)",
     [](Options& o, const V& a) {
         o.mounts.push_back(mount::Chmod{a[1], parse_mode("--chmod", a[0])});
     }},
    {"perms", "OCTAL", "Set permissions of the next --bind-data, --ro-bind-data, --file, --dir or --tmpfs",
     [](Options& o, const V& a) {
         if (o.next_perms)
             throw UsageError("--perms given twice for the same action");
         o.next_perms = parse_mode("--perms", a[0]);
     }},
    {"size", "BYTES",
     "Set the size in bytes (and one inode per 2 KiB) of the next --tmpfs, --fresh-home, --dev's shm, "
     "--login-file's (or -try's) dir or --tmp-overlay's upper layer",
     [](Options& o, const V& a) {
         if (o.next_size)
             throw UsageError("--size given twice for the same action");
         o.next_size = parse_size(a[0]);
     }},
    {"overlay-src", "SRC", "Add the host path SRC as a lower layer of the next overlay (the last one given on top)",
     [](Options& o, const V& a) { o.next_overlay_srcs.push_back(a[0]); }},
    {"overlay", "RWSRC WORKDIR DEST", "Overlay on DEST of the --overlay-src layers; writes go to the host dir RWSRC",
     overlay<mount::OverlayKind::ReadWrite>},
    {"tmp-overlay", "DEST", "Overlay on DEST of the --overlay-src layers; writes go to an invisible tmpfs",
     overlay<mount::OverlayKind::Tmp>},
    {"ro-overlay", "DEST", "Read-only overlay on DEST of the (at least two) --overlay-src layers",
     overlay<mount::OverlayKind::ReadOnly>},
    {"symlink", "SRC DEST", "Create a symlink at DEST with target SRC",
     [](Options& o, const V& a) {
         o.mounts.push_back(mount::Symlink{a[0], a[1]});
     }},
    {"argv0", "VALUE", "Run the command with argv[0] set to VALUE",
     [](Options& o, const V& a) {
         if (o.process.argv0)
             throw UsageError("--argv0 used multiple times");
         o.process.argv0 = a[0];
     }},
    {"level-prefix", "", "Prefix each line on stderr with its syslog level (<3> errors, <4> warnings)",
     flag<&Options::level_prefix>},
    {"new-session", "", "Create a new terminal session", process_flag<&ns::ProcessOptions::new_session>},
    {"die-with-parent", "", "Kill the sandbox when cocoon's parent (or cocoon) dies",
     process_flag<&ns::ProcessOptions::die_with_parent>},
    {"as-pid-1", "", "Run the command as PID 1 (no reaper)", process_flag<&ns::ProcessOptions::as_pid_1>},
    {"info-fd", "FD", "Write information about the sandbox to FD", fd_option<&ns::FdNumbers::info, "--info-fd">},
    {"json-status-fd", "FD", "Write the sandbox's status to FD as JSON lines",
     fd_option<&ns::FdNumbers::json_status, "--json-status-fd">},
    {"sync-fd", "FD", "Keep FD open in the sandbox while it runs", fd_option<&ns::FdNumbers::sync, "--sync-fd">},
    {"block-fd", "FD", "Before running the command, wait until FD is readable",
     fd_option<&ns::FdNumbers::block, "--block-fd">},
    {"userns-block-fd", "FD", "Wait on FD for the caller to set up the user namespace (needs --info-fd)",
     fd_option<&ns::FdNumbers::userns_block, "--userns-block-fd">},
    {"userns", "FD", "Use the user namespace open at FD instead of creating one",
     fd_option<&ns::FdNumbers::userns, "--userns">},
    {"userns2", "FD", "After setup, switch into the user namespace open at FD (a descendant of the first)",
     fd_option<&ns::FdNumbers::userns2, "--userns2">},
    {"pidns", "FD", "Use the PID namespace open at FD (a new one nested in it with --unshare-pid)",
     fd_option<&ns::FdNumbers::pidns, "--pidns">},
    {"lock-file", "DEST", "Take a lock on DEST while the sandbox runs",
     [](Options& o, const V& a) { o.process.lock_files.push_back(a[0]); }},
    {"seccomp", "FD", "Load a compiled seccomp (cBPF) program from FD (the last one given)",
     [](Options& o, const V& a) { add_seccomp(o, false, a[0]); }},
    {"add-seccomp-fd", "FD", "Load a compiled seccomp (cBPF) program from FD (repeatable)",
     [](Options& o, const V& a) { add_seccomp(o, true, a[0]); }},
    {"disable-userns", "", "Keep the command from creating user namespaces (needs --unshare-user)",
     process_flag<&ns::ProcessOptions::disable_userns>},
    {"assert-userns-disabled", "", "Fail unless the command is unable to create user namespaces",
     process_flag<&ns::ProcessOptions::assert_userns_disabled>},
    // bwrap refuses a label unless SELinux is enabled; cocoon has no
    // SELinux support, so it always refuses rather than run the sandbox
    // in a context other than the one asked for.
    {"exec-label", "LABEL", "SELinux label of the command (not supported: refused)",
     [](Options&, const V&) { throw UsageError("labeling not supported on this system", "--exec-label"); }},
    {"file-label", "LABEL", "SELinux label of the sandbox's files (not supported: refused)",
     [](Options&, const V&) { throw UsageError("labeling not supported on this system", "--file-label"); }},
    {"cap-add", "CAP", "Add capability CAP (or ALL)",
     [](Options& o, const V& a) {
         o.caps.push_back(ns::CapOp{true, a[0]});
     }},
    {"cap-drop", "CAP", "Drop capability CAP (or ALL)",
     [](Options& o, const V& a) {
         o.caps.push_back(ns::CapOp{false, a[0]});
     }},
};

// cocoon's own options, listed apart by --help.
constexpr OptionSpec kExtensionSpecs[] = {
    {"forward-signals", "", "Deliver INT TERM HUP QUIT USR1 USR2 WINCH to the command's group",
     process_flag<&ns::ProcessOptions::forward_signals>},
    {"relay", "PORT SOCKET", "Relay 127.0.0.1:PORT and [::1]:PORT inside to the Unix socket SOCKET names at start",
     [](Options& o, const V& a) {
         o.process.relays.push_back(ns::RelayEndpoint{parse_port("--relay", a[0]), a[1]});
     }},
    {"egress", "PORT", "An HTTP proxy on 127.0.0.1:PORT and [::1]:PORT inside, reaching only --egress-allow",
     [](Options& o, const V& a) {
         if (o.process.egress)
             throw UsageError("--egress: given twice");
         o.process.egress = ns::EgressEndpoint{parse_port("--egress", a[0]), std::move(o.next_egress_allow)};
     }},
    {"egress-allow", "PATTERN", "Let --egress reach HOST, *.SUFFIX or an address, with an optional :PORT",
     [](Options& o, const V& a) {
         (o.process.egress ? o.process.egress->allow : o.next_egress_allow).push_back(a[0]);
     }},
    {"egress-log", "FD", "Write one JSON line per --egress connection, and a summary at the end, to FD",
     fd_option<&ns::FdNumbers::egress_log, "--egress-log">},
    {"proxy-env", "PORT", "Set HTTP(S)_PROXY and friends to http://127.0.0.1:PORT",
     [](Options& o, const V& a) { add_proxy_env(o, parse_port("--proxy-env", a[0])); }},
    {"check", "", "Report what this host allows a sandbox, then exit (0: a default sandbox can run)",
     flag<&Options::check>},
    {"no-default-seccomp", "", "Do not load cocoon's default seccomp policy (keyctl, TIOCSTI, bpf, ... refused)",
     [](Options& o, const V&) { o.process.default_seccomp = false; }},
    {"no-follow-sources", "", "Refuse a host source path (bind, overlay) that goes through a symlink",
     flag<&Options::no_follow_sources>},
    {"close-fds", "", "Close every inherited fd in the command but 0-2 and those options name",
     flag<&Options::close_fds>},
    {"kill-after", "SECONDS", "SIGKILL the sandbox SECONDS after a stop signal reached cocoon",
     [](Options& o, const V& a) { o.process.kill_after = parse_seconds("--kill-after", a[0]); }},
    {"cgroup-parent", "DIR", "Run the sandbox in a new cgroup under DIR, a cgroup v2 directory cocoon may write",
     [](Options& o, const V& a) { o.process.cgroup.parent = a[0]; }},
    {"memory-max", "BYTES", "Limit the sandbox's memory (cgroup v2 memory.max); K, M, G, T suffixes",
     [](Options& o, const V& a) { o.process.cgroup.memory_max = parse_memory(a[0]); }},
    {"pids-max", "N", "Limit the sandbox to N tasks (cgroup v2 pids.max)",
     [](Options& o, const V& a) { o.process.cgroup.pids_max = parse_pids(a[0]); }},
    {"login-file", "SRC DEST",
     "DEST starts as a copy of the host file SRC; changes are saved back to SRC (DEST's dir: a 4 MiB tmpfs)",
     [](Options& o, const V& a) { add_login_file(o, a[0], a[1], false); }},
    {"login-file-try", "SRC DEST",
     "As --login-file, but SRC may be missing: DEST starts absent; its first version makes SRC (and dirs, 0700)",
     [](Options& o, const V& a) { add_login_file(o, a[0], a[1], true); }},
    {"host-user", "USER[:GROUP]", "As root: the sandbox acts on the host as USER (and GROUP), never as root",
     [](Options& o, const V& a) {
         note_repeat(o, o.host_user.has_value(), "--host-user");
         o.host_user = a[0];
     }},
    {"keep-env", "VAR", "Set VAR as the caller has it (after --clearenv), or unset it where the caller has none",
     [](Options& o, const V& a) { o.env.push_back(ns::KeepEnv{a[0]}); }},
    // --agent and --worktree are spliced out before the table is read (tools/cocoon/profile.h).
    {"agent", "PROFILE", "The hardened agent layout of PROFILE (claude, codex, gemini, opencode, generic, a path) here",
     [](Options&, const V&) {}},
    {"worktree", "DIR", "With --agent: the directory the agent works in, read-write (default: the current one)",
     [](Options&, const V&) {}},
    {"dry-run", "", "Print the whole command line (--agent expanded) and exit, making no sandbox",
     flag<&Options::dry_run>},
};

}  // namespace

std::span<const OptionSpec> bwrap_options()
{
    return kSpecs;
}

std::span<const OptionSpec> extension_options()
{
    return kExtensionSpecs;
}

unsigned count_args(const char* args)
{
    unsigned n = 0;
    for (bool in_word = false; *args; ++args) {
        bool space = *args == ' ';
        n += !space && !in_word;
        in_word = !space;
    }
    return n;
}

void check_modifiers(const Options& o, const std::string& name)
{
    // bwrap's rule: the sources belong to the overlay option that follows;
    // anything else in between would leave them unused.
    if (!o.next_overlay_srcs.empty() && name != "overlay-src" && name != "overlay" && name != "tmp-overlay" &&
        name != "ro-overlay")
        throw UsageError(kDanglingOverlaySrc);
    // bwrap's words; cocoon's --fresh-home, --login-file(-try), --dev and --tmp-overlay take it
    // too (the last after its --overlay-src layers).
    if (o.next_size && name != "tmpfs" && name != "fresh-home" && name != "login-file" && name != "login-file-try" &&
        name != "dev" && name != "tmp-overlay" && name != "overlay-src" && name != "size" && name != "perms")
        throw UsageError("--size must be followed by --tmpfs");
    if (o.next_perms && !takes_perms(name) && name != "size" && name != "perms")
        throw UsageError("--perms must be followed by an option that creates a file");
}

void finish_modifiers(Options& o)
{
    if (!o.next_overlay_srcs.empty())
        throw UsageError(kDanglingOverlaySrc);
    // A --perms or --size with no option after it does nothing (as in bwrap).
    o.next_perms.reset();
    o.next_size.reset();
}

}  // namespace cocoon::tools
