// The new root under construction and the mount API calls (new_root.h).
// Runs in the sandbox's first process, before any privilege is dropped.
// Runs in: setup.
#include "mount/new_root.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/sys.h"
#include "base/sys_error.h"

namespace cocoon::mount {
namespace {

#ifdef SYS_open_tree_attr
constexpr long kOpenTreeAttr = SYS_open_tree_attr;
#else
constexpr long kOpenTreeAttr = 467;  // Linux 6.15; the same number on every architecture but alpha
#endif

}  // namespace

Place place_of(int fd, const std::string& what)
{
    struct statx stx {};
    check(::statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID | STATX_INO, &stx), what);
    return {stx.stx_mnt_id, makedev(stx.stx_dev_major, stx.stx_dev_minor), stx.stx_ino};
}

void refuse_covering(int root, const std::string& dest, int target, const std::string& what)
{
    if (dest == "/")
        return;
    const Place want = place_of(target, what), top = place_of(root, what);
    // Each directory dest is spelled through ("/", "/a", "/a/b" up to its parent), as it
    // resolves, and every directory above each. The parent's own ancestors are not enough: a link
    // up and a name back down (WT/up -> .., dest WT/up/NAME with NAME WT's own name) reach a
    // directory of the spelling that is not above where the parent resolves.
    const std::string parent = sys::split_parent(dest).first;
    std::vector<std::string> spelled{"/"};
    for (std::string_view part : sys::split_path(parent))
        spelled.push_back((spelled.size() == 1 ? "" : spelled.back()) + "/" + std::string(part));
    std::vector<Place> walked;  // each directory is walked up from once
    for (const std::string& prefix : spelled) {
        UniqueFd dir = sys::openat2(root, prefix, O_PATH | O_DIRECTORY, kInRoot);
        for (int depth = 0; depth < 4096; ++depth) {
            const Place here = place_of(dir.get(), what);
            if (here == want)
                throw UsageError(what + ": " + dest + " leads through a symbolic link to " +
                                 (here == top ? "the sandbox's root" : "a directory that contains it"));
            if (here == top || std::find(walked.begin(), walked.end(), here) != walked.end())
                break;
            walked.push_back(here);
            UniqueFd up = sys::check_fd(::openat(dir.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC), what);
            if (place_of(up.get(), what) == here)
                break;  // a filesystem's root with nothing above: outside the new root
            dir = std::move(up);
        }
    }
}

int open_existing(int root, const std::string& path, int flags, const std::string* check, Target& t)
{
    int err = sys::try_openat2(root, path, flags, kInRoot | RESOLVE_NO_SYMLINKS, 0, t.fd);
    if (err == -ELOOP) {
        err = sys::try_openat2(root, path, flags, kInRoot, 0, t.fd);
        t.via_symlink = err == 0;
        if (err == 0 && check)
            refuse_covering(root, path, t.fd.get(), *check);
    }
    t.existed = err == 0;
    return err;
}

Target ensure_dir(int root, const std::string& path, mode_t mode, mode_t parent_mode, const std::string* check)
{
    Target t;
    // Most destinations exist already or need only their last component.
    int err = open_existing(root, path, O_PATH | O_DIRECTORY, check, t);
    if (err == 0)
        return t;
    if (err != -ENOENT)
        throw SysError(-err, "Can't open directory " + path);
    auto [parent, name] = sys::split_parent(path);
    Target up = ensure_dir(root, parent, parent_mode, parent_mode);
    const bool made = ::mkdirat(up.fd.get(), name.c_str(), mode) == 0;
    if (!made && errno != EEXIST)
        throw SysError(errno, "Can't mkdir " + path);
    err = sys::try_openat2(up.fd.get(), name, O_PATH | O_DIRECTORY | O_NOFOLLOW, 0, 0, t.fd);
    if (err == -ENOTDIR || err == -ELOOP)
        // A symlink (or a file) is in the way: resolve it inside the root.
        err = open_existing(root, path, O_PATH | O_DIRECTORY, check, t);
    if (err < 0)
        throw SysError(-err, "Can't mkdir " + path);
    t.existed = !made;
    return t;
}

int ParentDirs::get(int root, const std::string& dir, mode_t mode)
{
    if (!m_fd || dir != m_path) {
        m_fd = std::move(ensure_dir(root, dir, mode, mode).fd);
        m_path = dir;
    }
    return m_fd.get();
}

Target mount_point(int root, const std::string& dest, bool is_dir, const std::string& what, mode_t parent_mode,
                   ParentDirs* parents)
{
    if (is_dir)
        return ensure_dir(root, dest, kDirMode, parent_mode, &what);
    Target t;
    // In a directory kept from the op before (--dev's nodes), made at once; what is there already
    // takes the way below.
    auto [parent, name] = sys::split_parent(dest);
    if (const int kept = parents ? parents->kept(parent) : -1; kept >= 0) {
        t.fd.reset(::openat(kept, name.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444));
        if (t.fd)
            return t;
        if (errno != EEXIST)
            throw SysError(errno, "Can't create file at " + dest);
    }
    int err = open_existing(root, dest, O_PATH, &what, t);
    if (err == 0)
        return t;
    if (err != -ENOENT)
        throw SysError(-err, "Can't open " + dest);
    ParentDirs once;
    const int dir = (parents ? parents : &once)->get(root, parent, parent_mode);
    // Security: O_NOFOLLOW|O_EXCL: the new file is made here, not wherever a
    // link planted in the sandbox points.
    t.fd = sys::check_fd(::openat(dir, name.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444),
                         "Can't create file at " + dest);
    return t;
}

[[noreturn]] void fs_failed(int fs, int err, std::string what)
{
    char log[512];
    ssize_t n = ::read(fs, log, sizeof log - 1);
    // Lines read "e overlayfs: <why>"; keep the why.
    if (n > 2 && log[1] == ' ') {
        std::string line(log + 2, static_cast<size_t>(n) - 2);
        what += " (" + line.substr(0, line.find('\n')) + ")";
    }
    throw SysError(err, what);
}

UniqueFd new_mount(const char* fstype, const FsParams& params, unsigned attrs, const std::string& dest)
{
    std::string what = std::string("Can't mount ") + fstype + " on " + dest;
    UniqueFd fs = sys::check_fd(::fsopen(fstype, FSOPEN_CLOEXEC), what);
    check(::fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", fstype, 0), what);
    for (auto& [key, value] : params)
        if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, key, value.c_str(), 0) < 0)
            fs_failed(fs.get(), errno, what);
    if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0)
        fs_failed(fs.get(), errno, what);
    return sys::check_fd(::fsmount(fs.get(), FSMOUNT_CLOEXEC, attrs), what);
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

UniqueFd clone_mount(int dfd, const char* path, unsigned flags, unsigned long long set, const std::string& find_what,
                     const std::string& what)
{
    flags |= OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC;
    // Refused once (ENOSYS before Linux 6.15, or a seccomp filter's errno): never asked again.
    static bool no_open_tree_attr = false;
    if (!no_open_tree_attr) {
        mount_attr attr{};
        attr.attr_set = set;
        const long fd = ::syscall(kOpenTreeAttr, dfd, path, flags, &attr, sizeof attr);
        if (fd >= 0)
            return UniqueFd(static_cast<int>(fd));
        // Any failure: the two calls, whose errors say which part failed.
        no_open_tree_attr = true;
    }
    UniqueFd tree = sys::check_fd(::open_tree(dfd, path, flags), find_what);
    set_attrs(tree.get(), flags & AT_RECURSIVE, set, what);
    return tree;
}

void add_size(FsParams& params, unsigned long long size)
{
    if (size == 0)
        return;
    params.emplace_back("size", std::to_string(size));
    params.emplace_back("nr_inodes", std::to_string(tmpfs_inodes(size)));
}

void fit_tmpfs(int mnt, const std::string& name)
{
    const std::string what = "Can't bound the tmpfs of " + name;
    struct statfs st {};
    check(::fstatfs(mnt, &st), what);
    const unsigned long long bytes = (st.f_blocks - st.f_bfree) * static_cast<unsigned long long>(st.f_bsize);
    const unsigned long long inodes = st.f_files - st.f_ffree;
    UniqueFd fs = sys::check_fd(::fspick(mnt, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC), what);
    const std::string size = std::to_string(bytes + kFitHeadroomBytes);
    const std::string nr_inodes = std::to_string(inodes + kFitHeadroomInodes);
    if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", size.c_str(), 0) < 0 ||
        ::fsconfig(fs.get(), FSCONFIG_SET_STRING, "nr_inodes", nr_inodes.c_str(), 0) < 0 ||
        ::fsconfig(fs.get(), FSCONFIG_CMD_RECONFIGURE, nullptr, nullptr, 0) < 0)
        fs_failed(fs.get(), errno, what);
}

std::string octal(mode_t mode)
{
    char buf[8];
    snprintf(buf, sizeof buf, "%04o", mode & 07777);
    return buf;
}

void cover_proc(int root, const std::string& dest)
{
    for (const char* name : {"keys", "key-users"}) {
        std::string path = dest + "/" + name;
        UniqueFd target;
        if (sys::try_openat2(root, path, O_PATH, kInRoot, 0, target) == -ENOENT)
            continue;  // a kernel without CONFIG_KEYS
        std::string what = "Can't hide " + path;
        // The host's /dev/null (the root is still the host's), read-only: a
        // read finds nothing, a write or a chmod meets EROFS.
        UniqueFd null = clone_mount(AT_FDCWD, "/dev/null", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                                    what, what);
        attach(null.get(), target.get(), what);
    }
    for (const char* name : {"sys", "sysrq-trigger", "irq", "bus"}) {
        std::string path = dest + "/" + name;
        UniqueFd target;
        if (sys::try_openat2(root, path, O_PATH, kInRoot, 0, target) == -ENOENT)
            continue;
        std::string what = "Can't remount " + path + " read-only";
        UniqueFd tree = clone_mount(target.get(), "", AT_RECURSIVE | AT_EMPTY_PATH,
                                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, what, what);
        attach(tree.get(), target.get(), what);
    }
}

HiddenDirs make_hidden_dirs(const Plan& plan, std::vector<MadeTmpfs>& made)
{
    auto hidden_tmpfs = [&](const char* name, unsigned long long size, bool fit) {
        FsParams params{{"mode", "0700"}};
        add_size(params, size);
        UniqueFd mnt = new_mount("tmpfs", params, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, name);
        check(::move_mount(mnt.get(), "", AT_FDCWD, kStaging, MOVE_MOUNT_F_EMPTY_PATH),
              std::string("Can't attach the tmpfs of ") + name + " on " + kStaging);
        const int fd = mnt.get();
        made.push_back({std::move(mnt), name, fit});
        return fd;
    };
    HiddenDirs dirs;
    dirs.uppers.assign(plan.ops.size(), -1);
    for (size_t i = 0; i < plan.ops.size(); ++i) {
        auto* d = std::get_if<Data>(&plan.ops[i]);
        auto* o = std::get_if<Overlay>(&plan.ops[i]);
        if (d && d->kind != DataKind::File && dirs.data < 0)
            dirs.data = hidden_tmpfs("(data files)", 0, true);
        else if (o && o->kind == OverlayKind::Tmp)
            dirs.uppers[i] = hidden_tmpfs("(--tmp-overlay)", o->size, false);
    }
    return dirs;
}

}  // namespace cocoon::mount
