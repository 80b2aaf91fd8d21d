// The sandbox's cgroup: looked up before the clone, made then (asked for) or by the monitor while
// set-up runs (unasked), emptied and removed after PID 1 is reaped. Every file is reached through
// the directory fds held here.
// Runs in: caller, monitor, pid2: the caller looks the cgroup up and makes an asked one; the
//  monitor makes an unasked one; PID 2 joins its leaf.
#include "ns/monitor/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
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

OwnCgroup parse_own_cgroup(const std::string& mountinfo, const std::string& cgroup)
{
    OwnCgroup own;
    std::string root;  // the mount's root within the hierarchy (field 4)
    std::istringstream mounts(mountinfo);
    for (std::string line; own.mount.empty() && std::getline(mounts, line);) {
        if (line.find(" - cgroup2 ") == std::string::npos)
            continue;
        std::istringstream fields(line);
        std::string id, parent, dev;
        fields >> id >> parent >> dev >> root >> own.mount;
        // After " - cgroup2 SOURCE ": the superblock's options.
        std::istringstream super(line.substr(line.find(" - cgroup2 ") + 11));
        std::string source, options;
        super >> source >> options;
        std::replace(options.begin(), options.end(), ',', ' ');
        own.nsdelegate = has_word(options, "nsdelegate");
    }
    if (own.mount.empty())
        return own;
    std::istringstream self(cgroup);
    for (std::string line; std::getline(self, line);)
        if (line.rfind("0::", 0) == 0) {
            std::string path = line.substr(3);
            // A mount of a subtree (a container's) shows paths below its root.
            if (root != "/" && path.rfind(root, 0) == 0)
                path.erase(0, root.size());
            own.dir = own.mount + (path == "/" || path.empty() ? "" : path);
        }
    return own;
}

OwnCgroup own_cgroup()
{
    // Start-up speed: plain reads (a start runs this; a stream costs its
    // locale and buffers).
    constexpr size_t kMax = size_t{16} << 20;
    OwnCgroup own = parse_own_cgroup(sys::read_small(AT_FDCWD, "/proc/self/mountinfo", kMax),
                                     sys::read_small(AT_FDCWD, "/proc/self/cgroup", kMax));
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

SandboxCgroup::Parent SandboxCgroup::find(const CgroupOptions& options, bool report)
{
    Parent found;
    // Only a cgroup asked for (a parent, a limit, a report) ends what a
    // sandbox without a PID namespace leaves running; unasked, the sandbox
    // keeps bwrap's rule (a background process outlives it).
    found.asked = asked(options, report);
    if (found.asked || !bench::skips(bench::Skip::Cgroup))
        found.dir = parent_dir(options, found.nsdelegate);
    return found;
}

SandboxCgroup SandboxCgroup::make(const CgroupOptions& options, bool report, std::string log_prefix, bool worker)
{
    return make(find(options, report), options, std::move(log_prefix), worker);
}

SandboxCgroup SandboxCgroup::make(const Parent& found, const CgroupOptions& options, std::string log_prefix,
                                  bool worker)
{
    SandboxCgroup cg;
    cg.m_warnings = Warnings(std::move(log_prefix));
    cg.m_kill_leftovers = found.asked;
    cg.m_nsdelegate = found.nsdelegate;
    const std::optional<std::string>& parent = found.dir;
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
