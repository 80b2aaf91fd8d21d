// Applying the mount plan: binds, overlays, tmpfs, proc, devpts, mqueue, dirs,
// files, symlinks, chmod, pivot_root.
// Runs in the sandbox's first process, in its own mount namespace, before any
// privilege is dropped. Every destination is resolved under the new root with
// openat2(RESOLVE_IN_ROOT), so no symlink in it can lead outside.
// Runs in: setup.
#include "mount/apply.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <optional>
#include <vector>

#include "base/bench_skip.h"
#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "mount/masked_proc.h"
#include "mount/new_root.h"

namespace cocoon::mount {
namespace {

// What a data op's bytes come from, for messages.
std::string source_name(const Data& d)
{
    auto use = fd_use(d);
    return use ? use->name() : "cocoon's own " + d.dest;
}

// The fd's /proc link, which leads to exactly the file opened, whatever is mounted over its path
// since: how overlayfs is told about a layer, and how an O_PATH fd is chmod'ed or named. /proc is
// still the host's when this is used (before pivot_root).
std::string fd_path(int fd)
{
    return "/proc/self/fd/" + std::to_string(fd);
}

// --bind-fd: the caller's fd names a mount of the caller's mount namespace,
// which open_tree may not clone from ours. Our namespace is a copy, so the
// fd's path leads to the copy of that mount; the clone must be the very file
// the fd names (a rename in between makes this an error, never another file).
UniqueFd open_fd_tree(const Bind& bind, int fd)
{
    const std::string what = fd_use(bind)->name();
    struct stat want, got;
    check(::fstat(fd, &want), "Can't use " + what);
    char path[PATH_MAX];
    ssize_t n = ::readlink(fd_path(fd).c_str(), path, sizeof path);
    if (n < 0 || n == sizeof path)
        throw SysError(n < 0 ? errno : ENAMETOOLONG, "Can't find the path of " + what);
    const std::string source(path, n);
    if (source[0] != '/')
        throw UsageError("Can't bind " + what + ": not a file or directory (" + source + ")");
    UniqueFd tree = sys::check_fd(
        ::open_tree(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW),
        "Can't find source path " + source + " of " + what);
    check(::fstat(tree.get(), &got), "Can't use " + what);
    if (got.st_dev != want.st_dev || got.st_ino != want.st_ino)
        throw UsageError("Can't bind " + what + ": " + source + " no longer names the file the fd is open on");
    return tree;
}

// A host source opened (O_PATH; for a bind, a clone of the tree there, with
// the bind's restrictions set), and whether a symlink was on the way.
struct HostPath {
    UniqueFd fd;
    bool via_symlink = false;
    std::string path;  // as the caller gave it (empty for --bind-fd's and set-up's own)
};

// no_follow (--no-follow-sources): a symlink anywhere is refused.
int open_host(const std::string& path, int flags, bool no_follow, HostPath& out)
{
    out.path = path;
    int err = sys::try_openat2(AT_FDCWD, path, O_PATH | flags, RESOLVE_NO_SYMLINKS, 0, out.fd);
    if (err == -ELOOP && no_follow)
        throw UsageError("Can't find source path " + path +
                         ": a component is a symbolic link (refused by --no-follow-sources)");
    if (err == -ELOOP) {
        err = sys::try_openat2(AT_FDCWD, path, O_PATH | flags, 0, 0, out.fd);
        out.via_symlink = err == 0;
    }
    return err;
}

// A clone of the host tree at bind.source (or at bind.fd), with the bind's
// restrictions set on every mount in it; nullopt for a missing optional source.
std::optional<HostPath> open_source(const Bind& bind, const Fds& fds, bool no_follow)
{
    // Security: no setuid binary or device node of the host gains power in the
    // sandbox (except --dev-bind, which asks for devices), and --ro-bind is
    // read-only all the way down, submounts included, in one call.
    unsigned long long set = MOUNT_ATTR_NOSUID;
    if (bind.kind != BindKind::Dev)
        set |= MOUNT_ATTR_NODEV;
    if (bind.kind == BindKind::ReadOnly)
        set |= MOUNT_ATTR_RDONLY;
    const std::string find_what = "Can't find source path " + bind.source;
    const std::string what = "Can't restrict bind mount of " + bind.source;
    HostPath src;
    if (bind.fd >= 0) {
        src.fd = open_fd_tree(bind, fds.at(bind.fd).get());
        set_attrs(src.fd.get(), AT_RECURSIVE, set, what);
    } else if (bind.device_node) {
        // --dev's own: a fixed path of the host's /dev, which nothing of the sandbox could have
        // written, so no symlink on it is checked for. A device node has no submounts.
        src.path = bind.source;
        src.fd = clone_mount(AT_FDCWD, bind.source.c_str(), 0, set, find_what, what);
    } else {
        // Opened first, then cloned from the fd: what was checked for
        // symlinks is what is bound.
        int err = open_host(bind.source, 0, no_follow, src);
        if (err == -ENOENT && bind.optional)
            return std::nullopt;
        if (err < 0)
            throw SysError(-err, find_what);
        src.fd = clone_mount(src.fd.get(), "", AT_RECURSIVE | AT_EMPTY_PATH, set, find_what, what);
    }
    return src;
}

// --proc without a PID namespace of its own (bwrap's rule): a recursive clone
// of the host's /proc, with a bind's nosuid and nodev.
// Security: it shows the processes of the PID namespace the sandbox shares
// anyway, each guarded by the kernel's own per-process checks, and
// cover_proc then makes the files that reconfigure the kernel read-only, as
// for a new procfs.
HostPath host_proc()
{
    const std::string what = "Can't bind mount /proc";
    HostPath src;
    src.fd = clone_mount(AT_FDCWD, "/proc", AT_RECURSIVE, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, what, what);
    return src;
}

// An overlay layer given as a host path: an O_PATH fd, opened while the host
// tree is in view. Not an open_tree clone as for binds: Linux 6.1's overlayfs
// takes layers only from mounts attached in the mounter's namespace.
HostPath open_layer(const std::string& path, const std::string& option, bool no_follow)
{
    HostPath layer;
    if (int err = open_host(path, O_DIRECTORY, no_follow, layer); err < 0)
        throw SysError(-err, "Can't find " + option + " " + path);
    return layer;
}

// The host path lexically made absolute: the caller's cwd before a relative
// one, no ".", "..", or repeated slashes. Only to compare spellings.
std::string spelled(const std::string& path)
{
    std::string full = path;
    if (path.empty() || path[0] != '/') {
        char cwd[PATH_MAX];
        full = std::string(::getcwd(cwd, sizeof cwd) ? cwd : "") + "/" + path;
    }
    std::string out;
    for (std::string_view part : sys::split_path(full)) {
        if (part == "..")
            out.resize(out.empty() ? 0 : out.rfind('/'));  // out is "" or starts with '/'
        else if (part != ".")
            out.append("/").append(part);
    }
    return out.empty() ? "/" : out;
}

// Security: a host source reached through a symlink is not trusted to be
// what the caller checked: a link planted by an earlier run in a directory
// the sandbox could write (WT/.git -> / or -> ~) would bind the host's root or
// home. Where the destination exists already and is spelled like the source,
// or was itself reached through a symlink (the same planted link, seen
// through the sandbox's bind of WT), both must be the very same file.
void refuse_redirected(const HostPath& source, const std::string& dest, const Target& target, const std::string& what)
{
    if (!source.via_symlink || !target.existed)
        return;
    if (!target.via_symlink && spelled(source.path) != dest)
        return;
    struct stat src, dst;
    check(::fstat(source.fd.get(), &src), what);
    check(::fstat(target.fd.get(), &dst), what);
    if (src.st_dev != dst.st_dev || src.st_ino != dst.st_ino)
        throw UsageError(what + ": " + source.path + " leads through a symbolic link to another file than " + dest +
                         " is in the sandbox");
}

// Security: a source reached through a symbolic link is not bound onto a
// destination that does not exist and is itself reached through one. A link
// an earlier run planted in a read-write bind (WT/sub -> $HOME) leads the
// source to the host's file (~/.ssh) and the destination into what the
// sandbox has at that path (an empty fresh home), where nothing exists to
// compare the two: bwrap refuses it too ("Can't mkdir"). Checked before the
// mount point is made, so nothing is created on the way.
void refuse_link_to_missing(int root, const std::string& source, const std::string& dest, const std::string& what)
{
    UniqueFd fd;
    if (sys::try_openat2(root, dest, O_PATH, kInRoot | RESOLVE_NO_SYMLINKS, 0, fd) != -ELOOP)
        return;  // no link on the way (refuse_redirected compares an existing one)
    if (sys::try_openat2(root, dest, O_PATH, kInRoot, 0, fd) != -ENOENT)
        return;
    throw UsageError(what + ": " + source + " leads through a symbolic link, and so does " + dest +
                     ", which does not exist in the sandbox");
}

// Every host directory an overlay op names, opened before the new root
// exists: the --overlay-src layers in command-line order, then (--overlay)
// RWSRC and WORKDIR.
std::vector<HostPath> open_layers(const Overlay& o, bool no_follow)
{
    std::vector<HostPath> fds;
    for (const std::string& src : o.sources)
        fds.push_back(open_layer(src, "--overlay-src", no_follow));
    if (o.kind == OverlayKind::ReadWrite) {
        fds.push_back(open_layer(o.upper, "--overlay RWSRC", no_follow));
        fds.push_back(open_layer(o.work, "--overlay WORKDIR", no_follow));
        // The kernel says only EINVAL (and, before 6.5, nothing in the log).
        const std::string what = "--overlay " + o.upper + " " + o.work;
        if (place_of(fds[fds.size() - 2].fd.get(), what).mnt_id != place_of(fds.back().fd.get(), what).mnt_id)
            throw UsageError("Can't use " + what + ": WORKDIR must be on the same filesystem and mount as RWSRC");
    }
    return fds;
}

// Copies everything the caller's fd gives (a file, pipe or socket) into `to`, or cocoon's own
// bytes.
void copy_data(const Fds& fds, int to, const Data& d)
{
    constexpr size_t kChunk = 65536;
    std::string chunk;
    do {
        // cocoon's own bytes are one chunk; from the fd, a chunk short of kChunk is the last: the fd
        // reached EOF.
        if (d.bytes)
            chunk = *d.bytes;
        else if (!sys::read_up_to(fds.at(d.fd).get(), kChunk, chunk))
            throw SysError(errno, "Can't read " + source_name(d) + " for " + d.dest);
        if (!sys::write_all(to, chunk))
            throw SysError(errno, "Can't write data to file " + d.dest);
    } while (!d.bytes && chunk.size() == kChunk);
}

struct Applier {
    int root;
    std::optional<HostPath>* source;  // the pre-opened source of the current op (a bind's; --proc's host /proc)
    std::vector<HostPath>* layers;  // an overlay op's pre-opened directories
    int data_dir;  // the hidden tmpfs for --bind-data files, or -1
    int upper_dir;  // a --tmp-overlay op's hidden tmpfs for its upper layer, or -1
    const Fds* fds;  // the fds the data ops read
    size_t index;  // the op's position, for unique names in data_dir
    std::vector<MadeTmpfs>* made;  // every tmpfs made, kept open
    ParentDirs* parents;  // for binds of files and symlinks (ParentDirs)

    void operator()(const Bind& b) const
    {
        if (!source->has_value())
            return;
        const HostPath& src = **source;
        struct stat st {};
        if (!b.device_node)
            check(::fstat(src.fd.get(), &st), "stat(" + b.source + ")");
        const std::string what = "Can't bind mount " + (b.fd >= 0 ? fd_use(b)->name() : b.source) + " on " + b.dest;
        if (src.via_symlink)
            refuse_link_to_missing(root, b.source, b.dest, what);
        const bool is_dir = !b.device_node && S_ISDIR(st.st_mode);
        Target target = mount_point(root, b.dest, is_dir, what, kDirMode, parents);
        refuse_redirected(src, b.dest, target, what);
        attach(src.fd.get(), target.fd.get(), what);
        if (is_dir)
            parents->clear();
    }
    void operator()(const Tmpfs& t) const
    {
        const std::string what = "Can't mount tmpfs on " + t.dest;
        Target target = mount_point(root, t.dest, true, what, t.parent_mode);
        FsParams params{{"mode", octal(t.mode)}};
        add_size(params, t.size);
        if (t.uid)
            params.emplace_back("uid", std::to_string(*t.uid));
        if (t.gid)
            params.emplace_back("gid", std::to_string(*t.gid));
        UniqueFd mnt = new_mount("tmpfs", params, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, t.dest);
        attach(mnt.get(), target.fd.get(), what);
        made->push_back({std::move(mnt), t.dest, t.fit});
    }
    void operator()(const Mqueue& m) const
    {
        const std::string what = "Can't mount mqueue on " + m.dest;
        Target target = mount_point(root, m.dest, true, what);
        UniqueFd mnt = new_mount("mqueue", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, m.dest);
        attach(mnt.get(), target.fd.get(), what);
    }
    void operator()(const Data& d) const
    {
        if (d.kind == DataKind::File) {
            ensure_dir(root, sys::split_parent(d.dest).first, d.parent_mode, d.parent_mode);
            // Like bwrap: an existing file is overwritten and keeps its mode.
            // O_NONBLOCK: a FIFO at dest fails instead of hanging the setup.
            UniqueFd file = sys::openat2(root, d.dest, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_NONBLOCK, kInRoot,
                                         d.mode, "Can't create file " + d.dest);
            copy_data(*fds, file.get(), d);
            return;
        }
        if (d.only_if_present) {
            Target present;
            if (open_existing(root, d.dest, O_PATH, nullptr, present) == -ENOENT)
                return;
        }
        // Security: the data file lives in a tmpfs that is attached only below
        // the new root while it is built, and goes with the old root: the bind
        // at dest is the one place the sandbox can reach it, and the host
        // never sees it. It is unlinked once bound, so nothing names it either.
        const std::string name = "data-" + std::to_string(index);
        UniqueFd file = sys::check_fd(
            ::openat(data_dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, d.mode),
            "Can't create the data file for " + d.dest);
        copy_data(*fds, file.get(), d);
        const std::string what = "Can't bind mount " + source_name(d) + " on " + d.dest;
        unsigned long long set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if (d.kind == DataKind::RoBind)
            set |= MOUNT_ATTR_RDONLY;
        UniqueFd tree = clone_mount(data_dir, name.c_str(), 0, set, what, what);
        Target target = mount_point(root, d.dest, false, what, d.parent_mode);
        attach(tree.get(), target.fd.get(), what);
        // Only now: the kernel attaches no mount whose root is unlinked.
        check(::unlinkat(data_dir, name.c_str(), 0), what);
    }
    void operator()(const Chmod& c) const
    {
        const std::string what = "Can't chmod " + octal(c.mode) + " " + c.dest;
        UniqueFd target = sys::openat2(root, c.dest, O_PATH, kInRoot, 0, what);
        // An O_PATH fd takes no fchmod; its /proc link names the same inode
        // (and /proc is still the host's here, before pivot_root).
        check(::chmod(fd_path(target.get()).c_str(), c.mode), what);
    }
    void operator()(const Proc& p) const
    {
        // Without a PID namespace of its own, the host's /proc was cloned
        // beforehand (see host_proc); else a new procfs.
        const bool bind = source->has_value();
        const std::string what = std::string(bind ? "Can't bind mount /proc on " : "Can't mount proc on ") + p.dest;
        Target target = mount_point(root, p.dest, true, what);
        // A refused new procfs under a masked /proc says so (mount/masked_proc.h).
        UniqueFd mnt = bind ? std::move((*source)->fd) : new_proc(p.dest);
        attach(mnt.get(), target.fd.get(), what);
        if (!bench::skips(bench::Skip::ProcCovers))
            cover_proc(root, p.dest);
    }
    void operator()(const Overlay& o) const
    {
        const std::string what = std::string("Can't mount ") + option_of(o.kind) + " on " + o.dest;
        Target target = mount_point(root, o.dest, true, what);
        for (const HostPath& layer : *layers)  // the pre-opened ones (open_layers)
            refuse_redirected(layer, o.dest, target, what);
        // lowerdir lists the topmost layer first; the last --overlay-src given is the top.
        std::string lower;
        for (size_t i = o.sources.size(); i-- > 0;) {
            // Appended, not "a" + b: g++ 12 warns -Wrestrict wrongly on that at -O3.
            if (!lower.empty())
                lower += ':';
            lower += fd_path((*layers)[i].fd.get());
        }
        FsParams params{{"lowerdir", lower}};
        if (o.kind == OverlayKind::ReadWrite) {
            params.emplace_back("upperdir", fd_path((*layers)[o.sources.size()].fd.get()));
            params.emplace_back("workdir", fd_path((*layers)[o.sources.size() + 1].fd.get()));
        } else if (o.kind == OverlayKind::Tmp) {
            // Security: the upper layer lives in a hidden tmpfs of the op's
            // own, which goes with the old root: the overlay at dest is the
            // only way to it.
            for (auto [name, param] : {std::pair{"upper", "upperdir"}, {"work", "workdir"}}) {
                if (::mkdirat(upper_dir, name, 0755) < 0)
                    throw SysError(errno, what);
                UniqueFd dir =
                    sys::check_fd(::openat(upper_dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), what);
                params.emplace_back(param, fd_path(dir.get()));
                layers->push_back({std::move(dir), false, {}});  // open until the overlay is made
            }
        }
        // Security: nosuid and nodev, as for binds; --ro-overlay has no upper
        // layer, so the kernel makes it read-only, and so is the mount.
        unsigned attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if (o.kind == OverlayKind::ReadOnly)
            attrs |= MOUNT_ATTR_RDONLY;
        UniqueFd mnt = new_mount("overlay", params, attrs, o.dest);
        attach(mnt.get(), target.fd.get(), what);
    }
    void operator()(const Devpts& d) const
    {
        // Security: a new devpts instance holds only the sandbox's own
        // terminals, never the host's. ptmxmode 0666 lets the command open
        // pts/ptmx (the /dev/ptmx link) to make one; mode 620 gives each new
        // terminal to its opener, writable by its group (tty-style write(1)
        // messages), readable by no one else. Not nodev: the pts are device
        // nodes; nosuid and noexec, as nothing there is a program.
        const std::string what = "Can't mount devpts on " + d.dest;
        Target target = mount_point(root, d.dest, true, what);
        UniqueFd mnt =
            new_mount("devpts", {{"ptmxmode", "0666"}, {"mode", "620"}}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, d.dest);
        attach(mnt.get(), target.fd.get(), what);
    }
    void operator()(const Dir& d) const { ensure_dir(root, d.dest, d.mode, d.parent_mode); }
    void operator()(const Symlink& s) const
    {
        auto [parent, name] = sys::split_parent(s.dest);
        const int dir = parents->get(root, parent, 0755);
        if (::symlinkat(s.target.c_str(), dir, name.c_str()) == 0)
            return;
        const std::string what = "Can't make symlink at " + s.dest;
        if (errno != EEXIST)
            throw SysError(errno, what);
        // bwrap's rule and words: an identical link already there is fine;
        // anything else in the way is named.
        char buf[PATH_MAX];  // a link's target is shorter than PATH_MAX
        ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof buf);
        if (n < 0 && errno == EINVAL)
            throw UsageError(what + ": destination exists and is not a symlink");
        if (n < 0)
            throw SysError(errno, what + ": destination exists, and cannot read symlink target");
        if (std::string existing(buf, static_cast<size_t>(n)); existing != s.target)
            throw UsageError(what + ": existing destination is " + existing);
    }
    void operator()(const RemountRo& r) const
    {
        UniqueFd target = sys::openat2(root, r.dest, O_PATH, kInRoot);
        set_attrs(target.get(), 0, MOUNT_ATTR_RDONLY, "Can't remount " + r.dest + " read-only");
    }
};

}  // namespace

std::vector<UniqueFd> apply(const Plan& plan, Fds fds, const std::function<void()>& sources_opened)
{
    // Security: nothing mounted from here on propagates back to the host.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr), "Failed to make / slave");
    // Modes are exactly what the plan says (bwrap ignores the umask too); the
    // command gets the caller's umask back below.
    const mode_t caller_umask = ::umask(0);

    // Open every host source first, while the host tree is still in view.
    std::vector<std::optional<HostPath>> sources(plan.ops.size());
    std::vector<std::vector<HostPath>> layers(plan.ops.size());
    for (size_t i = 0; i < plan.ops.size(); ++i)
        if (auto* bind = std::get_if<Bind>(&plan.ops[i]))
            sources[i] = open_source(*bind, fds, plan.no_follow_sources);
        else if (auto* overlay = std::get_if<Overlay>(&plan.ops[i]))
            layers[i] = open_layers(*overlay, plan.no_follow_sources);
        else if (std::holds_alternative<Proc>(plan.ops[i]) && !plan.own_pid_ns)
            sources[i] = host_proc();
    // The caller's part is done (--host-user: the switch to USER's ids).
    if (sources_opened)
        sources_opened();

    std::vector<MadeTmpfs> made;
    const HiddenDirs hidden = make_hidden_dirs(plan, made);

    UniqueFd own_root = new_mount("tmpfs", {{"mode", "0755"}}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/");
    check(::move_mount(own_root.get(), "", AT_FDCWD, kStaging, MOVE_MOUNT_F_EMPTY_PATH),
          std::string("Can't attach the new root on ") + kStaging);
    // The topmost mount on the root: own_root until an op mounts onto "/".
    UniqueFd stacked;
    int root = own_root.get();

    ParentDirs parents;
    for (size_t i = 0; i < plan.ops.size(); ++i) {
        if (!std::holds_alternative<Bind>(plan.ops[i]) && !std::holds_alternative<Symlink>(plan.ops[i]))
            parents.clear();
        std::visit(Applier{root, &sources[i], &layers[i], hidden.data, hidden.uppers[i], &fds, i, &made, &parents},
                   plan.ops[i]);
        // A mount onto "/" stacks over the root we hold; walks that start at
        // an fd do not climb onto mounts stacked on it, so take the new top.
        if (dest_of(plan.ops[i]) == "/") {
            stacked = sys::check_fd(::open(kStaging, O_PATH | O_DIRECTORY | O_CLOEXEC),
                                    std::string("open(") + kStaging + ")");
            root = stacked.get();
        }
    }
    made.insert(made.begin(), {std::move(own_root), "/", true});
    for (const MadeTmpfs& t : made)
        if (t.fit && !bench::skips(bench::Skip::TmpfsFit))
            fit_tmpfs(t.mnt.get(), t.name);

    // Security: the old root is detached, so nothing of the host outside the
    // binds stays reachable, not even through "..".
    // By path, not fchdir(root): a bind onto "/" stacks over the tmpfs root,
    // and only a path walk reaches the topmost mount.
    check(::chdir(kStaging), std::string("chdir(") + kStaging + ")");
    // Security: the top of the staging point must be the root we built; no
    // mount may have been stacked over it (refuse_covering sees to that).
    if (place_of(AT_FDCWD, "stat(.)") != place_of(root, "stat(root)"))
        throw UsageError("Refusing to pivot: a mount covers the new root");
    sys::pivot_root(".", ".");
    check(::umount2(".", MNT_DETACH), "Can't detach the old root");
    check(::chdir("/"), "chdir(/)");
    ::umask(caller_umask);

    // Security: the fds the data and --bind-fd ops used do not reach the
    // command: closed here (bwrap closes them too, even 0-2, which are owned
    // as copies); fds above 2 would be closed at exec anyway.
    for (auto& [number, fd] : fds)
        if (number <= 2)
            ::close(number);
    fds.clear();
    std::vector<UniqueFd> out(made.size());
    std::ranges::transform(made, out.begin(), [](MadeTmpfs& t) { return std::move(t.mnt); });
    return out;
}

}  // namespace cocoon::mount
