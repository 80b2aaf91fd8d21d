// Thin wrappers for the system calls that glibc 2.36 lacks or that several
// modules share. Each throws SysError naming the call and its argument.
// Runs in: caller, monitor, setup, pid1, pid2, worker: thin wrappers every process of cocoon calls.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::sys {

// openat2(2). Returns the fd, or -errno when the call failed with an errno in
// `expected` style: callers that treat ENOENT as a value use try_openat2.
// openat2 throws SysError(errno, context), or naming the call and path where context is empty.
// Where the kernel answers ENOSYS (a seccomp policy, cocoon's own among them,
// that cannot read struct open_how; a kernel before 5.6), the same resolution
// is done in userspace with the same guarantees (base/resolve.h), and the
// process goes there directly from then on.
UniqueFd openat2(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode = 0,
                 const std::string& context = "");
int try_openat2(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode, UniqueFd& out);

// Owns fd, the new fd a call returned; throws SysError(errno, context) when the call failed (fd < 0).
UniqueFd check_fd(long fd, const std::string& context);

void pivot_root(const char* new_root, const char* put_old);

// clone3(2) with fork semantics (no new stack): pid 0 and no pidfd in the
// child; in the parent, the child's pid and a pidfd of it (CLONE_PIDFD). With
// a cgroup fd (>= 0), the child starts in that cgroup (CLONE_INTO_CGROUP).
struct Cloned {
    pid_t pid;
    UniqueFd pidfd;
};
Cloned clone3(unsigned long long flags, int cgroup_fd = -1);

// Writes all of data to path (opened O_WRONLY|O_CLOEXEC, relative to dirfd);
// for /proc files.
void write_file(const std::string& path, const std::string& data, int dirfd = AT_FDCWD);

// Reads fd to EOF, then closes it (the caller handed it over). Throws
// SysError(errno, context) when it cannot be read, and SysError(EFBIG) past
// max_bytes, so a caller that passes /dev/zero gets an error, not an OOM.
std::string read_to_end_and_close(int fd, size_t max_bytes, const std::string& context);

// Writes all of data to fd, again after EINTR and a short write. False (errno set) when a write
// fails or writes nothing: for reports and warnings, whose loss must not stop the sandbox.
bool write_all(int fd, std::string_view data);

// Reads fd until EOF or until `out` holds max bytes. False (errno set) when a read fails.
bool read_up_to(int fd, size_t max, std::string& out);

// The text of the file at path (relative to dirfd; a link at its last component is not followed),
// at most max bytes; empty when it cannot be opened or read. For /proc and cgroup files, which a
// process or cgroup that goes away meanwhile takes with it: missing, never an error.
std::string read_small(int dirfd, const char* path, size_t max);

// The entries of the directory open at dirfd but "." and "..", each with its d_type (DT_DIR,
// ...; DT_UNKNOWN where the filesystem does not say); empty when it cannot be read.
struct DirEntry {
    std::string name;
    unsigned char type;
};
std::vector<DirEntry> list_dir(int dirfd);

// The pid of the process a pidfd refers to, in this process's PID namespace (its fdinfo's "Pid:"
// line): 0 when it is in none this process sees, -1 once reaped or when fdinfo cannot be read.
pid_t pidfd_pid(int pidfd);

// The fds above 2 that are open without FD_CLOEXEC, ascending: what an exec would pass on. Listed
// from /proc/self/fd (read with getdents64 into a stack buffer: nothing allocated but the result);
// without a /proc, by F_GETFD on each number below RLIMIT_NOFILE's soft limit (at most 65,536).
std::vector<int> inheritable_fds();

// The components of a path, in order, without the empty ones that repeated, leading and trailing
// slashes make ("." and ".." are kept). Pure.
std::vector<std::string_view> split_path(std::string_view path);

// A path's directory and last component, split at its last slash: "/a/b" -> {"/a", "b"},
// "/a" -> {"/", "a"}, and a path without a slash -> {".", path}. Lexical, nothing looked up: a
// trailing slash leaves the name empty ("/a/" -> {"/a", ""}). Pure.
std::pair<std::string, std::string> split_parent(const std::string& path);

// The fields of a /proc/PID/stat text from field 3 (state) on: [0] is field 3. The comm field
// before them is the process's own choice (any bytes, parentheses too), so they are counted from
// the last ')'. Empty for a text without one. Pure.
std::vector<std::string> proc_stat_fields(const std::string& stat);

// This process's effective and permitted capability sets in its own user namespace (capget), bit N
// for capability N; every bit set where capget fails (no kernel cocoon runs on refuses it).
struct CapSets {
    uint64_t effective = ~uint64_t{0};
    uint64_t permitted = ~uint64_t{0};
};
CapSets own_caps();

// Whether a seccomp filter is in force on this process (/proc/self/status: "Seccomp:\t2"): one
// the caller runs under, as a container's runtime puts on it. False where it cannot be read.
bool under_seccomp_filter();

// Whether a root caller makes namespaces itself: uid 0 with CAP_SYS_ADMIN in its effective set.
// A root without it (a container's root) can make no namespace but a user namespace, so it gets
// one, as an unprivileged caller does (tools/cocoon/plan.cc; the relay worker's ids likewise).
bool privileged_root(uid_t uid, uint64_t effective);

}  // namespace cocoon::sys
