// The sandbox's cgroup: looked up and made before the clone (asked for) or by the monitor while
// set-up runs (unasked), emptied and removed after PID 1 is reaped. Every file is reached through
// the directory fds held here.
// Runs in: caller, monitor, pid2: the caller looks up and makes an asked cgroup; the monitor an
//  unasked one; PID 2 joins its leaf.
#include "ns/monitor/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <thread>
#include <vector>

#include "base/bench_skip.h"
#include "base/sys.h"
#include "base/sys_error.h"
#include "ns/monitor/usage.h"

namespace cocoon::ns {
namespace {

constexpr const char* kStep = "cgroup";  // the step its errors and warnings name

// Writes one value to a cgroup file; the errno, or 0.
int write_at(int dir, const char* name, const std::string& value)
{
    UniqueFd fd(::openat(dir, name, O_WRONLY | O_CLOEXEC));
    if (!fd)
        return errno;
    return ::write(fd.get(), value.data(), value.size()) == static_cast<ssize_t>(value.size()) ? 0 : errno;
}

bool has_word(const std::string& list, const std::string& word)
{
    std::istringstream in(list);
    for (std::string w; in >> w;)
        if (w == word)
            return true;
    return false;
}

// Removes the cgroup `name` under parent and every cgroup the sandbox made
// below it, depth first. rmdir can race the last exit's bookkeeping: a few
// short tries each. Returns what could not be removed, and why, if anything.
// Security: the depth is bounded by cgroup.max.descendants, set at make.
std::optional<SysError> remove_tree(int parent, const std::string& name, const std::string& path)
{
    std::optional<SysError> failed;
    if (UniqueFd dir{::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)}) {
        // Start-up speed: most trees are the sandbox's cgroup and its empty leaves, gone without a
        // listing.
        ::unlinkat(dir.get(), kCommandCgroup, AT_REMOVEDIR);
        ::unlinkat(dir.get(), kWorkerCgroup, AT_REMOVEDIR);
        if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0)
            return std::nullopt;
        for (const sys::DirEntry& child : sys::list_dir(dir.get()))
            if (child.type == DT_DIR)
                if (auto why = remove_tree(dir.get(), child.name, path + "/" + child.name); !failed)
                    failed = why;
    }
    for (int i = 0; i < 50; ++i) {
        if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
            return failed;
        if (errno != EBUSY)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const int err = errno;
    return failed ? failed : SysError(kStep, err, "can't remove the sandbox's cgroup", path);
}

// Whether the cgroup name below parent, or one below it, holds a process (a cgroup.events that
// cannot be read counts as one).
bool populated(int parent, const std::string& name)
{
    const std::string events = sys::read_small(parent, (name + "/cgroup.events").c_str(), 4096);
    return keyed_number(events, "populated").value_or(1) != 0;
}

// Removes the cgroups of earlier sandboxes whose cocoon was killed: no process
// is in them (cgroup.events says so; a live sandbox's PID 1 or command is) and
// they were made over a minute ago (a cgroup just made, a moment before its
// first process is cloned into it, is left alone). rmdir refuses one that still
// has processes.
void remove_stale(int parent)
{
    const time_t now = ::time(nullptr);
    for (const sys::DirEntry& e : sys::list_dir(parent)) {
        struct stat st {};
        if (is_sandbox_cgroup_name(e.name) && ::fstatat(parent, e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode) && now - st.st_mtime >= 60 && !populated(parent, e.name))
            remove_tree(parent, e.name, e.name);
    }
}

// Where the sandbox's cgroup goes: --cgroup-parent, else the caller's own cgroup; nullopt where
// the caller may make none there (resource use is sampled then). Throws UsageError when a limit
// was asked for and there is nowhere to set it.
std::optional<std::string> parent_dir(const CgroupOptions& options, bool& nsdelegate)
{
    if (options.parent)
        return options.parent;
    // Security: a sandbox left in the caller's cgroup has it as the root
    // of every cgroup namespace the agent makes: its cgroup.kill and
    // cgroup.freeze would reach the caller and everything beside it,
    // wherever the caller's uid may write them. So wherever the caller
    // may make a cgroup in its own (its uid may write there: root, or a
    // delegated cgroup), the sandbox gets one below it, with or without
    // a report. Where it may not, neither may the agent (same uid), save
    // for a root caller whose cgroup2 is read-only or missing:
    // --host-user closes that (SECURITY.md).
    OwnCgroup own = own_cgroup();
    if (own.mount.empty() || !own.writable) {
        // The option a failure names: the limit the user asked for.
        const char* what = options.memory_max ? "--memory-max" : "--pids-max";
        if (options.has_limit())
            throw UsageError(std::string(what) + ": no cgroup v2 to set it in (" +
                             (own.mount.empty() ? std::string("cgroup2 is not mounted")
                                                : "the caller may not write its cgroup " + own.dir) +
                             "); give --cgroup-parent DIR");
        return std::nullopt;
    }
    nsdelegate = own.nsdelegate;
    return own.dir;
}

// The parent's directory fd, which every later step works in; `label` names it in errors.
UniqueFd open_parent(const std::string& parent, const std::string& label)
{
    UniqueFd fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd)
        throw SysError(kStep, errno, label, parent);
    struct statfs fs {};
    if (::fstatfs(fd.get(), &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
        throw UsageError(label + " " + parent + ": not a cgroup v2 directory");
    return fd;
}

// The controllers a limit or the report needs, enabled for the parent's
// children where they run here. Enabling fails in a cgroup that has
// processes of its own (cgroup v2's rule), as a delegated own cgroup has:
// the report then samples what the cgroup cannot give.
void enable_controllers(int parent_fd, const std::string& parent, const CgroupOptions& options)
{
    const std::string available = sys::read_small(parent_fd, "cgroup.controllers", 4096);
    for (auto [name, limited] :
         {std::pair{"memory", options.memory_max.has_value()}, std::pair{"pids", options.pids_max.has_value()}}) {
        const std::string option = std::string("--") + name + "-max";
        if (limited && !has_word(available, name))
            throw UsageError(option + ": the cgroup v2 " + name + " controller is not available in " + parent +
                             " (cgroup.controllers: \"" + available.substr(0, available.find('\n')) + "\")");
        if (!has_word(available, name) || has_word(sys::read_small(parent_fd, "cgroup.subtree_control", 4096), name))
            continue;
        if (int err = write_at(parent_fd, "cgroup.subtree_control", std::string("+") + name); err && limited)
            throw SysError(kStep, err, option + ": can't enable the " + name + " controller in",
                           parent + "/cgroup.subtree_control");
    }
}

// Makes and opens the sandbox's cgroup under parent_fd: cocoon-PID; where a
// cgroup of that name is left (a killed cocoon of the same pid, or one of
// another PID namespace: a container's pid 2, alive), cocoon-PID-N: a
// leftover never blocks a start, nor is it touched. 0, or the errno.
int make_own(int parent_fd, std::string& name, UniqueFd& dir)
{
    int made = -1;
    for (int n = 0; made < 0 && (n == 0 || errno == EEXIST) && n < 100; ++n) {
        name = "cocoon-" + std::to_string(::getpid()) + (n ? "-" + std::to_string(n) : "");
        made = ::mkdirat(parent_fd, name.c_str(), 0755);
    }
    if (made == 0)
        dir.reset(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    // The caller's umask may have taken the owner's write bit (0277), without which an unprivileged
    // monitor could make no leaf below.
    if (dir && ::fchmod(dir.get(), 0755) == 0)
        return 0;
    const int err = errno;
    if (made == 0)
        ::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR);
    return err;
}

// A leaf below the sandbox's cgroup (dir), made and opened; with procs, its cgroup.procs too.
// Security: the command and everything it starts live in a leaf below
// the sandbox's cgroup, the root of their cgroup namespaces; PID 1 stays
// above, out of their view, so they can neither move nor freeze it, and
// the cgroup.procs fd PID 2 moves itself with was opened here (the
// kernel checks a cgroup.procs write against its opener). The relay
// worker's leaf is beside it, out of their view as well: what it spends is
// the sandbox's, and still told apart.
UniqueFd make_leaf(int dir, const char* name, const std::string& path, const std::string& where,
                   UniqueFd* procs = nullptr)
{
    const std::string leaf_path = path + "/" + name;
    if (::mkdirat(dir, name, 0755) < 0)
        throw SysError(kStep, errno, where + ": can't make", leaf_path);
    UniqueFd leaf(::openat(dir, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (leaf && ::fchmod(leaf.get(), 0755) < 0)  // as make_own: whatever the caller's umask
        throw SysError(kStep, errno, where + ": can't chmod", leaf_path);
    if (leaf && procs)
        procs->reset(::openat(leaf.get(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
    if (!leaf || (procs && !*procs))
        throw SysError(kStep, errno, where + ": can't open", leaf ? leaf_path + "/cgroup.procs" : leaf_path);
    return leaf;
}

void set_limits(int dir, const std::string& path, const std::string& where, const CgroupOptions& options)
{
    auto set = [&](const std::string& option, const char* file, uint64_t value) {
        if (int err = write_at(dir, file, std::to_string(value)))
            throw SysError(kStep, err, option + ": can't write", path + "/" + file);
    };
    // Security: the cgroups the agent may make below its own are bounded
    // (each is kernel memory, and removal walks them).
    set(where, "cgroup.max.descendants", kMaxDescendants);
    if (options.memory_max)
        set("--memory-max", "memory.max", *options.memory_max);
    if (options.pids_max)
        set("--pids-max", "pids.max", *options.pids_max);
}

}  // namespace

std::optional<uint64_t> keyed_number(std::string_view text, std::string_view key)
{
    while (!text.empty()) {
        const std::string_view line = text.substr(0, text.find('\n'));
        text.remove_prefix(std::min(text.size(), line.size() + 1));
        // A key is a whole word: blanks after it, then the digits (no sign).
        const size_t digits = line.find_first_not_of(" \t", key.size());
        uint64_t value = 0;
        if (line.substr(0, key.size()) == key && digits != std::string_view::npos &&
            (key.empty() || digits > key.size()) &&
            std::from_chars(line.data() + digits, line.data() + line.size(), value).ec == std::errc())
            return value;
    }
    return std::nullopt;
}

namespace {

// The cgroup2 mount the caller's cgroup is read under: where it is mounted, its root within the
// hierarchy ("/", or the subtree a container was given), and whether nsdelegate is on.
struct Cgroup2Mount {
    std::string mount;
    std::string root = "/";
    bool nsdelegate = false;
};

bool has_option(std::string options, const char* name)
{
    std::replace(options.begin(), options.end(), ',', ' ');
    return has_word(options, name);
}

// The first cgroup2 line of /proc/self/mountinfo; an empty mount where there is none.
Cgroup2Mount cgroup2_in_mountinfo(const std::string& mountinfo)
{
    Cgroup2Mount found;
    std::istringstream mounts(mountinfo);
    for (std::string line; found.mount.empty() && std::getline(mounts, line);) {
        if (line.find(" - cgroup2 ") == std::string::npos)
            continue;
        std::istringstream fields(line);
        std::string id, parent, dev;
        fields >> id >> parent >> dev >> found.root >> found.mount;
        // After " - cgroup2 SOURCE ": the superblock's options.
        std::istringstream super(line.substr(line.find(" - cgroup2 ") + 11));
        std::string source, options;
        super >> source >> options;
        found.nsdelegate = has_option(options, "nsdelegate");
    }
    return found;
}

// statmount(2) (Linux 6.8; a mount's options and its namespace's id since 6.11), which glibc
// 2.36's headers lack: the kernel's ABI, as include/uapi/linux/mount.h gives it.
constexpr long kSysStatmount = 457;  // x86_64, i386 and the generic table alike
constexpr unsigned kStatxMntIdUnique = 0x4000;  // STATX_MNT_ID_UNIQUE
constexpr uint64_t kStatmountMntRoot = 0x8;  // STATMOUNT_MNT_ROOT
constexpr uint64_t kStatmountMntNsId = 0x40;  // STATMOUNT_MNT_NS_ID
constexpr uint64_t kStatmountMntOpts = 0x80;  // STATMOUNT_MNT_OPTS
struct MntIdReq {  // struct mnt_id_req, MNT_ID_REQ_SIZE_VER0
    uint32_t size;
    uint32_t spare;
    uint64_t mnt_id;
    uint64_t param;
};
// struct statmount: size (u32) at 0, mnt_opts (u32) at 4, mask (u64) at 8, mnt_root (u32) at 104;
// its strings (offsets into str[], each ending in a NUL) start at 512.
constexpr size_t kStatmountStrings = 512;

// The string at `offset` of a statmount answer of `size` bytes in buf, or nullptr.
const char* statmount_string(const char* buf, size_t size, uint32_t offset)
{
    const size_t strings = size > kStatmountStrings ? size - kStatmountStrings : 0;
    if (offset >= strings || !std::memchr(buf + kStatmountStrings + offset, 0, strings - offset))
        return nullptr;
    return buf + kStatmountStrings + offset;
}

// Start-up speed: the cgroup2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified (where systemd's
// layouts and containers put it), asked of the kernel for that one mount: 13 us here, where
// /proc/self/mountinfo formats every mount (41 us, more with more mounts) under the kernel's lock
// of every mount namespace, which set-up's mount calls wait on while the monitor reads it.
// nullopt (read mountinfo instead) before Linux 6.11 or where cgroup2 is mounted elsewhere.
std::optional<Cgroup2Mount> cgroup2_by_statmount()
{
    for (const char* dir : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        struct statfs fs {};
        if (::statfs(dir, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
            continue;
        struct statx stx {};
        if (::statx(AT_FDCWD, dir, AT_NO_AUTOMOUNT, kStatxMntIdUnique, &stx) != 0 ||
            !(stx.stx_mask & kStatxMntIdUnique) || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) ||
            !(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
            return std::nullopt;
        // The namespace's id is asked only as a witness: a kernel that gives it (6.11) knows the
        // options too, and leaves their bit clear where the mount has none.
        MntIdReq req{sizeof req, 0, stx.stx_mnt_id, kStatmountMntRoot | kStatmountMntNsId | kStatmountMntOpts};
        alignas(uint64_t) char buf[kStatmountStrings + 4096];
        if (::syscall(kSysStatmount, &req, buf, sizeof buf, 0) != 0)
            return std::nullopt;
        uint32_t size = 0, opts = 0, root = 0;
        uint64_t mask = 0;
        std::memcpy(&size, buf, 4);
        std::memcpy(&opts, buf + 4, 4);
        std::memcpy(&mask, buf + 8, 8);
        std::memcpy(&root, buf + 104, 4);
        size = std::min<uint32_t>(size, sizeof buf);
        const char* root_path = statmount_string(buf, size, root);
        const char* options = (mask & kStatmountMntOpts) ? statmount_string(buf, size, opts) : "";
        if ((mask & (kStatmountMntRoot | kStatmountMntNsId)) != (kStatmountMntRoot | kStatmountMntNsId) || !root_path ||
            !options)
            return std::nullopt;
        return Cgroup2Mount{dir, root_path, has_option(options, "nsdelegate")};
    }
    return std::nullopt;
}

// Start-up speed: /proc texts are read with plain reads (a start runs this; a stream costs its
// locale and buffers), up to this much.
constexpr size_t kMaxProcText = size_t{16} << 20;

// The caller's cgroup as a path under mount, from /proc/self/cgroup's "0::" line.
OwnCgroup own_under(const Cgroup2Mount& mount, const std::string& cgroup)
{
    OwnCgroup own;
    own.mount = mount.mount;
    own.nsdelegate = mount.nsdelegate;
    if (own.mount.empty())
        return own;
    std::istringstream self(cgroup);
    for (std::string line; std::getline(self, line);)
        if (line.rfind("0::", 0) == 0) {
            std::string path = line.substr(3);
            // A mount of a subtree (a container's) shows paths below its root.
            if (mount.root != "/" && path.rfind(mount.root, 0) == 0)
                path.erase(0, mount.root.size());
            own.dir = own.mount + (path == "/" || path.empty() ? "" : path);
        }
    return own;
}

}  // namespace

OwnCgroup parse_own_cgroup(const std::string& mountinfo, const std::string& cgroup)
{
    return own_under(cgroup2_in_mountinfo(mountinfo), cgroup);
}

std::optional<OwnCgroup> own_cgroup_by_statmount()
{
    const std::optional<Cgroup2Mount> mount = cgroup2_by_statmount();
    if (!mount)
        return std::nullopt;
    return own_under(*mount, sys::read_small(AT_FDCWD, "/proc/self/cgroup", kMaxProcText));
}

OwnCgroup own_cgroup_by_mountinfo()
{
    return parse_own_cgroup(sys::read_small(AT_FDCWD, "/proc/self/mountinfo", kMaxProcText),
                            sys::read_small(AT_FDCWD, "/proc/self/cgroup", kMaxProcText));
}

OwnCgroup own_cgroup()
{
    std::optional<OwnCgroup> fast = own_cgroup_by_statmount();
    OwnCgroup own = fast ? std::move(*fast) : own_cgroup_by_mountinfo();
    // The caller may make a cgroup there and move processes between it and its own.
    own.writable = !own.dir.empty() && ::access(own.dir.c_str(), W_OK) == 0 &&
                   ::access((own.dir + "/cgroup.procs").c_str(), W_OK) == 0;
    return own;
}

bool cgroup_offers(const std::string& dir, const std::string& controller)
{
    return has_word(sys::read_small(AT_FDCWD, (dir + "/cgroup.controllers").c_str(), 4096), controller);
}

bool is_sandbox_cgroup_name(const std::string& name)
{
    // cocoon-PID, or cocoon-PID-N where cocoon-PID was taken.
    const size_t end = std::min(name.find('-', 7), name.size());
    if (name.rfind("cocoon-", 0) != 0 || end == 7 || end > 17 || end + 1 == name.size() || name.size() > end + 11)
        return false;
    for (size_t i = 7; i < name.size(); ++i)
        if ((name[i] < '0' || name[i] > '9') && i != end)
            return false;
    const long pid = std::strtol(name.c_str() + 7, nullptr, 10);
    return pid > 0 && pid <= INT32_MAX;
}

SandboxCgroup SandboxCgroup::make(const CgroupOptions& options, bool report, std::string log_prefix, bool worker)
{
    SandboxCgroup cg;
    cg.m_warnings = Warnings(std::move(log_prefix));
    // Only a cgroup asked for (a parent, a limit, a report) ends what a
    // sandbox without a PID namespace leaves running; unasked, the sandbox
    // keeps bwrap's rule (a background process outlives it).
    cg.m_kill_leftovers = asked(options, report);
    if (!cg.m_kill_leftovers && bench::skips(bench::Skip::Cgroup))
        return cg;
    const std::optional<std::string> parent = parent_dir(options, cg.m_nsdelegate);
    if (!parent)
        return cg;  // sampled
    const std::string label = options.parent ? "--cgroup-parent" : "the caller's cgroup";
    const std::string where = label + " " + *parent;
    cg.m_parent = open_parent(*parent, label);
    enable_controllers(cg.m_parent.get(), *parent, options);
    remove_stale(cg.m_parent.get());
    if (int err = make_own(cg.m_parent.get(), cg.m_name, cg.m_dir)) {
        if (options.parent || options.has_limit())
            throw SysError(kStep, err, where + ": can't make", *parent + "/" + cg.m_name);
        return SandboxCgroup();  // sampled
    }
    cg.m_path = *parent + "/" + cg.m_name;
    cg.m_command = make_leaf(cg.m_dir.get(), kCommandCgroup, cg.m_path, where, &cg.m_command_procs);
    if (worker)
        cg.m_worker = make_leaf(cg.m_dir.get(), kWorkerCgroup, cg.m_path, where);
    // From here on the destructor removes the cgroup if anything fails.
    set_limits(cg.m_dir.get(), cg.m_path, where, options);
    return cg;
}

void enter_command_cgroup(int procs_fd, bool has_cgroup, bool new_ns)
{
    if (!has_cgroup)
        return;
    // "0": the writing process. The kernel checks the write against the
    // fd's opener (the monitor), not against the sandbox's ids.
    if (procs_fd >= 0 && ::write(procs_fd, "0", 1) != 1)
        throw SysError(errno,
                       std::string("Can't move the command into its cgroup (") + kCommandCgroup + "/cgroup.procs)");
    if (new_ns)
        check(::unshare(CLONE_NEWCGROUP), "Can't make the command's cgroup namespace (unshare)");
}

void SandboxCgroup::empty_out()
{
    if (!m_dir || m_emptied)
        return;
    m_emptied = true;
    UniqueFd events(::openat(m_dir.get(), "cgroup.events", O_RDONLY | O_CLOEXEC));
    auto populated = [&] {
        char buf[256];
        ssize_t n = events ? ::pread(events.get(), buf, sizeof buf - 1, 0) : -1;
        return n < 0 || keyed_number(std::string_view(buf, static_cast<size_t>(n)), "populated").value_or(1) != 0;
    };
    if (!populated())
        return;
    if (!m_kill_leftovers) {
        m_left_running = true;  // removed, once empty, by a later start's sweep
        return;
    }
    // cgroup.kill (Linux 5.14) SIGKILLs every process in the cgroup at once,
    // new forks included; before it, each listed process is killed in turn.
    const bool kill_file = write_at(m_dir.get(), "cgroup.kill", "1") == 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (populated() && std::chrono::steady_clock::now() < deadline) {
        if (!kill_file) {
            std::vector<pid_t> pids;  // the command's leaf and what the agent made below it too
            cgroup_pids(m_dir.get(), pids);
            for (pid_t pid : pids)
                ::kill(pid, SIGKILL);
        }
        // cgroup.events raises POLLPRI when populated changes.
        pollfd p{events.get(), POLLPRI, 0};
        ::poll(&p, 1, 20);
    }
}

void SandboxCgroup::account(Usage& usage) const
{
    if (!m_dir)
        return;
    const std::string cpu = sys::read_small(m_dir.get(), "cpu.stat", 4096);
    auto user = keyed_number(cpu, "user_usec"), system = keyed_number(cpu, "system_usec");
    if (!user || !system)
        return;  // sampled, all of it
    usage.cpu_user_us = *user;
    usage.cpu_system_us = *system;
    auto memory = keyed_number(sys::read_small(m_dir.get(), "memory.peak", 4096), "");
    auto pids = keyed_number(sys::read_small(m_dir.get(), "pids.peak", 4096), "");
    usage.memory_peak_bytes = memory.value_or(usage.memory_peak_bytes);  // else the sampled peak
    usage.pids_peak = pids.value_or(usage.pids_peak);
    usage.accounting = memory && pids ? "cgroup" : "cgroup+sampled";
}

SandboxCgroup::~SandboxCgroup()
{
    if (!m_dir)
        return;
    empty_out();
    m_dir.reset();
    m_command.reset();
    m_command_procs.reset();
    m_worker.reset();
    if (m_left_running)
        return;
    if (std::optional<SysError> failed = remove_tree(m_parent.get(), m_name, m_path))
        m_warnings.say(*failed);
}

}  // namespace cocoon::ns
