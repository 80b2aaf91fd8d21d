// Building the launch plan from the parsed options. Pure; unit-tested.
#include "tools/plan.h"

#include <sched.h>
#include <sys/un.h>

#include "base/sys_error.h"

namespace cocoon::tools {

ns::LaunchPlan make_launch_plan(const Options& o, const HostFacts& host)
{
    if (o.command.empty())
        throw UsageError("No command specified (see --help)");

    ns::LaunchPlan plan;
    const bool root = host.uid == 0;
    // Security: an unprivileged caller gets its powers only inside a user
    // namespace it owns; a root caller may ask for one, or try for one.
    const bool user_ns = !root || o.unshare_user || (o.unshare_user_try && host.has_user_ns);
    plan.clone_flags = CLONE_NEWNS;
    if (user_ns)
        plan.clone_flags |= CLONE_NEWUSER;
    if (o.unshare_pid)
        plan.clone_flags |= CLONE_NEWPID;
    if (o.unshare_net)
        plan.clone_flags |= CLONE_NEWNET;
    if (o.unshare_ipc)
        plan.clone_flags |= CLONE_NEWIPC;
    if (o.unshare_uts)
        plan.clone_flags |= CLONE_NEWUTS;
    if (o.unshare_cgroup || (o.unshare_cgroup_try && host.has_cgroup_ns))
        plan.clone_flags |= CLONE_NEWCGROUP;

    if (o.uid && !user_ns)
        throw UsageError("Specifying --uid requires --unshare-user");
    if (o.gid && !user_ns)
        throw UsageError("Specifying --gid requires --unshare-user");
    if (o.as_pid_1 && !o.unshare_pid)
        throw UsageError("Specifying --as-pid-1 requires --unshare-pid");
    // Without a PID namespace cocoon cannot find every process of the sandbox
    // to signal or kill.
    if (o.forward_signals && !o.unshare_pid)
        throw UsageError("Specifying --forward-signals requires --unshare-pid");
    if (o.kill_after && !o.unshare_pid)
        throw UsageError("Specifying --kill-after requires --unshare-pid");
    if (!o.relays.empty() && !o.unshare_net)
        throw UsageError("Specifying --relay requires --unshare-net");
    for (size_t i = 0; i < o.relays.size(); ++i) {
        const ns::RelayEndpoint& r = o.relays[i];
        if (r.socket.empty() || r.socket[0] != '/')
            throw UsageError("--relay " + std::to_string(r.port) + ": SOCKET must be an absolute path: " + r.socket);
        if (r.socket.size() >= sizeof(sockaddr_un::sun_path))
            throw UsageError("--relay " + std::to_string(r.port) + ": SOCKET path is longer than a Unix socket address allows (" +
                             std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes): " + r.socket);
        for (size_t j = 0; j < i; ++j)
            if (o.relays[j].port == r.port)
                throw UsageError("--relay: port " + std::to_string(r.port) + " given twice");
    }
    if (o.hostname && !o.unshare_uts)
        throw UsageError("Specifying --hostname requires --unshare-uts");

    plan.real_uid = host.uid;
    plan.real_gid = host.gid;
    plan.uid = o.uid.value_or(host.uid);
    plan.gid = o.gid.value_or(host.gid);

    plan.mounts = mount::make_plan(o.mounts);
    plan.env = ns::build_env(host.environ, o.env);
    plan.chdir = o.chdir;
    plan.host_cwd = host.cwd;
    plan.hostname = o.hostname;

    // A user namespace's creator holds every capability in it; without one,
    // the command can keep only what the caller has (root in a container may
    // lack some).
    plan.caps = ns::resolve_caps(root, o.caps) & (user_ns ? ns::kAllCaps : host.permitted_caps);
    // Capabilities reach a non-root uid across exec only as ambient ones;
    // raise them only when the caller asked for some with --cap-add.
    bool cap_add = false;
    for (const ns::CapOp& op : o.caps)
        cap_add = cap_add || op.add;
    plan.ambient_caps = cap_add && plan.uid != 0 && plan.caps != 0;

    plan.new_session = o.new_session;
    plan.die_with_parent = o.die_with_parent;
    plan.as_pid_1 = o.as_pid_1;
    plan.forward_signals = o.forward_signals;
    plan.kill_after = o.kill_after;
    plan.relays = o.relays;
    plan.info_fd = o.info_fd;
    plan.json_status_fd = o.json_status_fd;
    plan.argv = o.command;
    return plan;
}

} // namespace cocoon::tools
