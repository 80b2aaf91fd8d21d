// SRC for --login-file and --login-file-try (login_source.h): its directory opened once and held,
// SRC read there; for --login-file-try, the missing directories of SRC's path made from a held
// ancestor.
// Runs in: caller, monitor: the caller opens SRC's directory (or its ancestor) and reads SRC; the
//  monitor checks what it reads and makes the missing directories at the first save.
#include "ns/monitor/login_source.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

#include "base/sys.h"
#include "base/sys_error.h"
#include "ns/monitor/login_file.h"

namespace cocoon::ns {
namespace {

constexpr const char* kStep = "login sync";

std::string below(const std::string& dir, const std::string& name)
{
    return dir == "/" ? "/" + name : dir + "/" + name;
}

}  // namespace

std::string login_refusal(const struct stat& st, dev_t dir_dev)
{
    if (S_ISLNK(st.st_mode))
        return "a symbolic link";
    if (S_ISDIR(st.st_mode))
        return "a directory";
    if (S_ISFIFO(st.st_mode))
        return "a FIFO";
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        return "a device";
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if (st.st_nlink != 1)
        return "a file with " + std::to_string(st.st_nlink) + " hard links";
    if (static_cast<unsigned long long>(st.st_size) > kLoginFileMax)
        return "larger than 1 MiB";
    // Security: something mounted on DEST (a bind of another file) is not
    // the sandbox's copy.
    if (st.st_dev != dir_dev)
        return "another mount";
    return "";
}

// Security: a hard link (to a file of the caller's elsewhere on the filesystem) or another user's
// file at SRC's name would be read into the sandbox; its write-back replaces only the name.
std::string source_refusal(const struct stat& st)
{
    if (st.st_uid != ::geteuid())
        return "owned by uid " + std::to_string(st.st_uid) + ", not by the caller (uid " + std::to_string(::geteuid()) +
               ")";
    return login_refusal(st, st.st_dev);
}

SourceDir open_source_dir(const std::string& path, bool no_follow, bool may_be_missing, const std::string& option)
{
    SourceDir d;
    d.no_follow = no_follow;
    d.ancestor_path = path;
    // Security: under --no-follow-sources no component may be a symlink, so a link planted in a
    // directory the agent (or an earlier run) could write does not redirect SRC. A missing
    // directory's ancestors are opened the same way, from the nearest up: the first that exists
    // is held, and what is made below it is made in its fd (make_source_dirs).
    int err = 0;
    for (;;) {
        err = sys::try_openat2(AT_FDCWD, d.ancestor_path, O_RDONLY | O_DIRECTORY, no_follow ? RESOLVE_NO_SYMLINKS : 0,
                               0, d.ancestor);
        if (err != -ENOENT || !may_be_missing || d.ancestor_path == "/" || d.ancestor_path == ".")
            break;
        auto [parent, name] = sys::split_parent(d.ancestor_path);
        if (name == "..")
            throw UsageError(option + ": " + d.ancestor_path + " is missing, and a .. below it cannot be made");
        if (!name.empty() && name != ".")
            d.missing.insert(d.missing.begin(), name);
        d.ancestor_path = parent;
    }
    if (err == -ELOOP && no_follow)
        throw UsageError(option + ": a component of " + d.ancestor_path +
                         " is a symbolic link (refused by --no-follow-sources); pass the real path");
    if (err < 0)
        throw SysError(kStep, -err, option + ": can't open the directory", d.ancestor_path);
    // A link to nothing where the first missing directory goes: mkdir would not make its target.
    struct stat st;
    if (!d.missing.empty() && ::fstatat(d.ancestor.get(), d.missing[0].c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
        throw UsageError(option + ": " + below(d.ancestor_path, d.missing[0]) +
                         " is a symbolic link to a missing directory; pass the real path");
    // The write-back makes a temp file there and renames it over SRC; or the missing directories.
    if (::faccessat(d.ancestor.get(), ".", W_OK | X_OK, AT_EACCESS) < 0)
        throw SysError(errno, option + ": the directory " + d.ancestor_path + " must be writable");
    if (d.missing.empty())
        d.dir = std::move(d.ancestor);
    return d;
}

void make_source_dirs(SourceDir& d, const std::string& option)
{
    UniqueFd held;
    int parent = d.ancestor.get();
    std::string path = d.ancestor_path;
    for (const std::string& name : d.missing) {
        path = below(path, name);
        auto fail = [&](int err, const std::string& what) { return SysError(kStep, err, option + ": " + what, path); };
        const bool made = ::mkdirat(parent, name.c_str(), 0700) == 0;
        if (!made && errno != EEXIST)
            throw fail(errno, "can't make the directory");
        // Security: the directory is reached by name in its parent's fd, as the sandbox may write
        // the ancestor (a worktree) and put something there between the mkdir and the open: under
        // --no-follow-sources a link is refused (ENOTDIR), never followed.
        UniqueFd next(
            ::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (d.no_follow ? O_NOFOLLOW : 0)));
        if (!next)
            throw fail(errno, "can't open the directory");
        struct stat st;
        if (::fstat(next.get(), &st) < 0)
            throw fail(errno, "can't stat the directory");
        // Security: SRC is the caller's, and so is every directory made for it (one made by
        // another user, such as --host-user's agent, is refused).
        if (st.st_uid != ::geteuid())
            throw fail(EPERM, "a directory of uid " + std::to_string(st.st_uid) + ", not the caller's, is at");
        if (made) {
            ::fchmod(next.get(), 0700);  // whatever the umask
            ::fsync(parent);
        }
        held = std::move(next);
        parent = held.get();
    }
    d.dir = std::move(held);
    d.ancestor.reset();
    d.missing.clear();
}

SourceVersion read_source(const SourceDir& d, const std::string& name, const std::string& path, bool may_be_missing,
                          const std::string& option)
{
    // Security: SRC itself is never followed. A link at SRC (to ~/.ssh/authorized_keys, say)
    // would be read as the login file and every renewal saved over the file it names.
    UniqueFd src;
    if (d.dir)
        src.reset(::openat(d.dir.get(), name.c_str(), kOpenLoginFile));
    else
        errno = ENOENT;
    SourceVersion v;
    if (!src && errno == ENOENT && may_be_missing) {
        v.absent = true;
        v.gid = ::getegid();
        return v;
    }
    if (!src && errno == ELOOP)
        throw UsageError(option + ": " + path + " is a symbolic link; pass the real path of the file it names");
    if (!src)
        throw SysError(errno, option);
    struct stat st;
    check(::fstat(src.get(), &st), option);
    if (std::string why = source_refusal(st); !why.empty())
        throw UsageError(option + ": " + path + " is " + why);
    if (!sys::read_up_to(src.get(), kLoginFileMax + 1, v.content))
        throw SysError(errno, option);
    if (v.content.size() > kLoginFileMax)
        throw UsageError(option + ": " + path + " is larger than 1 MiB");
    v.gid = st.st_gid;
    v.mode = st.st_mode & 0777;
    return v;
}

void remove_stale_temps(int dir, const std::string& name)
{
    const std::string prefix = "." + name + ".cocoon-";
    for (const sys::DirEntry& entry : sys::list_dir(dir)) {
        if (entry.name.rfind(prefix, 0) != 0)
            continue;
        const long pid = std::strtol(entry.name.c_str() + prefix.size(), nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) < 0 && errno == ESRCH)
            ::unlinkat(dir, entry.name.c_str(), 0);
    }
}

}  // namespace cocoon::ns
