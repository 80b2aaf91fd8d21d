// Makes one named escape attempt from inside a sandbox and prints one line per system call it
// tried: "NAME ok" or "NAME E<errno name>", so tests/e2e/escape_test.cc asserts exact errors.
// Static (no loader, no libraries inside the sandbox); runs as the sandboxed command.
//
// usage: cocoon_escape_probe read PATH             open PATH for reading
//        cocoon_escape_probe write PATH...         open each PATH for writing (name: the path)
//        cocoon_escape_probe ro DIR FILE           write, create, remove, rename, mkdir in DIR
//        cocoon_escape_probe host-pid PID          /proc/PID, kill(PID, 0), kill(PID, SIGKILL)
//        cocoon_escape_probe pid1                  ptrace, /proc/1/{mem,exe,root} of PID 1
//        cocoon_escape_probe root                  where /proc/self/root/.. and /.. lead
//        cocoon_escape_probe tcp ADDR PORT         connect to ADDR:PORT (IPv4)
//        cocoon_escape_probe abstract NAME         connect to the abstract Unix socket NAME
//        cocoon_escape_probe netns                 the network and IPC namespaces: their inodes,
//                                                  whether their owner is our user namespace, lo up
//        cocoon_escape_probe mq NAME               open the POSIX message queue NAME
//        cocoon_escape_probe umount PATH           unmount PATH (plain, then lazily)
//        cocoon_escape_probe remount-rw PATH       remount the bind at PATH read-write
//        cocoon_escape_probe nested PATH RO        the same from a new user and mount namespace
//        cocoon_escape_probe mount PATH            mount a tmpfs on PATH
//        cocoon_escape_probe nested-mount DIR      makes DIR/ready, a tmpfs on DIR/sub in a new
//                                                  user and mount namespace, waits for DIR/go
//        cocoon_escape_probe mknod PATH            a character device (1,3: /dev/null's numbers)
//        cocoon_escape_probe fds                   the open fds, then fstat of fd 7
//        cocoon_escape_probe fill PATH             writes PATH until refused; prints KiB written
//        cocoon_escape_probe files DIR MOST        empty files in DIR until refused (MOST at most)
//        cocoon_escape_probe tree DIR DIRS FILES   DIRS directories of FILES 100-byte files each
//        cocoon_escape_probe forkbomb MOST         forks until refused (MOST at most); how many
//        cocoon_escape_probe setid FILE            chmod u+s, security.capability, chown FILE
//        cocoon_escape_probe overlay LOWER NAME WT copy LOWER/NAME up into WT through an overlay
#include <dirent.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <mqueue.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

const char* errno_name(int err)
{
    switch (err) {
    case EPERM:
        return "EPERM";
    case ENOENT:
        return "ENOENT";
    case ESRCH:
        return "ESRCH";
    case EBADF:
        return "EBADF";
    case EAGAIN:
        return "EAGAIN";
    case EACCES:
        return "EACCES";
    case EBUSY:
        return "EBUSY";
    case EEXIST:
        return "EEXIST";
    case EXDEV:
        return "EXDEV";
    case ENOTDIR:
        return "ENOTDIR";
    case EINVAL:
        return "EINVAL";
    case ENOSPC:
        return "ENOSPC";
    case EROFS:
        return "EROFS";
    case ENOSYS:
        return "ENOSYS";
    case EOPNOTSUPP:
        return "EOPNOTSUPP";
    case EFBIG:
        return "EFBIG";
    case EDQUOT:
        return "EDQUOT";
    case ENETUNREACH:
        return "ENETUNREACH";
    case ECONNREFUSED:
        return "ECONNREFUSED";
    case ETIMEDOUT:
        return "ETIMEDOUT";
    case EHOSTUNREACH:
        return "EHOSTUNREACH";
    case ENODEV:
        return "ENODEV";
    case EOVERFLOW:
        return "EOVERFLOW";
    default:
        return "E?";
    }
}

void report(const std::string& name, long rc)
{
    if (rc < 0)
        std::printf("%s %s\n", name.c_str(), errno_name(errno));
    else
        std::printf("%s ok\n", name.c_str());
}

// open() that closes what it opened: only the outcome matters.
void try_open(const std::string& name, const std::string& path, int flags, mode_t mode = 0644)
{
    int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    report(name, fd);
    if (fd >= 0)
        ::close(fd);
}

void connect_to(const std::string& name, const sockaddr* addr, socklen_t len, int family)
{
    int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        report(name + "_socket", -1);
        return;
    }
    report(name, ::connect(fd, addr, len));
    ::close(fd);
}

// "same" when a and b are one directory (device and inode), else "different".
const char* same_dir(const char* a, const char* b)
{
    struct stat sa {};
    struct stat sb {};
    if (::stat(a, &sa) < 0 || ::stat(b, &sb) < 0)
        return errno_name(errno);
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino ? "same" : "different";
}

// A user and mount namespace of the command's own: every capability over them, none over the
// sandbox's mounts, which the kernel locked together when they were copied into it.
// No uid map is written there: mapping the sandbox's uid 0 (a root caller's) would take
// CAP_SETFCAP in the sandbox, which --cap-drop ALL took away; the mount calls need none.
bool nested()
{
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0)
        return true;
    report("nested_unshare", -1);
    return false;
}

// A child makes a tmpfs on DIR/sub where only its nested namespace sees it; then the probe says
// so through DIR/ready (DIR is the host's worktree; the child cannot make files there: its uid
// is not mapped) and keeps the mount until the test has looked and made DIR/go. DIR/sub/host,
// which the test made, is hidden by the tmpfs in the child: the mount took.
int nested_mount(const std::string& dir)
{
    const std::string sub = dir + "/sub";
    int mounted[2];
    int release[2];
    if (::pipe2(mounted, O_CLOEXEC) < 0 || ::pipe2(release, O_CLOEXEC) < 0)
        return 1;
    pid_t child = ::fork();
    if (child == 0) {
        if (nested()) {
            report("nested_mount", ::mount("tmpfs", sub.c_str(), "tmpfs", 0, nullptr));
            report("nested_sees_host_file", ::access((sub + "/host").c_str(), F_OK));
        }
        std::fflush(stdout);
        char c = 0;
        if (::write(mounted[1], &c, 1) != 1 || ::read(release[0], &c, 1) != 1)
            ::_exit(1);
        ::_exit(0);
    }
    char c = 0;
    if (child < 0 || ::read(mounted[0], &c, 1) != 1)
        return 1;
    try_open("ready", dir + "/ready", O_CREAT | O_WRONLY);
    for (int i = 0; i < 1000 && ::access((dir + "/go").c_str(), F_OK) < 0; ++i)
        ::usleep(10000);
    report("go", ::access((dir + "/go").c_str(), F_OK));
    int status = 0;
    if (::write(release[1], &c, 1) != 1 || ::waitpid(child, &status, 0) != child)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int fds()
{
    DIR* d = ::opendir("/proc/self/fd");
    if (!d) {
        report("fds", -1);
        return 0;
    }
    std::vector<int> open;
    while (dirent* e = ::readdir(d))
        if (e->d_name[0] != '.' && std::atoi(e->d_name) != ::dirfd(d))
            open.push_back(std::atoi(e->d_name));
    ::closedir(d);
    std::sort(open.begin(), open.end());
    std::printf("fds");
    for (int fd : open)
        std::printf(" %d", fd);
    std::printf("\n");
    struct stat st {};
    report("fstat_7", ::fstat(7, &st));
    return 0;
}

int fill(const std::string& path)
{
    int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        report("fill_open", -1);
        return 0;
    }
    static char block[65536];
    std::memset(block, 'x', sizeof block);
    long long written = 0;
    ssize_t n = 0;
    // Bounded, in case nothing bounds the file: 1 GiB.
    while (written < (1LL << 30) && (n = ::write(fd, block, sizeof block)) > 0)
        written += n;
    std::printf("fill %s after %lld KiB\n", n < 0 ? errno_name(errno) : "unbounded", written / 1024);
    ::close(fd);
    return 0;
}

// Empty files DIR/0, DIR/1, ... until one is refused or `most` are made: "files ERR after N" or
// "files unbounded after N".
int files(const std::string& dir, long most)
{
    long made = 0;
    int fd = -1;
    while (made < most && (fd = ::open((dir + "/" + std::to_string(made)).c_str(),
                                       O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644)) >= 0) {
        ::close(fd);
        ++made;
    }
    std::printf("files %s after %ld\n", fd < 0 ? errno_name(errno) : "unbounded", made);
    return 0;
}

// What an agent's tree looks like to a filesystem: `dirs` directories of `per_dir` files of 100
// bytes. Prints "tree ok N" (N: inodes made), or "tree ERR after N".
int tree(const std::string& root, long dirs, long per_dir)
{
    const std::string line(100, 'x');
    long made = 0;
    for (long d = 0; d < dirs; ++d) {
        const std::string dir = root + "/d" + std::to_string(d);
        if (::mkdir(dir.c_str(), 0755) < 0)
            return std::printf("tree %s after %ld\n", errno_name(errno), made), 0;
        ++made;
        for (long f = 0; f < per_dir; ++f) {
            int fd = ::open((dir + "/f" + std::to_string(f)).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
                return std::printf("tree %s after %ld\n", errno_name(errno), made), 0;
            ::close(fd);
            ++made;
        }
    }
    std::printf("tree ok %ld\n", made);
    return 0;
}

// Forks until refused or `most` children, each waiting to be killed; prints how many, and the
// error ("unbounded" if none came).
int forkbomb(long most)
{
    // A process group of its own first: the kill(0) below must reach the children only.
    ::setpgid(0, 0);
    long made = 0;
    int err = 0;
    for (; made < most; ++made) {
        pid_t pid = ::fork();
        if (pid < 0) {
            err = errno;
            break;
        }
        if (pid == 0) {
            ::pause();
            ::_exit(0);
        }
    }
    std::printf("forked %ld then %s\n", made, err != 0 ? errno_name(err) : "unbounded");
    std::fflush(stdout);
    ::kill(0, SIGKILL);
    return 0;
}

// The ways a command that runs as the caller's uid could leave a file that grants more than that
// uid to whoever runs it later on the host.
int setid(const std::string& file)
{
    report("chmod_suid", ::chmod(file.c_str(), 04755));
    // A version 2 security.capability value granting CAP_SETUID (bit 7), permitted and effective.
    const uint32_t cap[5] = {0x02000001, 1U << 7, 0, 0, 0};
    report("setxattr_capability", ::setxattr(file.c_str(), "security.capability", cap, sizeof cap, 0));
    report("chown_other", ::chown(file.c_str(), 12345, 12345));
    return 0;
}

// Writes "0 ID 1" to /proc/self/FILE (uid_map or gid_map) in a new user namespace.
long write_map(const char* file, unsigned id)
{
    const std::string line = "0 " + std::to_string(id) + " 1";
    const int fd = ::open((std::string("/proc/self/") + file).c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    const long n = ::write(fd, line.data(), line.size());
    const int err = errno;
    ::close(fd);
    errno = err;
    return n < 0 ? -1 : 0;
}

// An overlay whose lower layer is LOWER (holding NAME, a setuid-root program of the host) and
// whose upper layer is in the worktree WT: touching NAME in it makes the kernel copy it up, mode
// and all, and no filter sees a copy-up. Mounted where the command can mount: in a user and mount
// namespace of its own, its uid mapped to 0 there (the kernel refuses to map uid 0 without
// CAP_SETFCAP in the sandbox).
int overlay(const std::string& lower, const std::string& name, const std::string& wt)
{
    const std::string upper = wt + "/upper", work = wt + "/work", merged = "/tmp/merged";
    report("mkdir",
           ::mkdir(upper.c_str(), 0755) == 0 && ::mkdir(work.c_str(), 0755) == 0 ? ::mkdir(merged.c_str(), 0755) : -1);
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
        report("unshare", -1);
        return 0;
    }
    report("uid_map", write_map("uid_map", uid));
    const int setgroups = ::open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    if (setgroups >= 0) {
        if (::write(setgroups, "deny", 4) != 4)
            report("setgroups", -1);
        ::close(setgroups);
    }
    report("gid_map", write_map("gid_map", gid));
    const std::string options = "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work;
    report("mount_overlay", ::mount("overlay", merged.c_str(), "overlay", 0, options.c_str()));
    report("copy_up", ::utimensat(AT_FDCWD, (merged + "/" + name).c_str(), nullptr, 0));
    return 0;
}

// An attempt's arguments: the first two, or "" where fewer were given.
struct Args {
    Args(char** given, int n) : arg(given), count(n), a0(n > 0 ? given[0] : ""), a1(n > 1 ? given[1] : "") {}
    char** arg;
    int count;
    std::string a0, a1;
};

// Writes and mounts on the sandbox's file system. Each family below returns the probe's exit code,
// or nothing when `what` (with this many arguments) is not one of its attempts.
std::optional<int> file_attempt(const std::string& what, const Args& args)
{
    const std::string& a0 = args.a0;
    const std::string& a1 = args.a1;
    const int count = args.count;
    if (what == "read" && count == 1) {
        try_open("read", a0, O_RDONLY);
    } else if (what == "write" && count >= 1) {
        for (int i = 0; i < count; ++i)
            try_open(args.arg[i], args.arg[i], O_WRONLY);
    } else if (what == "ro" && count == 2) {
        const std::string file = a0 + "/" + a1;
        try_open("open_wronly", file, O_WRONLY);
        try_open("open_trunc", file, O_WRONLY | O_TRUNC);
        try_open("creat", a0 + "/new", O_CREAT | O_WRONLY | O_TRUNC);
        report("unlink", ::unlink(file.c_str()));
        report("rename", ::rename(file.c_str(), (a0 + "/renamed").c_str()));
        report("mkdir", ::mkdir((a0 + "/dir").c_str(), 0755));
        report("chmod", ::chmod(file.c_str(), 0777));
    } else if (what == "umount" && count == 1) {
        report("umount", ::umount2(a0.c_str(), 0));
        report("umount_detach", ::umount2(a0.c_str(), MNT_DETACH));
    } else if (what == "remount-rw" && count == 1) {
        report("remount_rw", ::mount(nullptr, a0.c_str(), nullptr, MS_REMOUNT | MS_BIND, nullptr));
    } else if (what == "nested" && count == 2) {
        if (!nested())
            return 0;
        report("nested_umount", ::umount2(a0.c_str(), 0));
        report("nested_umount_detach", ::umount2(a0.c_str(), MNT_DETACH));
        report("nested_remount_rw", ::mount(nullptr, a1.c_str(), nullptr, MS_REMOUNT | MS_BIND, nullptr));
    } else if (what == "mount" && count == 1) {
        report("mount", ::mount("tmpfs", a0.c_str(), "tmpfs", 0, nullptr));
    } else if (what == "nested-mount" && count == 1) {
        return nested_mount(a0);
    } else if (what == "mknod" && count == 1) {
        report("mknod_char", ::mknod(a0.c_str(), S_IFCHR | 0666, makedev(1, 3)));
    } else {
        return std::nullopt;
    }
    return 0;
}

// Reaching other processes, and leaving the sandbox's root.
std::optional<int> process_attempt(const std::string& what, const Args& args)
{
    if (what == "host-pid" && args.count == 1) {
        const pid_t pid = static_cast<pid_t>(std::atoi(args.a0.c_str()));
        struct stat st {};
        report("proc_entry", ::stat(("/proc/" + args.a0).c_str(), &st));
        report("kill_0", ::kill(pid, 0));
        report("kill_SIGKILL", ::kill(pid, SIGKILL));
    } else if (what == "pid1" && args.count == 0) {
        report("ptrace_attach", ::ptrace(PTRACE_ATTACH, 1, nullptr, nullptr));
        report("ptrace_seize", ::ptrace(PTRACE_SEIZE, 1, nullptr, nullptr));
        try_open("mem_read", "/proc/1/mem", O_RDONLY);
        try_open("exe_write", "/proc/1/exe", O_WRONLY);
        char buf[256];
        report("exe_readlink", ::readlink("/proc/1/exe", buf, sizeof buf));
        report("root_readlink", ::readlink("/proc/1/root", buf, sizeof buf));
        try_open("root_dotdot", "/proc/1/root/..", O_RDONLY | O_DIRECTORY);
    } else if (what == "root" && args.count == 0) {
        char buf[256] = {};
        report("self_root_readlink", ::readlink("/proc/self/root", buf, sizeof buf - 1));
        std::printf("self_root %s\n", buf);
        std::printf("self_root_dotdot %s\n", same_dir("/proc/self/root/..", "/"));
        std::printf("self_root_dotdot_dotdot %s\n", same_dir("/proc/self/root/../..", "/"));
        std::printf("dotdot %s\n", same_dir("/..", "/"));
        // chdir("/..") then a relative "..": the classic way out of a chroot, which pivot_root
        // plus the old root detached leaves nowhere to lead.
        report("chdir_up", ::chdir("/../../.."));
        std::printf("cwd_after_up %s\n", same_dir(".", "/"));
    } else {
        return std::nullopt;
    }
    return 0;
}

// "KIND INODE", "KIND_owner own|other|EXXX" for the namespace of /proc/self/ns/NS.
void print_namespace(const char* kind, const char* path, const struct stat& user)
{
    struct stat st {};
    if (::stat(path, &st) != 0) {
        std::printf("%s %s\n", kind, errno_name(errno));
        return;
    }
    std::printf("%s %llu\n", kind, static_cast<unsigned long long>(st.st_ino));
    const int ns = ::open(path, O_RDONLY | O_CLOEXEC);
    const int owner = ns < 0 ? -1 : ::ioctl(ns, NS_GET_USERNS);
    struct stat owner_st {};
    if (owner < 0 || ::fstat(owner, &owner_st) != 0)
        std::printf("%s_owner %s\n", kind, errno_name(errno));
    else
        std::printf("%s_owner %s\n", kind, owner_st.st_ino == user.st_ino ? "own" : "other");
}

// "netns INODE", "netns_owner own|other|EXXX", "ipcns ..." and "ipcns_owner ..." alike,
// "lo up|down|EXXX".
int netns()
{
    struct stat user {};
    if (::stat("/proc/self/ns/user", &user) != 0)
        return 1;
    print_namespace("netns", "/proc/self/ns/net", user);
    print_namespace("ipcns", "/proc/self/ns/ipc", user);
    const int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq req{};
    std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
    if (sock < 0 || ::ioctl(sock, SIOCGIFFLAGS, &req) != 0)
        std::printf("lo %s\n", errno_name(errno));
    else
        std::printf("lo %s\n", (req.ifr_flags & IFF_UP) ? "up" : "down");
    return 0;
}

// Connections out of the sandbox's network.
std::optional<int> network_attempt(const std::string& what, const Args& args)
{
    if (what == "tcp" && args.count == 2) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(static_cast<uint16_t>(std::atoi(args.a1.c_str())));
        if (::inet_pton(AF_INET, args.a0.c_str(), &in.sin_addr) != 1)
            return 2;
        connect_to("connect_tcp", reinterpret_cast<sockaddr*>(&in), sizeof in, AF_INET);
        return 0;
    }
    if (what == "abstract" && args.count == 1) {
        sockaddr_un un{};
        un.sun_family = AF_UNIX;
        const size_t n = std::min(args.a0.size(), sizeof un.sun_path - 1);
        std::memcpy(un.sun_path + 1, args.a0.data(), n);
        connect_to("connect_abstract", reinterpret_cast<sockaddr*>(&un),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n), AF_UNIX);
        return 0;
    }
    if (what == "netns" && args.count == 0)
        return netns();
    if (what == "mq" && args.count == 1) {
        const mqd_t q = ::mq_open(args.a0.c_str(), O_RDONLY);
        std::printf("mq %s\n", q == static_cast<mqd_t>(-1) ? errno_name(errno) : "ok");
        return 0;
    }
    return std::nullopt;
}

// The limits on fds, disk, processes, and what may be planted for later.
std::optional<int> limit_attempt(const std::string& what, const Args& args)
{
    const int count = args.count;
    if (what == "fds" && count == 0)
        return fds();
    if (what == "fill" && count == 1)
        return fill(args.a0);
    if (what == "files" && count == 2)
        return files(args.a0, std::atol(args.a1.c_str()));
    if (what == "tree" && count == 3)
        return tree(args.a0, std::atol(args.a1.c_str()), std::atol(args.arg[2]));
    if (what == "forkbomb" && count == 1)
        return forkbomb(std::atol(args.a0.c_str()));
    if (what == "setid" && count == 1)
        return setid(args.a0);
    if (what == "overlay" && count == 3)
        return overlay(args.a0, args.a1, args.arg[2]);
    return std::nullopt;
}

int attempt(const std::string& what, char** arg, int count)
{
    const Args args(arg, count);
    for (auto family : {file_attempt, process_attempt, network_attempt, limit_attempt})
        if (const std::optional<int> code = family(what, args))
            return *code;
    return 2;
}

}  // namespace

int main(int argc, char** argv)
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (argc >= 2 && attempt(argv[1], argv + 2, argc - 2) == 0)
        return 0;
    std::fprintf(stderr, "usage: %s ATTEMPT [ARG...] (see the comment at the top of escape_probe.cc)\n", argv[0]);
    return 2;
}
