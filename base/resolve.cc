// openat2's path resolution done in userspace (base/resolve.h). Runs in whichever process of
// cocoon calls sys::try_openat2 where the kernel answers openat2 with ENOSYS: the monitor and the
// sandbox's setup processes, with the privilege they have there.
// Runs in: caller, setup: the caller resolves bind sources, login SRC and --relay sockets; set-up
//  resolves in the new root.
#include "base/resolve.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "base/sys.h"

namespace cocoon::sys {
namespace {

constexpr int kMaxLinks = 40;  // the kernel's MAXSYMLINKS
constexpr unsigned long long kScoped = RESOLVE_IN_ROOT | RESOLVE_BENEATH;
constexpr unsigned long long kEmulated = kScoped | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
constexpr unsigned long kNoSymFollow = 0x2000;  // ST_NOSYMFOLLOW (Linux 5.10); glibc 2.36 lacks it

// One resolution: where it started, the directories it entered below that (innermost last, each
// held open), and the path components still to resolve (the next one last).
class Walk {
public:
    Walk(int dirfd, unsigned long long resolve) : m_dirfd(dirfd), m_root(dirfd), m_resolve(resolve) {}

    // Queues path's components before those left. An absolute path starts again at the root.
    int push(const std::string& path)
    {
        if (path.empty())
            return -ENOENT;
        if (path[0] == '/') {
            // Security: an absolute path or link target never leaves the root: under
            // RESOLVE_IN_ROOT it starts again at dirfd, under RESOLVE_BENEATH it is refused.
            if (m_resolve & RESOLVE_BENEATH)
                return -EXDEV;
            m_dirs.clear();
            if (!(m_resolve & RESOLVE_IN_ROOT)) {
                m_owned_root.reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
                if (!m_owned_root)
                    return -errno;
            }
            m_root = m_resolve & RESOLVE_IN_ROOT ? m_dirfd : m_owned_root.get();
        }
        std::vector<std::string_view> parts = split_path(path);
        if (path.back() == '/')
            parts.emplace_back(kSlash);
        m_todo.insert(m_todo.end(), parts.rbegin(), parts.rend());
        return 0;
    }

    int run(int flags, mode_t mode, UniqueFd& out)
    {
        while (!m_todo.empty()) {
            const std::string name = std::move(m_todo.back());
            m_todo.pop_back();
            const bool last = m_todo.empty();
            // As openat2: O_CREAT is refused on a name with a trailing slash before it is looked up.
            if ((flags & O_CREAT) && m_todo.size() == 1 && m_todo.back() == kSlash && name != "." && name != "..")
                return -EISDIR;
            if (name == "." || name == ".." || name == kSlash) {
                if (int err = name == ".." ? up() : 0)
                    return err;
                if (last)
                    return open_last(".", flags, mode, out);
                continue;
            }
            if (last) {
                int err = open_last(name, flags, mode, out);
                if (err != kFollowed)
                    return err;
                continue;
            }
            // Security: O_NOFOLLOW: the kernel follows no link during the walk; each one is read
            // and its text resolved here, under the caller's rules.
            UniqueFd next(::openat(cur(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
            struct stat st;
            if (!next || ::fstat(next.get(), &st) < 0)
                return -errno;
            if (S_ISLNK(st.st_mode)) {
                if (int err = follow(next.get()))
                    return err;
            } else if (!S_ISDIR(st.st_mode)) {
                return -ENOTDIR;
            } else {
                m_dirs.push_back(std::move(next));
            }
        }
        return -ENOENT;  // not reached: push queued at least one component
    }

private:
    static constexpr int kFollowed = 1;  // open_last met a link to follow and queued its text
    // A trailing slash, queued after the name it ends: the name must be a directory (a link there is
    // followed), opened as "." of it. No component holds a slash, so it cannot be a name.
    static constexpr const char* kSlash = "/";

    int cur() const { return m_dirs.empty() ? m_root : m_dirs.back().get(); }

    int up()
    {
        // Security: ".." is lexical: back to the directory the walk came from, held open, so a
        // directory renamed meanwhile cannot lead the walk above the root (the kernel answers
        // EAGAIN there and walks again). At the root, RESOLVE_IN_ROOT stays there.
        if (!m_dirs.empty()) {
            m_dirs.pop_back();
            return 0;
        }
        if (m_resolve & RESOLVE_IN_ROOT)
            return 0;
        if (m_resolve & RESOLVE_BENEATH)
            return -EXDEV;
        // Unscoped: above the start, as the kernel goes.
        UniqueFd parent(::openat(m_root, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!parent)
            return -errno;
        m_owned_root = std::move(parent);
        m_root = m_owned_root.get();
        return 0;
    }

    // A symlink met on the way (link: an O_PATH fd of it): its text is queued, or -errno.
    int follow(int link)
    {
        if ((m_resolve & RESOLVE_NO_SYMLINKS) || ++m_links > kMaxLinks)
            return -ELOOP;
        struct statfs fs;
        if (::fstatfs(link, &fs) < 0)
            return -errno;
        // Security: a nosymfollow mount's links are not followed, as in the kernel.
        if (fs.f_flags & kNoSymFollow)
            return -ELOOP;
        char text[PATH_MAX];
        // A magic link the caller may not follow fails here with EACCES, as in the kernel.
        ssize_t n = ::readlinkat(link, "", text, sizeof text);
        if (n < 0)
            return -errno;
        if (n == sizeof text)
            return -ENAMETOOLONG;
        // Security: a /proc magic link (a process's fds, exe, cwd, root, namespaces) names an
        // object, and the kernel jumps to it, out of any root. Read as text it would only be
        // resolved as a path under the root, but openat2 refuses it under RESOLVE_NO_MAGICLINKS
        // (ELOOP) and in a scoped walk (EXDEV), and so does this. Its text is an absolute path or
        // "type:[inode]"; procfs's plain links (self, thread-self, mounts, net) hold relative names.
        if (fs.f_type == PROC_SUPER_MAGIC && (n == 0 || text[0] == '/' || std::memchr(text, ':', n)))
            return m_resolve & RESOLVE_NO_MAGICLINKS ? -ELOOP : -EXDEV;
        return push(std::string(text, static_cast<size_t>(n)));
    }

    // The final component, opened with the caller's flags: 0 with the fd in out, -errno, or
    // kFollowed when it was a link to follow (its text is queued).
    int open_last(const std::string& name, int flags, mode_t mode, UniqueFd& out)
    {
        // Security: O_NOFOLLOW here too: a file is opened or made in the directory the walk
        // reached, never where a link points (O_CREAT through a dangling link outside the root).
        UniqueFd fd(::openat(cur(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode));
        const int err = fd ? 0 : errno;
        const bool follows = !(flags & O_NOFOLLOW) && name != ".";
        // A link met here is opened only with O_PATH, refused with ELOOP (or ENOTDIR for
        // O_DIRECTORY) otherwise: those are the answers to look at when the caller follows links.
        if (follows && ((fd && (flags & O_PATH)) || err == ELOOP || err == ENOTDIR)) {
            UniqueFd link =
                fd ? std::move(fd) : UniqueFd(::openat(cur(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
            struct stat st;
            if (link && ::fstat(link.get(), &st) == 0 && S_ISLNK(st.st_mode)) {
                int followed = follow(link.get());
                return followed ? followed : kFollowed;
            }
            fd = err ? UniqueFd() : std::move(link);
        }
        if (!fd)
            return -err;
        out = std::move(fd);
        return 0;
    }

    const int m_dirfd;
    int m_root;  // m_dirfd; for an unscoped walk, "/" or a directory above dirfd
    UniqueFd m_owned_root;
    const unsigned long long m_resolve;
    std::vector<UniqueFd> m_dirs;
    std::vector<std::string> m_todo;
    int m_links = 0;
};

}  // namespace

int openat2_userspace(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode,
                      UniqueFd& out)
{
    // What openat2 refuses before it looks at the path.
    if ((resolve & kScoped) == kScoped || (mode && !(flags & O_CREAT) && (flags & O_TMPFILE) != O_TMPFILE))
        return -EINVAL;
    // Security: a flag not emulated here is refused, not ignored.
    if (resolve & ~kEmulated)
        return -ENOSYS;
    if (path.size() >= PATH_MAX)
        return -ENAMETOOLONG;
    if (resolve == 0) {
        UniqueFd fd(::openat(dirfd, path.c_str(), flags | O_CLOEXEC, mode));
        if (!fd)
            return -errno;
        out = std::move(fd);
        return 0;
    }
    Walk walk(dirfd, resolve);
    if (int err = walk.push(path))
        return err;
    return walk.run(flags, mode, out);  // out is set only on success
}

}  // namespace cocoon::sys
