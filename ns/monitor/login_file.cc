// --login-file: the copy in the sandbox and the write-back to the host (ARCHITECTURE.md, "Login
// files", has the design). Everything LoginFiles reads from the sandbox is untrusted and reached
// only through the directory fd the first process sent, never by a path.
// Runs in: caller, monitor, setup: the caller opens SRC; set-up seeds DEST (seed_login_file);
//  the monitor, with the caller's rights, writes renewals back.
#include "ns/monitor/login_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdlib>

#include "base/sys.h"
#include "base/sys_error.h"
#include "ns/monitor/login_source.h"
#include "ns/monitor/stop.h"

namespace cocoon::ns {
namespace {

// Security: the agent makes as many events as it likes (writes beside DEST, renames over it), so
// the monitor reads them at most every kRest, and the kernel merges repeats meanwhile (an event
// like the last one queued is not added); a queue that overflows means "look at everything".
constexpr auto kRest = std::chrono::milliseconds(100);
// A version is saved to SRC at most once per kSaveGap per login file, so a renewal storm costs the
// host one write-back (temp file, fsync, rename, lock) a second; the last version is saved at the
// end whatever the gap.
constexpr auto kSaveGap = std::chrono::milliseconds(1000);

constexpr uint32_t kDestEvents = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY | IN_CREATE | IN_Q_OVERFLOW;
constexpr uint32_t kSrcEvents = IN_CLOSE_WRITE | IN_MOVED_TO;

// The warnings' step, and what a failed write-back leaves.
constexpr const char* kStep = "login sync";
constexpr const char* kKept = "SRC keeps its last saved version";
// What a refused or failed write-back leaves: SRC's last version, or (--login-file-try, before
// the first save) no SRC.
const char* kept(bool absent)
{
    return absent ? "SRC stays missing" : kKept;
}

// The sync's error for the call that just failed on path (errno is read first).
SysError failed(const std::string& option, const char* what, const std::string& path)
{
    const int err = errno;
    return SysError(kStep, err, option + ": " + what, path);
}

bool same_version(const struct stat& a, const struct stat& b)
{
    return a.st_ino == b.st_ino && a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
           a.st_mtim.tv_nsec == b.st_mtim.tv_nsec && a.st_ctim.tv_sec == b.st_ctim.tv_sec &&
           a.st_ctim.tv_nsec == b.st_ctim.tv_nsec;
}

// Reads the file at fd (as `opened` was before) whole, at most kLoginFileMax bytes (one more
// shows an oversized file): false if a read fails or the file changed while it was read.
bool read_stable(int fd, const struct stat& opened, std::string& out)
{
    struct stat after;
    return sys::read_up_to(fd, kLoginFileMax + 1, out) && out.size() <= kLoginFileMax && ::fstat(fd, &after) == 0 &&
           same_version(opened, after) && out.size() == static_cast<size_t>(after.st_size);
}

}  // namespace

LoginFiles::LoginFiles(const std::vector<LoginFile>& files, std::string log_prefix, bool no_follow)
    : m_warnings(std::move(log_prefix))
{
    if (files.empty())
        return;
    m_inotify.reset(static_cast<int>(check(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")));
    m_timer.reset(
        static_cast<int>(check(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC), "timerfd_create")));
    for (const LoginFile& file : files) {
        Entry e;
        open_source(e, file, no_follow);
        if (e.src.dir) {
            remove_stale_temps(e.src.dir.get(), e.src_name);
            watch_source(e);
        }
        m_entries.push_back(std::move(e));
    }
}

// SRC's directory is watched for renewals from the host (check_source).
void LoginFiles::watch_source(Entry& e)
{
    const std::string proc = "/proc/self/fd/" + std::to_string(e.src.dir.get());
    e.src_wd = ::inotify_add_watch(m_inotify.get(), proc.c_str(), kSrcEvents);
    if (e.src_wd < 0)
        throw failed(e.option, "can't watch", e.src_dir_path);
}

// Opens SRC's directory and reads SRC (login_source.h). Nothing is made.
void LoginFiles::open_source(Entry& e, const LoginFile& file, bool no_follow)
{
    e.option = file.option();
    e.dest_path = file.dest;
    e.dest_name = sys::split_parent(file.dest).second;
    auto [dir, name] = sys::split_parent(file.source);
    e.src_dir_path = dir;
    e.src_name = name;
    if (name.empty() || name == "." || name == "..")
        throw UsageError(e.option + ": SRC must name a file");
    // Security: SRC's directory is opened once, here, and held for the whole run: every later
    // read of SRC and every write-back happens in this fd, never by path.
    e.src = open_source_dir(dir, no_follow, file.may_be_missing, e.option);
    SourceVersion v = read_source(e.src, name, file.source, file.may_be_missing, e.option);
    e.synced = std::move(v.content);
    e.src_mode = v.mode;
    e.src_gid = v.gid;
    e.absent = v.absent;
}

std::vector<LoginSeed> LoginFiles::seeds() const
{
    std::vector<LoginSeed> out;
    for (const Entry& e : m_entries)
        out.push_back({e.synced, e.src_mode & 0777, e.absent});
    return out;
}

void LoginFiles::add_sandbox_dir(size_t index, UniqueFd dir)
{
    if (index >= m_entries.size() || m_entries[index].dest_dir)
        return;
    Entry& e = m_entries[index];
    const std::string proc = "/proc/self/fd/" + std::to_string(dir.get());
    e.dest_dir = std::move(dir);
    e.dest_wd = static_cast<int>(
        check(::inotify_add_watch(m_inotify.get(), proc.c_str(), kDestEvents), e.option + ": inotify_add_watch"));
}

void LoginFiles::arm(Clock::time_point when)
{
    m_check_at = when;
    set_timer();
}

// The timer runs to the nearer of the rest's end and the next check. With neither it is left
// as it is: a late ring finds nothing to do.
void LoginFiles::set_timer()
{
    std::optional<Clock::time_point> next = m_check_at;
    if (m_resting && (!next || m_rest_until < *next))
        next = m_rest_until;
    if (next)
        ns::arm(m_timer.get(), std::max(0.0, std::chrono::duration<double>(*next - Clock::now()).count()));
}

void LoginFiles::on_events()
{
    alignas(inotify_event) char buf[16384];
    bool any = false;
    for (;;) {
        ssize_t n = ::read(m_inotify.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
            off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
            const std::string name = ev->len ? std::string(ev->name) : std::string();
            for (Entry& e : m_entries) {
                if (ev->mask & IN_Q_OVERFLOW) {
                    // Events were lost: look at everything.
                    e.dest_closed = e.src_changed = true;
                    e.changed_at = Clock::now();
                    any = true;
                } else if (ev->wd == e.dest_wd && name == e.dest_name) {
                    // A version is whole only once a close or a rename came
                    // after its last change: a write after a rename (an
                    // in-place rewrite that truncated DEST and has not yet
                    // written) takes the mark back.
                    if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO))
                        e.dest_closed = true;
                    else if (ev->mask & IN_MODIFY)
                        e.dest_closed = false;
                    e.dest_created |= (ev->mask & IN_CREATE) != 0;
                    e.changed_at = Clock::now();
                    any = true;  // any change (IN_MODIFY too) restarts the quiet period
                } else if (ev->wd == e.src_wd && name == e.src_name) {
                    e.src_changed = true;
                    any = true;
                }
            }
        }
    }
    // Rest: the events the agent makes meanwhile wait in the queue, merged.
    m_resting = true;
    m_rest_until = Clock::now() + kRest;
    if (any)
        arm();
    else
        set_timer();
}

void LoginFiles::on_timer()
{
    uint64_t expirations;
    if (::read(m_timer.get(), &expirations, sizeof expirations) < 0 && errno != EAGAIN)
        return;
    const Clock::time_point now = Clock::now();
    if (m_resting && now >= m_rest_until)
        m_resting = false;
    if (m_check_at && now >= *m_check_at) {
        m_check_at.reset();
        for (Entry& e : m_entries) {
            check_dest(e, false);
            check_source(e);
        }
    }
    set_timer();
}

void LoginFiles::stop_begins(bool command_killed)
{
    if (m_entries.empty() || m_stop_at)
        return;
    // Security: on the stop path, bounded (at most max_queued_events, read without blocking). What
    // was queued until now came before the stop; a writer it kills closes DEST after.
    on_events();
    m_stop_at = Clock::now() - (command_killed ? kQuiet : Clock::duration{});
}

void LoginFiles::finish(std::optional<Clock::time_point> killed_at)
{
    if (m_entries.empty())
        return;
    // A writer killed with the command closed DEST before PID 1's end was seen: a change read in
    // the quiet period before it is not saved (nor would the loop have saved it yet).
    if (killed_at && !m_stop_at)
        m_stop_at = *killed_at - kQuiet;
    on_events();
    // The writers are gone with the sandbox (their files were closed as they died, which marked
    // DEST closed), so a last version needs no quiet period, unless it changed after a stop began
    // (check_dest). The command started only once every DEST was watched: no change came before.
    for (Entry& e : m_entries)
        check_dest(e, true);
}

// Security: DEST is reached by name from the directory fd alone. lstat first
// (AT_SYMLINK_NOFOLLOW) so that a symlink, FIFO or device is never opened;
// then an open that cannot follow a link, block, or take a terminal, and a
// second check that the fd is the same regular file. The version is kept
// only if the file did not change while it was read.
LoginFiles::Read LoginFiles::read_dest(Entry& e, bool need_close, std::string& out)
{
    struct stat dir, before, opened;
    if (::fstat(e.dest_dir.get(), &dir) < 0)
        return Read::Missing;
    if (::fstatat(e.dest_dir.get(), e.dest_name.c_str(), &before, AT_SYMLINK_NOFOLLOW) < 0)
        return Read::Missing;
    if (std::string why = login_refusal(before, dir.st_dev); !why.empty()) {
        // One line for each thing put at DEST, however many events it made.
        std::string said = why + " " + std::to_string(before.st_ino);
        if (need_close && said != e.refused)
            m_warnings.say(kStep, e.option + ": DEST is " + why + ": refused, and " + kept(e.absent));
        e.refused = std::move(said);
        return Read::Refused;
    }
    e.refused.clear();
    if (need_close && !e.dest_closed)
        return Read::Wait;  // made, not yet written and closed
    UniqueFd fd(::openat(e.dest_dir.get(), e.dest_name.c_str(), kOpenLoginFile));
    if (!fd && errno == ENOENT)
        return Read::Missing;
    if (!fd && errno != ELOOP) {
        // Not retried: a mode that keeps cocoon out stays until the command changes it.
        if (need_close)
            m_warnings.say(failed(e.option, "can't open DEST", e.dest_path), kept(e.absent));
        return Read::Refused;
    }
    if (!fd)
        return Read::Unstable;  // a symlink swapped in after the lstat: look again
    if (::fstat(fd.get(), &opened) < 0 || !login_refusal(opened, dir.st_dev).empty() || opened.st_ino != before.st_ino)
        return Read::Unstable;  // swapped between the lstat and the open: look again
    // A version is taken only while no one has DEST open for writing: the
    // kernel refuses a read lease (EAGAIN) on such a file, which catches a
    // writer that truncated DEST and has not written yet (a program started
    // after its shell truncated the file, a writer under load). The lease is
    // held while DEST is read; a writer's open meanwhile breaks it, and the
    // read is then not a version. The break is signalled with SIGURG, whose
    // default action (the monitor keeps it) is to ignore it.
    bool leased = false;
    if (need_close) {
        if (::fcntl(fd.get(), F_SETSIG, SIGURG) == 0 && ::fcntl(fd.get(), F_SETLEASE, F_RDLCK) == 0)
            leased = true;
        else if (errno == EAGAIN)
            return Read::Busy;
        // Otherwise (leases off: fs.leases-enable=0) only the close and the
        // stable read below stand for it.
    }
    if (!read_stable(fd.get(), opened, out))
        return Read::Unstable;
    if (leased && ::fcntl(fd.get(), F_GETLEASE) != F_RDLCK)
        return Read::Unstable;  // a writer opened DEST while it was read
    return Read::Ok;
}

void LoginFiles::check_dest(Entry& e, bool final)
{
    // Security: the kernel closes the files of a writer a stop killed as it closes any writer's,
    // so a DEST a killed rewrite left cut short is whole to every check below; only when its
    // last change came tells it apart. A change read after the stop began is not saved (judged
    // once, at the end), and SRC keeps its last version.
    const bool after_stop = m_stop_at && e.changed_at >= *m_stop_at;
    if (!e.dest_dir || !(e.dest_closed || e.dest_created) || (after_stop && !final))
        return;
    std::string content;
    Read r = read_dest(e, true, content);
    if (r == Read::Unstable && !final) {
        arm();  // a writer is still at it
        return;
    }
    // Busy: a writer holds DEST open, and its close is the next event.
    if ((r == Read::Wait && !final) || r == Read::Busy)
        return;
    // A version differs from SRC's, or is the first of a --login-file-try without SRC.
    const bool changed = r == Read::Ok && (content != e.synced || e.absent);
    if (changed && after_stop) {
        m_warnings.say(kStep, e.option + ": DEST changed after the run was stopped, maybe cut short: not saved, and " +
                                  kept(e.absent));
    } else if (changed) {
        if (!final && Clock::now() < e.saved_at + kSaveGap) {
            arm(e.saved_at + kSaveGap);  // saved a moment ago: this version waits its turn
            return;
        }
        try {
            if (!save_to_source(e, content, final)) {
                arm();  // SRC's directory is locked: the version is saved at a later tick
                return;
            }
        } catch (const SysError& error) {
            m_warnings.say(error, kept(e.absent));
        }
        e.saved_at = Clock::now();
    }
    e.dest_closed = e.dest_created = false;
}

// The write-back: under a lock on SRC's directory (every cocoon saving there
// takes it), a temp file in that held directory with SRC's group and mode,
// fsync, rename over SRC's name, fsync the directory. SRC is always one whole
// version, whenever cocoon dies. Security: only the held directory fd and
// names in it are used, and the rename replaces whatever is at SRC's name (a
// link swapped in there is replaced, never followed); the temp file is the
// caller's, as SRC must be, and never set-id.
//
// Returns false, saving nothing, while someone else holds the lock. Security:
// the lock is never waited for: SRC's directory may be one the sandbox can
// open (a worktree), and an agent holding a lock on it must not stall the
// monitor's loop (signals, --kill-after, the relay). Other cocoons hold it
// for one write-back; at the end (final) it is tried for up to a second.
// Throws SysError for the step that failed; SRC is then untouched.
bool LoginFiles::save_to_source(Entry& e, const std::string& content, bool final)
{
    // --login-file-try: the first save makes SRC's missing directories (login_source.h).
    if (!e.src.dir) {
        make_source_dirs(e.src, e.option);
        try {
            watch_source(e);
        } catch (const SysError& error) {
            m_warnings.say(error, "SRC's renewals on the host do not reach DEST");
        }
    }
    const int dir = e.src.dir.get();
    // The lock is on a description of its own (the held directory, reopened), so it ends with it.
    UniqueFd lock(::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    for (int tries = 0; !lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) < 0; ++tries) {
        if (lock && errno == EWOULDBLOCK && !final)
            return false;
        if (lock && errno == EWOULDBLOCK && tries < 100) {
            ::usleep(10000);
            continue;
        }
        if (!lock || errno != EINTR)
            throw failed(e.option, "can't lock SRC's directory", e.src_dir_path);
    }
    // The host's user may have changed SRC's mode or group meanwhile; what
    // is at SRC's name counts only if it is still a file SRC may be.
    struct stat st;
    if (::fstatat(dir, e.src_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && source_refusal(st).empty()) {
        e.src_gid = st.st_gid;
        e.src_mode = st.st_mode & 0777;
    }
    static unsigned counter = 0;
    const std::string temp =
        "." + e.src_name + ".cocoon-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
    const std::string temp_path = e.src_dir_path + "/" + temp;
    // O_TMPFILE: the file has no name until it is whole; a named temp where
    // the filesystem has no O_TMPFILE.
    UniqueFd fd(::openat(dir, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600));
    bool named = false;
    if (!fd) {
        fd.reset(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
        named = fd.valid();
    }
    auto step = [&](bool done, const char* what) {
        if (done)
            return;
        SysError error = failed(e.option, what, fd ? temp_path : e.src_dir_path);
        if (named)
            ::unlinkat(dir, temp.c_str(), 0);
        throw error;
    };
    step(fd.valid(), "can't create a temp file in");
    keep_group(e, fd.get(), temp_path);
    step(sys::write_all(fd.get(), content), "can't write");
    step(::fchmod(fd.get(), e.src_mode) == 0, "can't give SRC's mode to");
    step(::fsync(fd.get()) == 0, "can't fsync");
    if (!named) {
        const std::string proc = "/proc/self/fd/" + std::to_string(fd.get());
        step(::linkat(AT_FDCWD, proc.c_str(), dir, temp.c_str(), AT_SYMLINK_FOLLOW) == 0, "can't link");
        named = true;
    }
    step(::renameat(dir, temp.c_str(), dir, e.src_name.c_str()) == 0, "can't rename over SRC");
    ::fsync(dir);
    e.synced = content;
    e.absent = false;
    return true;
}

// Gives the temp file SRC's group. A renewal is not lost for a group the
// caller is not in (an unprivileged caller's SRC of a group it left): it is
// saved with the caller's group, and that is said once.
void LoginFiles::keep_group(Entry& e, int fd, const std::string& path)
{
    struct stat mine;
    if (::fstat(fd, &mine) < 0 || mine.st_gid == e.src_gid || ::fchown(fd, static_cast<uid_t>(-1), e.src_gid) == 0 ||
        e.group_warned)
        return;
    const int err = errno;
    m_warnings.say(
        SysError(kStep, err, e.option + ": can't keep SRC's group " + std::to_string(e.src_gid) + " on", path),
        "saved with group " + std::to_string(mine.st_gid) + " and SRC's mode");
    e.group_warned = true;
}

// A renewal saved to SRC by someone else (another sandbox) reaches this
// sandbox if it has not changed its own copy since the last sync.
void LoginFiles::check_source(Entry& e)
{
    if (!e.src_changed || !e.dest_dir || !e.src.dir)
        return;
    e.src_changed = false;
    UniqueFd fd(::openat(e.src.dir.get(), e.src_name.c_str(), kOpenLoginFile));
    struct stat st;
    std::string content;
    if (!fd || ::fstat(fd.get(), &st) < 0 || !source_refusal(st).empty())
        return;
    if (!read_stable(fd.get(), st, content)) {
        e.src_changed = true;  // a writer on the host is at it
        arm();
        return;
    }
    if ((content == e.synced && !e.absent) || e.dest_closed || e.dest_created)
        return;  // ours, or the sandbox's own change is on its way to SRC
    // The sandbox changed (or removed) its copy: its version wins. A DEST still absent (a
    // --login-file-try without SRC at the start) takes SRC's first version.
    std::string current;
    const Read r = read_dest(e, false, current);
    if (e.absent ? r != Read::Missing : (r != Read::Ok || current != e.synced))
        return;
    replace_dest(e, content);
}

// Files this thread makes belong to uid and gid while it lives (setfsuid and
// setfsgid are per thread).
class FilesOwnedBy {
public:
    FilesOwnedBy(uid_t uid, gid_t gid)
        : m_uid(static_cast<uid_t>(::setfsuid(uid))), m_gid(static_cast<gid_t>(::setfsgid(gid)))
    {
    }
    FilesOwnedBy(const FilesOwnedBy&) = delete;
    FilesOwnedBy& operator=(const FilesOwnedBy&) = delete;
    ~FilesOwnedBy()
    {
        ::setfsgid(m_gid);
        ::setfsuid(m_uid);
    }

private:
    uid_t m_uid;
    gid_t m_gid;
};

// Security: the temp name is opened O_EXCL|O_NOFOLLOW in the directory fd: a
// link the sandbox planted there is refused, never written through.
void LoginFiles::replace_dest(Entry& e, const std::string& content)
{
    const int dir = e.dest_dir.get();
    const std::string temp = "." + e.dest_name + ".cocoon-in";
    const std::string temp_path = sys::split_parent(e.dest_path).first + "/" + temp;
    ::unlinkat(dir, temp.c_str(), 0);
    // The new DEST gets the old one's mode and owner (else 0600 and the
    // directory's owner), and is made as that owner: under --host-user the
    // command is another user than the monitor (root), whose ids the sandbox
    // does not map, so the kernel refuses the monitor a file of its own there
    // (EOVERFLOW), and the command could not read one anyway.
    struct stat st;
    mode_t mode = 0600;
    if (::fstatat(dir, e.dest_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        mode = st.st_mode & 0777;
    else if (::fstat(dir, &st) < 0)
        st.st_uid = ::geteuid(), st.st_gid = ::getegid();
    FilesOwnedBy owner(st.st_uid, st.st_gid);
    UniqueFd fd(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd || !sys::write_all(fd.get(), content) || ::fchmod(fd.get(), mode) < 0 ||
        ::renameat(dir, temp.c_str(), dir, e.dest_name.c_str()) < 0) {
        m_warnings.say(failed(e.option, "can't pass SRC's new version to DEST through", temp_path));
        ::unlinkat(dir, temp.c_str(), 0);
        return;
    }
    e.synced = content;
    e.absent = false;
}

UniqueFd seed_login_file(const LoginFile& file, const LoginSeed& seed)
{
    const std::string what = file.option();
    auto [parent, name] = sys::split_parent(file.dest);
    UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root)
        throw SysError(errno, what);
    UniqueFd dir = sys::openat2(root.get(), parent, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
    // Security: the monitor writes in this directory; it must be the tmpfs
    // made for DEST (or another tmpfs of the sandbox), never a host directory
    // bound over it.
    struct statfs fs;
    check(::fstatfs(dir.get(), &fs), what);
    if (fs.f_type != TMPFS_MAGIC)
        throw UsageError(what + ": DEST's directory is not a tmpfs (a later mount covers it)");
    // --login-file-try without SRC: DEST starts absent (nothing another option put there).
    struct stat st;
    if (seed.absent && ::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        throw SysError(EEXIST, what + ": DEST must start absent");
    if (seed.absent)
        return dir;
    UniqueFd out(::openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!out)
        throw SysError(errno, what + ": can't create DEST");
    if (!sys::write_all(out.get(), seed.content))
        throw SysError(errno, what + ": can't write DEST");
    check(::fchmod(out.get(), seed.mode), what + ": fchmod");
    return dir;
}

}  // namespace cocoon::ns
