// The differential suite's probe: run as the command inside a bwrap or a cocoon sandbox (any uid,
// any capabilities), it prints what the sandbox looks like from inside, one "key value" line per
// fact, in a fixed order, without numbers that differ from run to run (mount ids, devices, host
// pids). Namespace links are printed raw; the test maps them to "host"/"new" (see harness.cc).
// Arguments: paths to stat, or "lock:PATH" to report the lock another process holds on PATH.
// Linked statically so that it runs in a sandbox that holds nothing but itself.
#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

std::string read_text(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        return std::string("(") + std::strerror(errno) + ")";
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> split(const std::string& text, char sep)
{
    std::vector<std::string> out;
    std::string item;
    std::istringstream in(text);
    while (std::getline(in, item, sep))
        out.push_back(item);
    return out;
}

// Runs of blanks become one space, and the ends are trimmed.
std::string squeeze(const std::string& s)
{
    std::string out;
    for (char c : s) {
        bool blank = c == ' ' || c == '\t' || c == '\n';
        if (blank && (out.empty() || out.back() == ' '))
            continue;
        out += blank ? ' ' : c;
    }
    if (!out.empty() && out.back() == ' ')
        out.pop_back();
    return out;
}

std::string link_of(const std::string& path)
{
    char buf[PATH_MAX];
    ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    return n < 0 ? std::string("(") + std::strerror(errno) + ")" : std::string(buf, static_cast<size_t>(n));
}

void ids()
{
    uid_t r, e, s;
    gid_t gr, ge, gs;
    getresuid(&r, &e, &s);
    getresgid(&gr, &ge, &gs);
    std::printf("uid %u %u %u\ngid %u %u %u\ngroups", r, e, s, gr, ge, gs);
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; ++i)
        std::printf(" %u", groups[i]);
    std::printf("\n");
    for (const char* map : {"uid_map", "gid_map"})
        for (const std::string& line : split(read_text(std::string("/proc/self/") + map), '\n'))
            std::printf("%s %s\n", map, squeeze(line).c_str());
    std::printf("setgroups %s\n", squeeze(read_text("/proc/self/setgroups")).c_str());
}

void status()
{
    static const char* const kFields[] = {"Umask",
                                          "SigBlk",
                                          "SigIgn",
                                          "CapInh",
                                          "CapPrm",
                                          "CapEff",
                                          "CapBnd",
                                          "CapAmb",
                                          "Seccomp",
                                          "Seccomp_filters",
                                          "Cpus_allowed_list",
                                          "NoNewPrivs"};
    std::vector<std::string> lines = split(read_text("/proc/self/status"), '\n');
    for (const char* field : kFields)
        for (const std::string& line : lines)
            if (line.rfind(std::string(field) + ":", 0) == 0)
                std::printf("status %s\n", squeeze(line).c_str());
    std::printf("dumpable %d\npdeathsig ", prctl(PR_GET_DUMPABLE));
    int sig = 0;
    prctl(PR_GET_PDEATHSIG, &sig);
    std::printf("%d\n", sig);
}

void namespaces()
{
    bool pid1_same = true;
    std::string pid1_error;
    for (const char* ns : {"cgroup", "ipc", "mnt", "net", "pid", "pid_for_children", "time", "user", "uts"}) {
        std::string mine = link_of(std::string("/proc/self/ns/") + ns);
        std::string pid1 = link_of(std::string("/proc/1/ns/") + ns);
        std::printf("ns %s %s\n", ns, mine.c_str());
        if (pid1[0] == '(')
            pid1_error = pid1;
        pid1_same = pid1_same && pid1 == mine;
    }
    std::printf("pid1-ns %s\n", !pid1_error.empty() ? ("unreadable " + pid1_error).c_str()
                                : pid1_same         ? "same"
                                                    : "other");
}

// Processes: who this is, who its parent and PID 1 are. Raw pids only where they are small
// (the test drops them when the PID namespace is the host's).
void processes()
{
    pid_t pid = getpid(), ppid = getppid();
    std::printf("pid %d\nppid %d\n", pid, ppid);
    std::printf("ppid-comm %s\n", squeeze(read_text("/proc/" + std::to_string(ppid) + "/comm")).c_str());
    std::printf("pid1-comm %s\n", squeeze(read_text("/proc/1/comm")).c_str());
    std::printf("session-leader %s\npgrp-leader %s\n", getsid(0) == pid ? "yes" : "no",
                getpgrp() == pid ? "yes" : "no");
    int count = 0;
    if (DIR* d = opendir("/proc")) {
        while (dirent* e = readdir(d))
            count += std::all_of(e->d_name, e->d_name + std::strlen(e->d_name), ::isdigit) ? 1 : 0;
        closedir(d);
    }
    std::printf("procs %d\n", count);
    std::printf("cgroup %s\n", squeeze(read_text("/proc/self/cgroup")).c_str());
}

// Mount table in order: mount point, root, type, source, per-mount and superblock options. Mount
// ids, device numbers and peer groups differ between any two runs and are left out.
void mounts()
{
    for (const std::string& line : split(read_text("/proc/self/mountinfo"), '\n')) {
        std::vector<std::string> f = split(line, ' ');
        auto dash = std::find(f.begin(), f.end(), "-");
        if (f.size() < 10 || dash == f.end() || dash + 3 >= f.end()) {
            std::printf("mount (unparsed) %s\n", line.c_str());
            continue;
        }
        std::printf("mount %s root=%s %s src=%s %s super=%s\n", f[4].c_str(), f[3].c_str(), dash[1].c_str(),
                    dash[2].c_str(), f[5].c_str(), dash[3].c_str());
    }
}

void net()
{
    std::vector<std::string> lines = split(read_text("/proc/self/net/dev"), '\n');
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (size_t i = 2; i < lines.size(); ++i) {
        std::string name = squeeze(lines[i].substr(0, lines[i].find(':')));
        ifreq req{};
        std::snprintf(req.ifr_name, sizeof req.ifr_name, "%s", name.c_str());
        bool up = sock >= 0 && ioctl(sock, SIOCGIFFLAGS, &req) == 0 && (req.ifr_flags & IFF_UP);
        std::printf("net %s %s\n", name.c_str(), up ? "up" : "down");
    }
    if (sock >= 0)
        close(sock);
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::printf("hostname %s\n", host);
}

// Whether the command may make a user namespace (--disable-userns, --assert-userns-disabled).
void userns()
{
    pid_t child = fork();
    if (child == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
    int st = 0;
    waitpid(child, &st, 0);
    int err = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    std::printf("unshare-user %s\n", err == 0 ? "ok" : std::strerror(err));
}

void fds()
{
    DIR* d = opendir("/proc/self/fd");
    if (!d) {
        std::printf("fds (%s)\n", std::strerror(errno));
        return;
    }
    std::vector<int> nums;
    while (dirent* e = readdir(d))
        if (e->d_name[0] != '.' && std::atoi(e->d_name) != dirfd(d))
            nums.push_back(std::atoi(e->d_name));
    closedir(d);
    std::sort(nums.begin(), nums.end());
    for (int fd : nums) {
        std::string target = link_of("/proc/self/fd/" + std::to_string(fd));
        size_t bracket = target.find(":[");
        if (bracket != std::string::npos && target.rfind("anon_inode", 0) != 0)
            target.resize(bracket);  // pipe:[N], socket:[N]: the inode differs between runs
        int flags = fcntl(fd, F_GETFD);
        std::printf("fd %d %s%s\n", fd, target.c_str(), flags >= 0 && (flags & FD_CLOEXEC) ? " cloexec" : "");
    }
}

void stat_path(const std::string& path)
{
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
        std::printf("stat %s (%s)\n", path.c_str(), std::strerror(errno));
        return;
    }
    const char* type = S_ISDIR(st.st_mode)   ? "dir"
                       : S_ISREG(st.st_mode) ? "file"
                       : S_ISLNK(st.st_mode) ? "link"
                                             : "other";
    std::printf("stat %s %s %04o %u:%u", path.c_str(), type, st.st_mode & 07777, st.st_uid, st.st_gid);
    if (S_ISLNK(st.st_mode))
        std::printf(" -> %s", link_of(path).c_str());
    if (S_ISREG(st.st_mode) && st.st_size < 200)
        std::printf(" data=\"%s\"", squeeze(read_text(path)).c_str());
    std::printf(" w=%s\n", access(path.c_str(), W_OK) == 0 ? "ok" : std::strerror(errno));
}

void lock(const std::string& path)
{
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
        fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (fd < 0 || fcntl(fd, F_GETLK, &fl) != 0) {
        std::printf("lock %s (%s)\n", path.c_str(), std::strerror(errno));
    } else {
        const char* type = fl.l_type == F_UNLCK ? "none" : fl.l_type == F_RDLCK ? "read" : "write";
        std::printf("lock %s %s\n", path.c_str(), type);
    }
    if (fd >= 0)
        close(fd);
}

}  // namespace

int main(int argc, char** argv)
{
    // First, before this process opens anything of its own.
    fds();
    std::printf("argv0 %s\n", argv[0]);
    char cwd[PATH_MAX];
    std::printf("cwd %s\n", getcwd(cwd, sizeof cwd) ? cwd : std::strerror(errno));
    std::vector<std::string> env(
        environ, environ + [] {
            size_t n = 0;
            while (environ[n])
                ++n;
            return n;
        }());
    std::sort(env.begin(), env.end());
    for (const std::string& var : env)
        std::printf("env %s\n", var.c_str());
    ids();
    status();
    namespaces();
    processes();
    net();
    userns();
    mounts();
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg.rfind("lock:", 0) == 0)
            lock(arg.substr(5));
        else
            stat_path(arg);
    }
    return 0;
}
