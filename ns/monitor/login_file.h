// --login-file SRC DEST: a host file copied into the sandbox, and every change
// made to the copy saved back to the host (--login-file-try: SRC may be missing). LoginFiles runs in the monitor
// (cocoon's own process, outside, with the caller's privilege); seed_login_file
// runs in the sandbox's first process, after pivot_root.
// Runs in: caller, monitor, setup: the caller opens SRC; set-up seeds DEST; the monitor writes
//  renewals back.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "ns/monitor/login_source.h"

namespace cocoon::ns {

// One --login-file, as given (DEST is a path in the new root).
struct LoginFile {
    std::string source;
    std::string dest;
    // --login-file-try: SRC (and its directories) may be missing; DEST then starts absent, and
    // its first version makes SRC (and the directories, 0700).
    bool may_be_missing = false;
    // "--login-file SRC DEST" (or "--login-file-try SRC DEST"), for messages.
    std::string option() const
    {
        return (may_be_missing ? "--login-file-try " : "--login-file ") + source + " " + dest;
    }
};

// The largest login file cocoon copies either way.
constexpr size_t kLoginFileMax = 1 << 20;

// What the first process writes at DEST.
struct LoginSeed {
    std::string content;
    mode_t mode = 0600;
    bool absent = false;  // --login-file-try with no SRC: nothing is written, DEST starts absent
};

// The monitor's side: the host directory of each SRC, opened before the
// sandbox exists; DEST's directory in the sandbox, as an fd the first process
// sends; one inotify fd watching both, and a timer for the quiet period.
class LoginFiles {
public:
    LoginFiles() = default;
    // Opens each SRC's directory (no_follow, --no-follow-sources: without
    // following a link in any component) and reads SRC, which must be a
    // regular file with one link, owned by the caller, and not a link.
    // Throws UsageError/SysError naming "--login-file SRC DEST" otherwise.
    // --login-file-try: a missing SRC, or SRC's directory, is no error
    // (login_source.h: the directories are made at the first save).
    LoginFiles(const std::vector<LoginFile>& files, std::string log_prefix, bool no_follow);

    std::vector<LoginSeed> seeds() const;
    // DEST's directory (an O_PATH fd of the sandbox's tmpfs) for file `index`.
    void add_sandbox_dir(size_t index, UniqueFd dir);

    // -1 while the events rest (they are read at most every 100 ms; on_timer ends the rest).
    int inotify_fd() const { return m_resting ? -1 : m_inotify.get(); }
    int timer_fd() const { return m_timer.get(); }
    void on_events();  // inotify_fd is readable
    void on_timer();  // timer_fd is readable: the rest or the quiet period is over
    // The run is being stopped: the monitor is about to send the sandbox a signal that may kill a
    // writer of DEST (a forwarded stop signal, --kill-after's or --die-with-parent's SIGKILL).
    // The changes made so far are read first; no change read after is saved. command_killed: a
    // signal the monitor did not send killed the command, a moment before the monitor learned it;
    // a change read in the quiet period before now is not saved either.
    void stop_begins(bool command_killed = false);
    // The sandbox is gone: save what changed, without waiting. killed_at: when PID 1's end was
    // seen, if a signal killed the command and no stop_begins came first (a signal the monitor
    // did not send): the stop began shortly before, and a change read in the quiet period before
    // killed_at is not saved.
    void finish(std::optional<std::chrono::steady_clock::time_point> killed_at = std::nullopt);
    // What failed is said there, never thrown: the sync must not end a run.
    const Warnings& warnings() const { return m_warnings; }

private:
    struct Entry;
    enum class Read { Ok, Missing, Wait, Busy, Unstable, Refused };
    void open_source(Entry& e, const LoginFile& file, bool no_follow);
    void watch_source(Entry& e);
    Read read_dest(Entry& e, bool need_close, std::string& out);
    void check_dest(Entry& e, bool final);
    void check_source(Entry& e);
    bool save_to_source(Entry& e, const std::string& content, bool final);
    void keep_group(Entry& e, int fd, const std::string& path);
    void replace_dest(Entry& e, const std::string& content);
    using Clock = std::chrono::steady_clock;
    // How long DEST (or SRC) must stay untouched after a writer closed or renamed
    // it before a version is taken: a writer that saves in several steps is done
    // by then, and a renewal reaches SRC well within a second.
    static constexpr auto kQuiet = std::chrono::milliseconds(150);
    void arm(Clock::time_point when = Clock::now() + kQuiet);  // a check at `when`
    void set_timer();

    struct Entry {
        std::string option;  // "--login-file SRC DEST", for messages
        std::string src_dir_path, dest_path;  // for messages
        SourceDir src;  // SRC's directory on the host (or, while it is missing, its ancestor)
        std::string src_name;
        gid_t src_gid = 0;
        mode_t src_mode = 0600;
        bool group_warned = false;  // SRC's group could not be kept: said once
        UniqueFd dest_dir;  // DEST's directory in the sandbox (O_PATH)
        std::string dest_name;
        int src_wd = -1, dest_wd = -1;
        std::string synced;  // the version SRC and DEST last agreed on
        bool absent = false;  // --login-file-try: SRC and DEST last agreed there is no version yet
        bool dest_closed = false;  // a close or a rename came after DEST's last change
        bool dest_created = false;  // something new is at DEST (a link, a FIFO, ...)
        bool src_changed = false;
        Clock::time_point changed_at{};  // when the monitor read DEST's last change, close or rename
        std::string refused;  // the last refusal said (reason and inode), said once
        std::chrono::steady_clock::time_point saved_at{};  // the last write-back (kSaveGap)
    };
    std::vector<Entry> m_entries;
    Warnings m_warnings;
    UniqueFd m_inotify;
    UniqueFd m_timer;
    std::optional<Clock::time_point> m_check_at;  // the next check of DEST and SRC
    std::optional<Clock::time_point> m_stop_at;  // the stop began: a change read since is not saved
    bool m_resting = false;  // events are not read until m_rest_until
    Clock::time_point m_rest_until{};
};

// In the sandbox's first process, after pivot_root: writes DEST (its
// directory must be a tmpfs) and returns an O_PATH fd of that directory.
UniqueFd seed_login_file(const LoginFile& file, const LoginSeed& seed);

}  // namespace cocoon::ns
