// Applying the mount plan: binds, tmpfs, proc, devpts, dirs, symlinks, pivot_root.
// Runs in the sandbox's first process, in its own mount namespace, before any
// privilege is dropped. Every destination is resolved under the new root with
// openat2(RESOLVE_IN_ROOT), so no symlink in it can lead outside.
#include "mount/apply.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"

namespace cocoon::mount {
namespace {

// Security: symlinks met while resolving a destination are followed as if the
// new root were "/", never into the host; /proc magic links are refused.
constexpr unsigned long long kInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

// The directory where the new root tmpfs is attached while it is built. Any
// existing directory works: all host sources are opened before it is covered.
constexpr const char* kStaging = "/tmp";

std::pair<std::string, std::string> split_parent(const std::string& path)
{
    size_t slash = path.rfind('/');
    std::string parent = slash == 0 ? "/" : path.substr(0, slash);
    return {parent, path.substr(slash + 1)};
}

// mkdir -p under root; returns an O_PATH fd of the final directory.
UniqueFd ensure_dir(int root, const std::string& path, mode_t mode)
{
    UniqueFd dir;
    // Most destinations exist already or need only their last component.
    int err = sys::try_openat2(root, path, O_PATH | O_DIRECTORY, kInRoot, 0, dir);
    if (err == 0)
        return dir;
    if (err != -ENOENT)
        throw SysError(-err, "Can't open directory " + path);
    auto [parent, name] = split_parent(path);
    UniqueFd up = ensure_dir(root, parent, 0755);
    if (::mkdirat(up.get(), name.c_str(), mode) < 0 && errno != EEXIST)
        throw SysError(errno, "Can't mkdir " + path);
    err = sys::try_openat2(up.get(), name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, 0, dir);
    if (err == -ENOTDIR || err == -ELOOP)
        // A symlink (or a file) is in the way: resolve it inside the root.
        err = sys::try_openat2(root, path, O_PATH | O_DIRECTORY, kInRoot, 0, dir);
    if (err < 0)
        throw SysError(-err, "Can't mkdir " + path);
    return dir;
}

// Resolves (creating if missing) the mount point for a bind of a directory
// or of a non-directory.
UniqueFd ensure_mount_point(int root, const std::string& dest, bool is_dir)
{
    if (is_dir)
        return ensure_dir(root, dest, 0755);
    UniqueFd fd;
    int err = sys::try_openat2(root, dest, O_PATH, kInRoot, 0, fd);
    if (err == 0)
        return fd;
    if (err != -ENOENT)
        throw SysError(-err, "Can't open " + dest);
    auto [parent, name] = split_parent(dest);
    UniqueFd dir = ensure_dir(root, parent, 0755);
    // Security: O_NOFOLLOW|O_EXCL: the new file is made here, not wherever a
    // link planted in the sandbox points.
    fd.reset(::openat(dir.get(), name.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444));
    if (!fd)
        throw SysError(errno, "Can't create file at " + dest);
    return fd;
}

// A new, detached superblock mount of fstype (tmpfs, proc, devpts).
UniqueFd new_mount(const char* fstype, std::initializer_list<std::pair<const char*, std::string>> params,
                   unsigned attrs, const std::string& dest)
{
    std::string what = std::string("Can't mount ") + fstype + " on " + dest;
    UniqueFd fs(::fsopen(fstype, FSOPEN_CLOEXEC));
    if (!fs)
        throw SysError(errno, what);
    check(::fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", fstype, 0), what);
    for (auto& [key, value] : params)
        check(::fsconfig(fs.get(), FSCONFIG_SET_STRING, key, value.c_str(), 0), what);
    check(::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0), what);
    UniqueFd mnt(::fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs));
    if (!mnt)
        throw SysError(errno, what);
    return mnt;
}

void attach(int mnt, int target, const std::string& what)
{
    check(::move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH), what);
}

void set_attrs(int fd, unsigned flags, unsigned long long set, const std::string& what)
{
    mount_attr attr{};
    attr.attr_set = set;
    check(::mount_setattr(fd, "", AT_EMPTY_PATH | flags, &attr, sizeof attr), what);
}

std::string octal(mode_t mode)
{
    char buf[8];
    snprintf(buf, sizeof buf, "%04o", mode & 07777);
    return buf;
}

// Security: procfs files that reconfigure the host kernel stay read-only even
// for a sandbox that holds capabilities in its user namespace.
void cover_proc(int root, const std::string& dest)
{
    for (const char* name : {"sys", "sysrq-trigger", "irq", "bus"}) {
        std::string path = dest + "/" + name;
        UniqueFd target;
        if (sys::try_openat2(root, path, O_PATH, kInRoot, 0, target) == -ENOENT)
            continue;
        std::string what = "Can't remount " + path + " read-only";
        UniqueFd tree(::open_tree(target.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC |
                                                       AT_RECURSIVE | AT_EMPTY_PATH));
        if (!tree)
            throw SysError(errno, what);
        set_attrs(tree.get(), AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, what);
        attach(tree.get(), target.get(), what);
    }
}

// A clone of the host tree at bind.source, with the bind's restrictions set
// on every mount in it; nullopt for a missing optional source.
std::optional<UniqueFd> open_source(const Bind& bind)
{
    UniqueFd tree(::open_tree(AT_FDCWD, bind.source.c_str(),
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE));
    if (!tree) {
        if (errno == ENOENT && bind.optional)
            return std::nullopt;
        throw SysError(errno, "Can't find source path " + bind.source);
    }
    // Security: no setuid binary or device node of the host gains power in the
    // sandbox (except --dev-bind, which asks for devices), and --ro-bind is
    // read-only all the way down, submounts included, in one call.
    unsigned long long set = MOUNT_ATTR_NOSUID;
    if (bind.kind != BindKind::Dev)
        set |= MOUNT_ATTR_NODEV;
    if (bind.kind == BindKind::ReadOnly)
        set |= MOUNT_ATTR_RDONLY;
    set_attrs(tree.get(), AT_RECURSIVE, set, "Can't restrict bind mount of " + bind.source);
    return tree;
}

struct Applier {
    int root;
    std::optional<UniqueFd>* source;  // the pre-opened source of the current op

    void operator()(const Bind& b) const
    {
        if (!source->has_value())
            return;
        int tree = (*source)->get();
        struct stat st;
        check(::fstat(tree, &st), "stat(" + b.source + ")");
        UniqueFd target = ensure_mount_point(root, b.dest, S_ISDIR(st.st_mode));
        attach(tree, target.get(), "Can't bind mount " + b.source + " on " + b.dest);
    }
    void operator()(const Tmpfs& t) const
    {
        UniqueFd target = ensure_dir(root, t.dest, 0755);
        UniqueFd mnt = new_mount("tmpfs", {{"mode", octal(t.mode)}},
                                 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, t.dest);
        attach(mnt.get(), target.get(), "Can't mount tmpfs on " + t.dest);
    }
    void operator()(const Proc& p) const
    {
        UniqueFd target = ensure_dir(root, p.dest, 0755);
        UniqueFd mnt = new_mount("proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, p.dest);
        attach(mnt.get(), target.get(), "Can't mount proc on " + p.dest);
        cover_proc(root, p.dest);
    }
    void operator()(const Dev&) const {}  // expanded by make_plan
    void operator()(const Devpts& d) const
    {
        UniqueFd target = ensure_dir(root, d.dest, 0755);
        UniqueFd mnt = new_mount("devpts", {{"ptmxmode", "0666"}, {"mode", "620"}},
                                 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, d.dest);
        attach(mnt.get(), target.get(), "Can't mount devpts on " + d.dest);
    }
    void operator()(const Dir& d) const { ensure_dir(root, d.dest, d.mode); }
    void operator()(const Symlink& s) const
    {
        auto [parent, name] = split_parent(s.dest);
        UniqueFd dir = ensure_dir(root, parent, 0755);
        if (::symlinkat(s.target.c_str(), dir.get(), name.c_str()) == 0)
            return;
        int err = errno;
        // An identical link already there is fine (bwrap behaves the same).
        char buf[4096];
        ssize_t n = ::readlinkat(dir.get(), name.c_str(), buf, sizeof buf);
        if (err == EEXIST && n >= 0 && std::string(buf, n) == s.target)
            return;
        throw SysError(err, "Can't make symlink at " + s.dest);
    }
    void operator()(const RemountRo& r) const
    {
        UniqueFd target = sys::openat2(root, r.dest, O_PATH, kInRoot);
        set_attrs(target.get(), 0, MOUNT_ATTR_RDONLY, "Can't remount " + r.dest + " read-only");
    }
};

} // namespace

void apply(const Plan& plan)
{
    // Security: nothing mounted from here on propagates back to the host.
    check(::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr), "Failed to make / slave");

    // Open every host source first, while the host tree is still in view.
    std::vector<std::optional<UniqueFd>> sources(plan.ops.size());
    for (size_t i = 0; i < plan.ops.size(); ++i)
        if (auto* bind = std::get_if<Bind>(&plan.ops[i]))
            sources[i] = open_source(*bind);

    UniqueFd root = new_mount("tmpfs", {{"mode", "0755"}}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, "/");
    check(::move_mount(root.get(), "", AT_FDCWD, kStaging, MOVE_MOUNT_F_EMPTY_PATH),
          std::string("Can't attach the new root on ") + kStaging);

    for (size_t i = 0; i < plan.ops.size(); ++i) {
        std::visit(Applier{root.get(), &sources[i]}, plan.ops[i]);
        // A mount onto "/" stacks over the root we hold; walks that start at
        // an fd do not climb onto mounts stacked on it, so take the new top.
        if (dest_of(plan.ops[i]) == "/") {
            root.reset(::open(kStaging, O_PATH | O_DIRECTORY | O_CLOEXEC));
            if (!root)
                throw SysError(errno, std::string("open(") + kStaging + ")");
        }
    }

    // Security: the old root is detached, so nothing of the host outside the
    // binds stays reachable, not even through "..".
    // By path, not fchdir(root): a bind onto "/" stacks over the tmpfs root,
    // and only a path walk reaches the topmost mount.
    check(::chdir(kStaging), std::string("chdir(") + kStaging + ")");
    sys::pivot_root(".", ".");
    check(::umount2(".", MNT_DETACH), "Can't detach the old root");
    check(::chdir("/"), "chdir(/)");
}

} // namespace cocoon::mount
