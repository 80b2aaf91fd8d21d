// Thin system call wrappers.
// Runs in: caller, monitor, setup, pid1, pid2, worker: thin wrappers every process of cocoon calls.
#include "base/sys.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "base/resolve.h"
#include "base/sys_error.h"

namespace cocoon::sys {

int try_openat2(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode, UniqueFd& out)
{
    // Whether this process has no openat2. Process-wide on purpose: it is a fact about the process,
    // which does not change back (a seccomp filter stays for the life of the process and its
    // children, and no later one can allow what it refused), so after the first ENOSYS every call
    // goes straight to the userspace walk. Where openat2 works, this load is all it costs.
    static std::atomic<bool> no_openat2{false};
    if (!no_openat2.load(std::memory_order_relaxed)) {
        open_how how{.flags = static_cast<unsigned long long>(flags | O_CLOEXEC), .mode = mode, .resolve = resolve};
        for (;;) {
            long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
            if (fd >= 0) {
                out.reset(static_cast<int>(fd));
                return 0;
            }
            // openat2 with RESOLVE_IN_ROOT asks to retry when a rename raced the walk.
            if (errno != EAGAIN && errno != EINTR)
                break;
        }
        // ENOSYS from the call itself, not from a filesystem's open: a present openat2 answers a
        // size below the first struct's with EINVAL before it reads anything.
        const int err = errno;
        if (err != ENOSYS || ::syscall(SYS_openat2, -1, nullptr, nullptr, 0) >= 0 || errno != ENOSYS)
            return -err;
        no_openat2.store(true, std::memory_order_relaxed);
    }
    return openat2_userspace(dirfd, path, flags, resolve, mode, out);
}

UniqueFd openat2(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode,
                 const std::string& context)
{
    UniqueFd fd;
    if (int err = try_openat2(dirfd, path, flags, resolve, mode, fd); err < 0)
        throw SysError(-err, context.empty() ? "openat2(" + path + ")" : context);
    return fd;
}

UniqueFd check_fd(long fd, const std::string& context)
{
    return UniqueFd(static_cast<int>(check(fd, context)));
}

void pivot_root(const char* new_root, const char* put_old)
{
    check(::syscall(SYS_pivot_root, new_root, put_old), std::string("pivot_root(") + new_root + ")");
}

Cloned clone3(unsigned long long flags, int cgroup_fd)
{
    int pidfd = -1;
    clone_args args{};
    args.flags = flags | CLONE_PIDFD;
    if (cgroup_fd >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = static_cast<unsigned long long>(cgroup_fd);
    }
    args.pidfd = reinterpret_cast<unsigned long long>(&pidfd);
    // With CLONE_PARENT the kernel takes the caller's own exit signal and
    // refuses any other value than 0 here.
    args.exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD;
    pid_t pid = static_cast<pid_t>(check(::syscall(SYS_clone3, &args, sizeof args), "clone3"));
    return Cloned{pid, UniqueFd(pid == 0 ? -1 : pidfd)};  // the child holds no pidfd
}

void write_file(const std::string& path, const std::string& data, int dirfd)
{
    UniqueFd fd = sys::check_fd(::openat(dirfd, path.c_str(), O_WRONLY | O_CLOEXEC), "open(" + path + ")");
    ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0 || static_cast<size_t>(n) != data.size())
        throw SysError(n < 0 ? errno : EIO, "write(" + path + ")");
}

std::string read_to_end_and_close(int fd, size_t max_bytes, const std::string& context)
{
    // fcntl first: a closed fd must be reported, not closed (it may be reused
    // by then) nor read.
    if (::fcntl(fd, F_GETFD) < 0)
        throw SysError(errno, context);
    UniqueFd owned(fd);
    std::string data;
    // One byte past the bound tells a text of max_bytes from a longer one.
    if (!read_up_to(fd, max_bytes + 1, data))
        throw SysError(errno, context);
    if (data.size() > max_bytes)
        throw SysError(EFBIG, context);
    return data;
}

bool write_all(int fd, std::string_view data)
{
    for (size_t done = 0; done < data.size();) {
        ssize_t n = ::write(fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

bool read_up_to(int fd, size_t max, std::string& out)
{
    out.clear();
    char buf[16384];
    while (out.size() < max) {
        ssize_t n = ::read(fd, buf, std::min(sizeof buf, max - out.size()));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        if (n == 0)
            break;
        out.append(buf, static_cast<size_t>(n));
    }
    return true;
}

std::string read_small(int dirfd, const char* path, size_t max)
{
    std::string text;
    UniqueFd fd(::openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd || !read_up_to(fd.get(), max, text))
        text.clear();
    return text;
}

std::vector<DirEntry> list_dir(int dirfd)
{
    std::vector<DirEntry> out;
    // fdopendir owns the fd it is given: a copy, so dirfd stays the caller's.
    UniqueFd copy(::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* dir = copy ? ::fdopendir(copy.get()) : nullptr;
    if (!dir)
        return out;
    (void)copy.release();  // the DIR's now
    while (const dirent* e = ::readdir(dir))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
            out.push_back({e->d_name, e->d_type});
    ::closedir(dir);
    return out;
}

pid_t pidfd_pid(int pidfd)
{
    const std::string info = read_small(AT_FDCWD, ("/proc/self/fdinfo/" + std::to_string(pidfd)).c_str(), 4096);
    const size_t at = info.find("\nPid:");
    return at == std::string::npos ? -1 : static_cast<pid_t>(std::strtol(info.c_str() + at + 5, nullptr, 10));
}

std::vector<int> inheritable_fds()
{
    auto inheritable = [](int fd) {
        int flags = ::fcntl(fd, F_GETFD);
        return flags >= 0 && !(flags & FD_CLOEXEC);
    };
    std::vector<int> fds;
    UniqueFd dir(::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir) {
        rlimit limit{};
        const rlim_t end = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? std::min<rlim_t>(limit.rlim_cur, 65536) : 1024;
        for (int fd = 3; static_cast<rlim_t>(fd) < end; ++fd)
            if (inheritable(fd))
                fds.push_back(fd);
        return fds;
    }
    alignas(8) char buf[4096];
    for (long n; (n = ::syscall(SYS_getdents64, dir.get(), buf, sizeof buf)) > 0;)
        for (long at = 0; at < n;) {
            // glibc's dirent64 is the kernel's linux_dirent64, field for field.
            unsigned short reclen;
            std::memcpy(&reclen, buf + at + offsetof(dirent64, d_reclen), sizeof reclen);
            const char* name = buf + at + offsetof(dirent64, d_name);
            at += reclen;
            if (name[0] < '0' || name[0] > '9')
                continue;  // . and ..
            const int fd = static_cast<int>(std::strtol(name, nullptr, 10));
            if (fd > 2 && fd != dir.get() && inheritable(fd))
                fds.push_back(fd);
        }
    std::sort(fds.begin(), fds.end());
    return fds;
}

std::vector<std::string_view> split_path(std::string_view path)
{
    std::vector<std::string_view> parts;
    for (size_t i = 0; i < path.size();) {
        const size_t end = std::min(path.find('/', i), path.size());
        if (end > i)
            parts.push_back(path.substr(i, end - i));
        i = end + 1;
    }
    return parts;
}

std::pair<std::string, std::string> split_parent(const std::string& path)
{
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos)
        return {".", path};
    return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::vector<std::string> proc_stat_fields(const std::string& stat)
{
    std::vector<std::string> out;
    const size_t close = stat.rfind(')');
    if (close == std::string::npos)
        return out;
    size_t at = close + 1;
    while (at < stat.size() && stat[at] == ' ') {
        const size_t start = at + 1;
        at = stat.find_first_of(" \n", start);
        if (at == std::string::npos)
            at = stat.size();
        out.push_back(stat.substr(start, at - start));
    }
    return out;
}

CapSets own_caps()
{
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    CapSets caps;
    if (::syscall(SYS_capget, &header, data) == 0) {
        caps.effective = data[0].effective | (static_cast<uint64_t>(data[1].effective) << 32);
        caps.permitted = data[0].permitted | (static_cast<uint64_t>(data[1].permitted) << 32);
    }
    return caps;
}

bool under_seccomp_filter()
{
    const std::string status = read_small(AT_FDCWD, "/proc/self/status", size_t{64} << 10);
    const size_t at = status.find("\nSeccomp:");
    const size_t value = at == std::string::npos ? at : status.find_first_not_of(" \t", at + 9);
    return value != std::string::npos && status[value] == '2';
}

bool privileged_root(uid_t uid, uint64_t effective)
{
    return uid == 0 && ((effective >> CAP_SYS_ADMIN) & 1) != 0;
}

}  // namespace cocoon::sys
