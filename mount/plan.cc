// Building the mount plan. Pure: no system calls; unit-tested without privilege.
// Runs in: caller, setup: the caller plans; set-up reads the plan's names for its messages.
#include "mount/plan.h"

#include <map>
#include <type_traits>

#include "base/bench_skip.h"
#include "base/sys.h"
#include "base/sys_error.h"

namespace cocoon::mount {

mode_t parent_mode_for(mode_t perms)
{
    mode_t mode = kDirMode;
    if ((perms & 0070) == 0)
        mode &= ~0070u;
    if ((perms & 0007) == 0)
        mode &= ~0007u;
    return mode;
}

const char* option_of(DataKind kind)
{
    switch (kind) {
    case DataKind::File:
        return "--file";
    case DataKind::Bind:
        return "--bind-data";
    case DataKind::RoBind:
        return "--ro-bind-data";
    }
    return "?";
}

const char* option_of(OverlayKind kind)
{
    switch (kind) {
    case OverlayKind::ReadWrite:
        return "--overlay";
    case OverlayKind::Tmp:
        return "--tmp-overlay";
    case OverlayKind::ReadOnly:
        return "--ro-overlay";
    }
    return "?";
}

std::optional<FdUse> fd_use(const Bind& bind)
{
    if (bind.fd < 0)
        return std::nullopt;
    return FdUse{bind.fd, bind.kind == BindKind::ReadOnly ? "--ro-bind-fd" : "--bind-fd"};
}

std::optional<FdUse> fd_use(const Data& data)
{
    if (data.bytes)
        return std::nullopt;
    return FdUse{data.fd, option_of(data.kind)};
}

std::string normalize_dest(const std::string& path)
{
    if (path.empty())
        throw UsageError("Empty destination path");
    std::string out;
    for (std::string_view part : sys::split_path(path)) {
        if (part == ".")
            continue;
        // Security: ".." in a destination would let "--bind x /a/../etc" land
        // somewhere the caller did not spell out; refuse it outright.
        if (part == "..")
            throw UsageError("Invalid destination " + path + ": contains a '..' component");
        out += '/';
        out += part;
    }
    return out.empty() ? "/" : out;
}

namespace {

std::string join(const std::string& dir, const char* name)
{
    return dir == "/" ? std::string("/") + name : dir + "/" + name;
}

// bwrap's --dev: a tmpfs with the harmless device nodes bound from the host,
// the usual /proc/self/fd links, a new devpts instance and an empty shm dir;
// and the caller's terminal as console, if its stdout is one. Unlike bwrap's,
// the tmpfs is sized to what it holds and shm is a bounded tmpfs of its own
// (mode 0755, as bwrap's directory): see kFitHeadroomBytes and kShmSize.
void expand_dev(const Dev& dev, const std::optional<std::string>& console, std::vector<Op>& out)
{
    const std::string& dest = dev.dest;
    Tmpfs tmpfs{dest, kDirMode};
    tmpfs.fit = true;
    out.push_back(std::move(tmpfs));
    for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
        Bind bind{std::string("/dev/") + node, join(dest, node), BindKind::Dev, false};
        bind.device_node = true;
        out.push_back(std::move(bind));
    }
    const char* links[][2] = {{"/proc/self/fd", "fd"},       {"/proc/self/fd/0", "stdin"},
                              {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
                              {"/proc/kcore", "core"},       {"pts/ptmx", "ptmx"}};
    for (auto& [target, name] : links)
        out.push_back(Symlink{target, join(dest, name)});
    if (!bench::skips(bench::Skip::DevShm))
        out.push_back(Tmpfs{join(dest, "shm"), kDirMode, dev.shm_size});
    out.push_back(Devpts{join(dest, "pts")});
    // Security: the command has this terminal as its stdout already; the bind
    // gives it a name (so ttyname() works inside), not more access.
    if (console)
        out.push_back(Bind{*console, join(dest, "console"), BindKind::Dev, false});
}

}  // namespace

Plan make_plan(const std::vector<InputOp>& ops, const std::optional<std::string>& console)
{
    Plan plan;
    // bwrap closes each data or --bind-fd fd once used, so a second use of
    // one fails there; here it is refused before the sandbox exists.
    std::map<int, const char*> fds;
    for (const InputOp& op : ops)
        if (auto use = fd_use(op); use && !fds.emplace(use->fd, use->option).second)
            throw UsageError(use->name() + ": fd " + std::to_string(use->fd) + " is already used by " + fds[use->fd]);
    for (InputOp op : ops) {
        // bwrap's counts: an overlay needs a lower layer, and a read-only one
        // of a single layer would only be an --ro-bind.
        if (auto* o = std::get_if<Overlay>(&op)) {
            size_t need = o->kind == OverlayKind::ReadOnly ? 2 : 1;
            if (o->sources.size() < need)
                throw UsageError(std::string(option_of(o->kind)) + " requires at least " + (need == 1 ? "one" : "two") +
                                 " --overlay-src");
        }
        std::visit(
            [&](auto& o) {
                o.dest = normalize_dest(o.dest);
                if constexpr (std::is_same_v<std::decay_t<decltype(o)>, Dev>)
                    expand_dev(o, console, plan.ops);
                else
                    plan.ops.push_back(std::move(o));
            },
            op);
    }
    return plan;
}

}  // namespace cocoon::mount
