// Building the launch plan from the parsed options. Pure; unit-tested.
// Runs in: caller.
#include "tools/cocoon/plan.h"

#include <linux/capability.h>
#include <linux/filter.h>
#include <sched.h>

#include <algorithm>
#include <cstring>

#include "base/sys.h"
#include "base/sys_error.h"
#include "relay/egress.h"
#include "tools/cocoon/passwd.h"

namespace cocoon::tools {

void check_whole_instructions(const SeccompInput& in)
{
    const size_t size = in.bytes.size();
    if (size % sizeof(sock_filter) != 0)
        throw UsageError("Invalid seccomp data, must be multiple of 8",
                         in.option + ": " + std::to_string(size) + " bytes");
}

std::vector<sock_filter> seccomp_program(const SeccompInput& in)
{
    // bwrap's check and words first (scripts match them); then cocoon's own:
    // the kernel takes 1 to BPF_MAXINSNS instructions, and an empty or
    // oversized program is refused before any process exists rather than by
    // prctl in the sandbox.
    check_whole_instructions(in);
    const size_t size = in.bytes.size();
    if (size == 0 || size > BPF_MAXINSNS * sizeof(sock_filter))
        throw UsageError("Invalid seccomp data from " + in.option + ": " + std::to_string(size) +
                         " bytes; a compiled cBPF program has 1 to " + std::to_string(BPF_MAXINSNS) + " instructions");
    std::vector<sock_filter> program(size / sizeof(sock_filter));
    std::memcpy(program.data(), in.bytes.data(), size);
    return program;
}

namespace {

// --egress's transparent half (relay/dns.h): where it listens, and the sandbox's resolv.conf,
// where the new root has one, naming its resolver (a root without one makes the C library ask
// 127.0.0.1 anyway). After every op of the caller's, so that it is the one the command reads.
void plan_transparent_egress(ns::EgressEndpoint& egress, const std::vector<ns::RelayEndpoint>& relays,
                             mount::Plan& mounts)
{
    std::vector<relay::AllowRule> rules;
    for (const std::string& pattern : egress.allow)
        rules.push_back(relay::parse_allow_rule(pattern));
    for (uint16_t port : relay::Allowlist(std::move(rules)).name_ports()) {
        const bool taken = port == egress.port ||
                           std::any_of(relays.begin(), relays.end(), [&](const auto& r) { return r.port == port; });
        if (!taken)
            egress.transparent_ports.push_back(port);
    }
    mount::Data resolv;
    resolv.dest = "/etc/resolv.conf";
    resolv.kind = mount::DataKind::RoBind;
    resolv.mode = 0644;
    resolv.bytes = "# cocoon --egress: names the allowlist admits, through cocoon\nnameserver 127.0.0.1\n";
    resolv.only_if_present = true;
    mounts.ops.emplace_back(std::move(resolv));
}

// --relay and --egress: each needs the sandbox's own network.
void check_network_options(const Options& o)
{
    if (!o.process.relays.empty() && !o.unshare_net)
        throw UsageError("Specifying --relay requires --unshare-net");
    for (size_t i = 0; i < o.process.relays.size(); ++i) {
        const ns::RelayEndpoint& r = o.process.relays[i];
        if (r.socket.empty() || r.socket[0] != '/')
            throw UsageError("--relay " + std::to_string(r.port) + ": SOCKET must be an absolute path: " + r.socket);
        for (size_t j = 0; j < i; ++j)
            if (o.process.relays[j].port == r.port)
                throw UsageError("--relay: port " + std::to_string(r.port) + " given twice");
    }
    if (!o.next_egress_allow.empty() && !o.process.egress)
        throw UsageError("--egress-allow requires --egress");
    if (o.fds.egress_log >= 0 && !o.process.egress)
        throw UsageError("--egress-log requires --egress");
    if (const auto& egress = o.process.egress) {
        if (!o.unshare_net)
            throw UsageError("Specifying --egress requires --unshare-net");
        for (const ns::RelayEndpoint& r : o.process.relays)
            if (r.port == egress->port)
                throw UsageError("--egress: port " + std::to_string(r.port) + " is a --relay port too");
        for (const std::string& pattern : egress->allow)
            relay::parse_allow_rule(pattern);  // throws naming the pattern
    }
}

// Security: --host-user: a user namespace of cocoon's own making, mapped
// to that user instead of the caller, so that the sandbox never acts on
// the host as root (ns/host_user.h); only root may map another user's
// ids, and only cocoon writes the maps.
void check_host_user(const Options& o, const HostFacts& host, bool join_user)
{
    if (!o.host_user)
        return;
    if (host.uid != 0)
        throw UsageError("--host-user needs a root caller: this is uid " + std::to_string(host.uid) +
                         ", whose sandbox acts on the host as uid " + std::to_string(host.uid) + " already");
    if (join_user)
        throw UsageError("--host-user cannot be combined with --userns (cocoon maps a namespace it makes)");
    if (o.fds.userns2 >= 0)
        throw UsageError("--host-user cannot be combined with --userns2 (cocoon maps a namespace it makes)");
    if (o.fds.userns_block >= 0)
        throw UsageError("--host-user cannot be combined with --userns-block-fd (cocoon writes the id maps)");
    constexpr ns::CapSet kSetIds = (ns::CapSet{1} << CAP_SETUID) | (ns::CapSet{1} << CAP_SETGID);
    if ((host.effective_caps & kSetIds) != kSetIds)
        throw UsageError("--host-user " + *o.host_user +
                         " needs CAP_SETUID and CAP_SETGID to map that user's ids, and this root caller lacks "
                         "them (a container's root has both unless its runtime drops them)");
}

// Security: a root caller without CAP_SYS_ADMIN runs as an unprivileged caller does, in user
// namespaces it makes (the sandbox's, the relay worker's), each mapping its uid 0 to 0 inside;
// Linux (5.12 on) lets a process map uid 0 so only if it held CAP_SETFCAP as it made the namespace.
void check_unprivileged_root(const Options& o, const HostFacts& host, bool user_ns)
{
    if (host.uid != 0 || sys::privileged_root(host.uid, host.effective_caps))
        return;
    const bool worker = !o.process.relays.empty() || o.process.egress;
    const bool maps_root = (user_ns && !o.host_user && o.fds.userns_block < 0) || worker;
    if (maps_root && ((host.effective_caps >> CAP_SETFCAP) & 1) == 0)
        throw UsageError("a root caller without CAP_SYS_ADMIN gets a user namespace of its own, and mapping uid 0 "
                         "into it needs CAP_SETFCAP, which this process lacks too: give it CAP_SETFCAP (a "
                         "container's root has it unless its runtime drops it), or run cocoon as another user");
}

// Whether the sandbox gets a user namespace of cocoon's making, after the rules around it.
// Security: an unprivileged caller gets its powers only inside a user namespace it owns; a root
// caller may ask for one, or try for one. A root caller without CAP_SYS_ADMIN (a container's root:
// runtimes leave it out) can make no namespace but a user namespace: it gets one of its own without
// asking, as an unprivileged caller does, and the run is an unprivileged one (bwrap's answer there
// is "Creating new namespace failed"). Root with CAP_SYS_ADMIN is bwrap's root.
bool plan_user_namespace(const Options& o, const HostFacts& host, bool join_user)
{
    // bwrap's rules: asking for a joined and a new one is a contradiction (--unshare-all asks for
    // one too).
    if (join_user && o.unshare_user)
        throw UsageError("--userns not compatible --unshare-user");
    if (join_user && o.unshare_user_try)
        throw UsageError("--userns not compatible --unshare-user-try");
    check_host_user(o, host, join_user);
    // Security: an agent run by root acts on the host as root (its files through the read-only
    // /etc, root's cgroup files from a nested user namespace) unless it is given a user of its own.
    if (!o.agent.empty() && host.uid == 0 && !o.host_user)
        throw UsageError("--agent " + o.agent +
                         " as root needs --host-user USER, so that the agent never acts as root on the host: "
                         "make a user for it (useradd --system --no-create-home agent) and add --host-user agent");
    const bool privileged = sys::privileged_root(host.uid, host.effective_caps);
    const bool user_ns =
        !join_user && (!privileged || o.unshare_user || o.host_user || (o.unshare_user_try && host.has_user_ns));
    check_unprivileged_root(o, host, user_ns);
    return user_ns;
}

// The namespaces the first process is cloned into.
unsigned long long clone_flags_for(const Options& o, const HostFacts& host, bool user_ns)
{
    unsigned long long flags = CLONE_NEWNS;
    if (user_ns)
        flags |= CLONE_NEWUSER;
    if (o.unshare_pid)
        flags |= CLONE_NEWPID;
    if (o.unshare_net)
        flags |= CLONE_NEWNET;
    if (o.unshare_ipc)
        flags |= CLONE_NEWIPC;
    if (o.unshare_uts)
        flags |= CLONE_NEWUTS;
    if (o.unshare_cgroup || (o.unshare_cgroup_try && host.has_cgroup_ns))
        flags |= CLONE_NEWCGROUP;
    return flags;
}

// bwrap's rules for options that need a namespace or another option, and
// cocoon's for its own.
void check_process_options(const Options& o, bool user_ns, bool join_user)
{
    // With --userns, --uid and --gid pick ids the joined namespace already
    // maps (bwrap switches to them); there are no maps to write.
    if (o.uid && !user_ns && !join_user)
        throw UsageError("Specifying --uid requires --unshare-user");
    if (o.gid && !user_ns && !join_user)
        throw UsageError("Specifying --gid requires --unshare-user");
    if (o.process.as_pid_1 && !o.unshare_pid)
        throw UsageError("Specifying --as-pid-1 requires --unshare-pid");
    // Without a PID namespace cocoon cannot find every process of the sandbox
    // to signal or kill.
    if (o.process.forward_signals && !o.unshare_pid)
        throw UsageError("Specifying --forward-signals requires --unshare-pid");
    if (o.process.kill_after && !o.unshare_pid)
        throw UsageError("Specifying --kill-after requires --unshare-pid");
    if (o.process.hostname && !o.unshare_uts)
        throw UsageError("Specifying --hostname requires --unshare-uts");
    if (o.fds.userns_block >= 0 && !user_ns)
        throw UsageError("--userns-block-fd requires --unshare-user");
    // The caller learns which process to configure from --info-fd.
    if (o.fds.userns_block >= 0 && o.fds.info < 0)
        throw UsageError("--userns-block-fd requires --info-fd");
    // With --userns-block-fd the caller writes the id maps, so cocoon cannot
    // honour ids of its own.
    if (o.fds.userns_block >= 0 && (o.uid || o.gid))
        throw UsageError("--userns-block-fd cannot be combined with --uid or --gid (the caller writes the id maps)");
    // bwrap's rules: only an explicit --unshare-user counts (not the implicit
    // namespace of an unprivileged caller, nor --unshare-user-try), and the
    // caller who writes the id maps cannot have them nested.
    if (o.process.disable_userns && !o.unshare_user)
        throw UsageError("--disable-userns requires --unshare-user");
    if (o.process.disable_userns && o.fds.userns_block >= 0)
        throw UsageError("--disable-userns is not compatible with  --userns-block-fd");
    // The locks belong to PID 1, which is the command itself with --as-pid-1:
    // its exec would drop them.
    if (o.process.as_pid_1 && !o.process.lock_files.empty())
        throw UsageError("Specifying --as-pid-1 and --lock-file is not permitted");
    check_network_options(o);
}

// The ids: the command's inside (--uid, --gid, else the caller's), the host's
// they map to (--host-user's user, else the caller's); with --userns, the ids
// to switch to in the joined namespace.
void plan_ids(ns::LaunchPlan& plan, const Options& o, const HostFacts& host, bool join_user)
{
    plan.real_uid = host.uid;
    plan.real_gid = host.gid;
    if (o.host_user) {
        const HostIds ids = resolve_host_user(*o.host_user, host.passwd, host.group);
        plan.real_uid = ids.uid;
        plan.real_gid = ids.gid;
        plan.host_user = true;
    }
    plan.uid = o.uid.value_or(host.uid);
    plan.gid = o.gid.value_or(host.gid);
    if (join_user) {
        plan.switch_uid = o.uid;
        plan.switch_gid = o.gid;
    }
}

}  // namespace

ns::LaunchPlan make_launch_plan(const Options& o, const HostFacts& host)
{
    if (o.command.empty())
        throw NoCommandError();

    ns::LaunchPlan plan;
    // bwrap's rules: a joined user namespace replaces the new one.
    const bool join_user = o.fds.userns >= 0;
    const bool user_ns = plan_user_namespace(o, host, join_user);
    const bool privileged = sys::privileged_root(host.uid, host.effective_caps);
    plan.clone_flags = clone_flags_for(o, host, user_ns);
    check_process_options(o, user_ns, join_user);

    plan_ids(plan, o, host, join_user);

    plan.mounts = mount::make_plan(o.mounts, host.stdout_tty);
    // --fresh-home belongs to the command: the setup process that mounts it
    // has the command's ids, except when --uid/--gid switch inside --userns.
    for (mount::Op& op : plan.mounts.ops)
        if (auto* t = std::get_if<mount::Tmpfs>(&op); t && t->fresh_home) {
            t->uid = plan.switch_uid;
            t->gid = plan.switch_gid;
        }
    plan.mounts.no_follow_sources = o.no_follow_sources;
    plan.mounts.own_pid_ns = o.unshare_pid || o.fds.pidns >= 0;
    plan.env = ns::build_env(host.environ, o.env);
    plan.host_cwd = host.cwd;

    // bwrap's rule: a root caller's command starts from what the caller holds
    // (root in a container may lack some), anyone else's from nothing; then
    // --cap-add/--cap-drop. In a user namespace any capability can be had;
    // without one, only what the caller holds. A root caller without
    // CAP_SYS_ADMIN is an unprivileged one here too: its command starts from nothing.
    plan.caps = ns::apply_cap_ops(privileged ? host.permitted_caps : 0, o.caps);
    if (!user_ns && !join_user)
        plan.caps &= host.permitted_caps;
    // bwrap's rule: once --cap-add or --cap-drop is given, the resulting set
    // is inheritable too and raised as ambient, whatever the uid inside, so
    // it survives exec for a non-root uid (and for uid 0 it changes nothing:
    // see below). Without them, nothing is inheritable or ambient.
    // Security: ambient capabilities give uid 0 nothing more: without
    // SECBIT_NOROOT, its exec fills the permitted set from the bounding set
    // anyway, and the ambient set is a subset of that.
    plan.ambient_caps = !o.caps.empty() && plan.caps != 0;

    plan.process = o.process;
    if (auto& egress = plan.process.egress)
        plan_transparent_egress(*egress, plan.process.relays, plan.mounts);
    for (const SeccompInput& in : o.seccomp)
        plan.seccomp.push_back(seccomp_program(in));
    // bwrap's rule: a process other than the command holds the locks and the
    // sync fd, so one waits for the command even without a PID namespace.
    plan.fork_command = !o.process.as_pid_1 && (o.unshare_pid || o.fds.sync >= 0 || !o.process.lock_files.empty());
    // Security: re-executing PID 1 puts its mm in the sandbox's user
    // namespace; a command holding CAP_SYS_PTRACE there could then reach it.
    constexpr ns::CapSet kPtrace = ns::CapSet{1} << CAP_SYS_PTRACE;
    plan.reexec_pid1 =
        plan.fork_command && user_ns && (o.fds.info >= 0 || o.fds.json_status >= 0) && (plan.caps & kPtrace) == 0;
    plan.argv = o.command;
    plan.log_prefix = o.level_prefix ? "<4>" : "";
    return plan;
}

}  // namespace cocoon::tools
