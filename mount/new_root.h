// The new root under construction, and the mount API calls that build it:
// destinations resolved in the new root (never outside it), the mount points
// made there, new superblocks, attaching, attributes, and the bounds of the
// tmpfs mounts cocoon makes. Internal to mount/ (mount/apply.cc).
// Runs in: setup.
#pragma once

#include <linux/openat2.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "mount/plan.h"

namespace cocoon::mount {

// Security: symlinks met while resolving a destination are followed as if the
// new root were "/", never into the host; /proc magic links are refused.
constexpr unsigned long long kInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

// The directory where the new root tmpfs is attached while it is built. Any
// existing directory works: all host sources are opened before it is covered.
constexpr const char* kStaging = "/tmp";

// Where a mount op attaches: an O_PATH fd of the destination in the new root.
struct Target {
    UniqueFd fd;
    bool existed = false;  // there before this op (not made by it)
    bool via_symlink = false;  // reached through a symlink in the new root
};

// Which place a file is at: a mount and an inode. Two fds name the same
// place only if both match; the same inode through two binds is two places.
struct Place {
    uint64_t mnt_id;
    dev_t dev;
    ino_t ino;
    bool operator==(const Place&) const = default;
};

Place place_of(int fd, const std::string& what);

// Security: a destination reached through a symlink must not be the new root
// or a directory above its own parent: a link planted by an earlier run (say
// WT/.git -> / or -> ..) would otherwise stack the mount over the root, or
// over the directories the path was spelled through, and the source (often
// the same link followed on the host) would cover the whole sandbox.
// Walks up to the root with ".." from each directory the destination is spelled through.
void refuse_covering(int root, const std::string& dest, int target, const std::string& what);

// Opens an existing path under root into t. Without symlinks on the way this
// is one call; through one, `check` (a mount op's destination) refuses a
// target that covers the root or a parent. Returns 0 or -errno.
int open_existing(int root, const std::string& path, int flags, const std::string* check, Target& t);

// mkdir -p under root; the final directory in t. A directory it creates gets
// `mode`, missing parents `parent_mode`. check: as for open_existing.
Target ensure_dir(int root, const std::string& path, mode_t mode, mode_t parent_mode = kDirMode,
                  const std::string* check = nullptr);

// Start-up speed: the directory a file's mount point or a symlink was last made in (--dev's
// nodes and links, all in /dev), kept for the next such op instead of resolved again. Only these
// ops may run while it is kept: a mount on a file, or a new name, changes what no directory's
// path resolves to; apply() clears it before any other op, and a bind of a directory after it.
class ParentDirs {
public:
    // dir's fd under root (ensure_dir), made with `mode` where missing; owned here.
    int get(int root, const std::string& dir, mode_t mode);
    // dir's fd where it is the one kept, else -1.
    int kept(const std::string& dir) const { return m_fd && dir == m_path ? m_fd.get() : -1; }
    void clear()
    {
        m_path.clear();
        m_fd.reset();
    }

private:
    std::string m_path;
    UniqueFd m_fd;
};

// The mount point for a mount op (what: its error prefix), made if missing:
// a directory, or an empty file for a bind of a non-directory (its directory
// from `parents` where given).
Target mount_point(int root, const std::string& dest, bool is_dir, const std::string& what,
                   mode_t parent_mode = kDirMode, ParentDirs* parents = nullptr);

// Throws SysError(err, what), with the filesystem's own explanation if it
// left one in the fs_context log (overlayfs does for most refusals).
[[noreturn]] void fs_failed(int fs, int err, std::string what);

// A filesystem's parameters, each set by fsconfig(FSCONFIG_SET_STRING, key, value) in order.
using FsParams = std::vector<std::pair<const char*, std::string>>;

// A new, detached superblock mount of fstype (tmpfs, proc, devpts, mqueue, overlay).
UniqueFd new_mount(const char* fstype, const FsParams& params, unsigned attrs, const std::string& dest);

void attach(int mnt, int target, const std::string& what);

void set_attrs(int fd, unsigned flags, unsigned long long set, const std::string& what);

// A clone of the mount at dfd/path (with AT_RECURSIVE in flags, of the tree there), with the
// attributes `set` on it (on every mount of the tree): open_tree(2) and mount_setattr(2) in one
// call, open_tree_attr(2), where the kernel has it (Linux 6.15); else the two, each failure named
// as theirs (find_what: open_tree's, what: mount_setattr's).
UniqueFd clone_mount(int dfd, const char* path, unsigned flags, unsigned long long set, const std::string& find_what,
                     const std::string& what);

// The size and nr_inodes parameters of a tmpfs of `size` bytes (0: none).
void add_size(FsParams& params, unsigned long long size);

// Security: a tmpfs cocoon made on its own (the root, --dev's, the data
// files') is bounded to what set-up put in it and kFitHeadroomBytes and
// kFitHeadroomInodes more, so the command can fill it with no more than that.
// Sized now, not when made: --file data and the mount points of later ops
// are of sizes known only now. mnt: the tmpfs's mount (its root).
void fit_tmpfs(int mnt, const std::string& name);

std::string octal(mode_t mode);

// Security: procfs files that reconfigure the host kernel stay read-only even
// for a sandbox that holds capabilities in its user namespace. The keyring
// lists read empty: /proc/keys names every key the caller's uid may view,
// in whatever keyring (a Kerberos ticket's principal, a VPN's, an encrypted
// home's), and /proc/key-users every uid's key counts.
void cover_proc(int root, const std::string& dest);

// A tmpfs apply() made, and whether it is sized at the end (fit_tmpfs).
struct MadeTmpfs {
    UniqueFd mnt;
    std::string name;
    bool fit = false;
};

// --bind-data files are made in a tmpfs of their own, and each
// --tmp-overlay's upper layer in another, attached under the staging point so
// that the new root covers them; they are never in the new root's tree.
// Attached because Linux 6.1's open_tree clones, and its overlayfs takes
// layers, only from mounts attached in our namespace (6.18 would take a
// detached one for open_tree). Not noexec: a --ro-bind-data file may be a
// script to run, as in bwrap.
struct HiddenDirs {
    int data = -1;  // the data files' tmpfs, or -1
    std::vector<int> uppers;  // by op: a --tmp-overlay's upper tmpfs, or -1
};

HiddenDirs make_hidden_dirs(const Plan& plan, std::vector<MadeTmpfs>& made);

}  // namespace cocoon::mount
