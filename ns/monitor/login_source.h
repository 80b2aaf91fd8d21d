// SRC on the host, for --login-file and --login-file-try: its directory opened once, before the
// sandbox exists, and held for the whole run, and SRC read there; what a login file may be. For
// --login-file-try SRC or its directory may be missing: then the directory's deepest existing
// ancestor is held instead, and the missing directories are made from it only when the first
// version of DEST is saved, so that a run that fails or saves nothing makes nothing.
// Runs in: caller, monitor: the caller opens SRC's directory (or its ancestor) and reads SRC; the
//  monitor checks what it reads and makes the missing directories at the first save.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::ns {

// A file (SRC or DEST) is opened without following a link, blocking, or taking a terminal.
constexpr int kOpenLoginFile = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;

// Why a file (as lstat saw it) is refused as a login file, or "" for a regular file with one
// link, of at most 1 MiB, on dir_dev (DEST: the device of its directory).
std::string login_refusal(const struct stat& st, dev_t dir_dev);
// Why the file at SRC is refused, or "": it must also be owned by the caller.
std::string source_refusal(const struct stat& st);

struct SourceDir {
    UniqueFd dir;  // SRC's directory (O_RDONLY: flock, fsync), once it exists
    UniqueFd ancestor;  // while it is missing: its deepest existing ancestor
    std::string ancestor_path;  // for messages
    std::vector<std::string> missing;  // the directories to make below `ancestor`, outermost first
    bool no_follow = false;  // --no-follow-sources: no component may be a symbolic link
};

// Opens the directory `path` (no_follow: without following a link in any component). With
// may_be_missing, a missing directory (ENOENT) is no error: its deepest existing ancestor is held,
// and the names below it are kept to be made. The directory held must be writable (the write-back
// makes a temp file there, or the missing directories). Makes nothing; throws UsageError or
// SysError starting with `option` ("--login-file SRC DEST").
SourceDir open_source_dir(const std::string& path, bool no_follow, bool may_be_missing, const std::string& option);

// Makes d.missing below d.ancestor, one at a time, mode 0700, each one reached by name in its
// parent's fd, never by a path (O_NOFOLLOW under no_follow); one that another process made
// meanwhile must be a directory of the caller's. Sets d.dir. Throws SysError (step "login sync")
// naming the directory that failed; those made before it stay, and a later call goes on from them.
void make_source_dirs(SourceDir& d, const std::string& option);

// SRC as the run starts.
struct SourceVersion {
    std::string content;
    mode_t mode = 0600;
    gid_t gid = 0;
    bool absent = false;  // --login-file-try: no SRC (its mode and group are then 0600 and the caller's)
};

// Reads SRC, `name` in d.dir (`path` as given, for messages), never following a link at it.
// may_be_missing: a missing SRC (or directory) is `absent`. Throws UsageError or SysError starting
// with `option` for anything else that is not a file login_refusal and source_refusal let pass.
SourceVersion read_source(const SourceDir& d, const std::string& name, const std::string& path, bool may_be_missing,
                          const std::string& option);

// A write-back killed between linkat and renameat leaves its temp file (".NAME.cocoon-PID-N")
// beside SRC; one whose cocoon is gone is removed.
void remove_stale_temps(int dir, const std::string& name);

}  // namespace cocoon::ns
