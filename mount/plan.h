// The mount plan: filesystem operations in command-line order, as typed values.
// Pure: built in the monitor from the parsed options, applied later by mount/apply.cc.
// Runs in: caller, setup: the caller plans; set-up reads the plan's names for its messages.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::mount {

enum class BindKind { ReadWrite, ReadOnly, Dev };

// Modes as bwrap sets them when no --perms comes first.
constexpr mode_t kDirMode = 0755;  // --dir, --tmpfs, missing parents
constexpr mode_t kFileMode = 0666;  // --file
constexpr mode_t kDataMode = 0600;  // --bind-data, --ro-bind-data

// bwrap's rule for the parents an op creates: 0755, except that --perms
// without group (or other) bits takes those bits away from the parents too.
mode_t parent_mode_for(mode_t perms);

// A host path (resolved from the caller's cwd, before the sandbox exists)
// bound recursively onto a path in the new root.
struct Bind {
    std::string source;
    std::string dest;
    BindKind kind = BindKind::ReadWrite;
    bool optional = false;  // the -try forms: a missing source is skipped
    int fd = -1;  // --bind-fd/--ro-bind-fd: the source is this open fd, not `source`
    // --dev's own nodes (/dev/null and the like): cocoon's fixed host paths, not the caller's, of
    // character devices. Start-up speed: opened by path in one call, and known not to be
    // directories (mount/apply.cc).
    bool device_node = false;
};
// --size bounds a tmpfs's inodes too: one per kBytesPerInode of it, and at
// least kMinInodes. Security: without it a 1 MiB tmpfs takes the kernel's
// default, half the RAM's pages: millions of empty files, directories or
// links, each about 1 KiB of kernel memory that --size never counts. A file
// with data takes at least a 4 KiB page of the size, so files fill the size
// before they run out of inodes; the rest leaves room for directories.
constexpr unsigned long long kBytesPerInode = 2048;
constexpr unsigned long long kMinInodes = 256;
constexpr unsigned long long tmpfs_inodes(unsigned long long size)
{
    return size / kBytesPerInode > kMinInodes ? size / kBytesPerInode : kMinInodes;
}

// The tmpfs mounts cocoon makes on its own (the root, --dev's, the hidden
// one of --bind-data files) are bounded too. Security: without a bound each
// takes up to half the RAM, and the command may write to each (the root and
// /dev are the command's where it is the caller). They hold mount points,
// links and data the set-up copied in, of sizes known only once set-up is
// done, so they are sized then: what they hold and this much more.
constexpr unsigned long long kFitHeadroomBytes = 1 << 20;
constexpr unsigned long long kFitHeadroomInodes = 256;
// --dev's /dev/shm (POSIX shared memory: shm_open), where no --size comes
// before --dev: Docker's default.
constexpr unsigned long long kShmSize = 64ULL << 20;
// --login-file's directory, where no --size comes before the option: room
// for the login file (at most 1 MiB) and the temp file an update renames.
constexpr unsigned long long kLoginDirSize = 4ULL << 20;

struct Tmpfs {
    std::string dest;
    mode_t mode = kDirMode;
    // --size in bytes (and tmpfs_inodes(size) inodes); 0: the kernel's defaults
    unsigned long long size = 0;
    mode_t parent_mode = kDirMode;
    bool fresh_home = false;  // --fresh-home (mode 0700, owned by the command)
    // --dev's own tmpfs: sized at the end of set-up to what it holds and
    // kFitHeadroomBytes/kFitHeadroomInodes more (size is then 0).
    bool fit = false;
    // The root directory's owner (ids as the setup process sees them) where it
    // is not the setup process itself (--uid with --userns); else unset.
    std::optional<uid_t> uid = std::nullopt;
    std::optional<gid_t> gid = std::nullopt;
};
// --proc: a new procfs, or the host's /proc bound (see Plan::own_pid_ns).
struct Proc {
    std::string dest;
};
// --dev as given on the command line; the planner expands it into the ops below.
struct Dev {
    std::string dest;
    // DEST/shm's size: --size before --dev, else kShmSize.
    unsigned long long shm_size = kShmSize;
};
// A new devpts instance (only made by expanding --dev).
struct Devpts {
    std::string dest;
};
struct Dir {
    std::string dest;
    mode_t mode = kDirMode;  // only for a directory this op creates
    mode_t parent_mode = kDirMode;
};
// --file, --bind-data, --ro-bind-data: the bytes read from fd become a file.
enum class DataKind { File, Bind, RoBind };
const char* option_of(DataKind kind);
struct Data {
    int fd = -1;
    std::string dest;
    DataKind kind = DataKind::File;
    mode_t mode = kFileMode;
    mode_t parent_mode = kDirMode;
    // A file of cocoon's own (--egress's /etc/resolv.conf): these bytes, not an fd's (fd is -1).
    std::optional<std::string> bytes = std::nullopt;
    // Bound only where dest exists in the new root (links followed within it); else skipped.
    bool only_if_present = false;
};
struct Mqueue {
    std::string dest;
};
// --chmod: dest must exist when the op runs.
struct Chmod {
    std::string dest;
    mode_t mode = 0;
};
struct Symlink {
    std::string target;
    std::string dest;
};
struct RemountRo {
    std::string dest;
};

// --overlay, --tmp-overlay, --ro-overlay: an overlayfs on dest whose lower
// layers are the host paths of the --overlay-src options before it.
enum class OverlayKind { ReadWrite, Tmp, ReadOnly };
const char* option_of(OverlayKind kind);
struct Overlay {
    std::vector<std::string> sources;  // command-line order: the last one is the topmost layer
    std::string upper;  // --overlay RWSRC (host path); else empty
    std::string work;  // --overlay WORKDIR (host path); else empty
    std::string dest;
    OverlayKind kind = OverlayKind::Tmp;
    // --tmp-overlay: the upper layer's tmpfs size (--size before the option,
    // with tmpfs_inodes(size) inodes); 0: the kernel's defaults, as --tmpfs.
    unsigned long long size = 0;
};

// What apply() executes.
using Op = std::variant<Bind, Tmpfs, Proc, Devpts, Dir, Symlink, RemountRo, Data, Mqueue, Chmod, Overlay>;
// What the command line gives: the same, but --dev (which make_plan expands)
// in place of the Devpts it makes.
using InputOp = std::variant<Bind, Tmpfs, Proc, Dev, Dir, Symlink, RemountRo, Data, Mqueue, Chmod, Overlay>;

// The fds the ops read (--file, --bind-data, --ro-bind-data) or bind
// (--bind-fd, --ro-bind-fd), owned, by the number the op names.
using Fds = std::map<int, UniqueFd>;

// What apply() executes: destinations normalised, --dev expanded.
struct Plan {
    std::vector<Op> ops;
    // --no-follow-sources: a host source path (bind, overlay layer, RWSRC,
    // WORKDIR) with a symlink in any component is refused.
    bool no_follow_sources = false;
    // Whether the sandbox has a PID namespace of its own (new, or joined with
    // --pidns). bwrap's rule for --proc: a new procfs only then; otherwise
    // the host's /proc, bound, since the PID namespace is the host's anyway.
    bool own_pid_ns = false;
};

// The destination of any op.
template <class AnyOp> const std::string& dest_of(const AnyOp& op)
{
    return std::visit([](const auto& o) -> const std::string& { return o.dest; }, op);
}

// An op that reads from one of the caller's fds, and the option that named it.
struct FdUse {
    int fd;
    const char* option;  // "--file", "--bind-data", "--ro-bind-data", "--bind-fd", "--ro-bind-fd"
    std::string name() const { return std::string(option) + " " + std::to_string(fd); }  // "--file 5"
};
std::optional<FdUse> fd_use(const Bind& bind);
std::optional<FdUse> fd_use(const Data& data);  // nullopt for cocoon's own bytes
// Of any op (Op, InputOp): a Bind's or a Data's, else nullopt.
template <class AnyOp> std::optional<FdUse> fd_use(const AnyOp& op)
{
    if (auto* d = std::get_if<Data>(&op))
        return fd_use(*d);
    if (auto* b = std::get_if<Bind>(&op))
        return fd_use(*b);
    return std::nullopt;
}

// Absolute, without "." or repeated slashes; a destination without a leading
// slash is taken from the sandbox's root, as bwrap does. Throws UsageError for
// an empty path or one with a ".." component (it could name a place outside
// the directory the caller meant).
std::string normalize_dest(const std::string& path);

// Throws UsageError naming the offending destination, or an fd that two ops
// would read. console: the caller's terminal (the path of its stdout), which
// each --dev binds at DEST/console, as bwrap does; nullopt for none.
Plan make_plan(const std::vector<InputOp>& ops, const std::optional<std::string>& console = std::nullopt);

}  // namespace cocoon::mount
