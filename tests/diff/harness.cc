// Runs a row under one bwrap and normalises what it shows; see harness.h.
#include "tests/diff/harness.h"

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <tuple>

#include "tests/support/process.h"

namespace cocoon::test::diff {
namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to)
{
    for (size_t at = s.find(from); !from.empty() && at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    return s;
}

std::vector<std::string> split_lines(const std::string& text)
{
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        out.push_back(line);
    return out;
}

// The row's directory, the same for both runs: a directory, a file, a link, an empty directory.
void populate(const TempDir& dir)
{
    ::mkdir((dir / "dir").c_str(), 0755);
    write_file(dir / "dir/a", "alpha\n", 0644);
    write_file(dir / "file", "data\n", 0640);
    if (::symlink("dir", (dir / "link").c_str()) != 0)  // a row without its link compares nothing
        throw std::system_error(errno, std::generic_category(), "symlink " + (dir / "link"));
    ::mkdir((dir / "empty").c_str(), 0700);
    ::mkdir((dir / "work").c_str(), 0700);
    write_file(dir / "lock", "", 0644);
}

// A process that holds a user namespace A (the caller mapped to root), in it a user namespace B
// (root mapped to root) and in that a PID namespace, for --userns, --userns2 and --pidns. Killed at
// destruction.
class NsHolder {
public:
    NsHolder()
    {
        m_pid = ::fork();
        if (m_pid == 0) {
            // Nothing of the test's: a sleep that held its stdout would hold up ctest. --kill-child
            // takes the sleep down with the unshare that the destructor kills.
            int null = ::open("/dev/null", O_RDWR);
            for (int fd : {0, 1, 2})
                ::dup2(null, fd);
            ::close_range(3, ~0U, 0);
            ::execl("/usr/bin/unshare", "unshare", "--user", "--map-root-user", "/usr/bin/unshare", "--user",
                    "--map-root-user", "--pid", "--fork", "--kill-child", "sleep", "30", nullptr);
            _exit(127);
        }
        // Ready once the inner unshare's child has become the sleep: util-linux's unshare forks
        // first and its child writes uid_map, setgroups and gid_map before it execs. A holder
        // taken earlier made bwrap's setns fail with EPERM (no uid_map yet) or its SCM_CREDENTIALS
        // fail with EINVAL (uid_map written, gid_map not yet).
        const std::string children = "/proc/" + std::to_string(m_pid) + "/task/" + std::to_string(m_pid) + "/children";
        for (int i = 0; i < 1000; ++i) {
            std::ifstream in(children);
            std::string first, comm;
            if ((in >> first) && !first.empty()) {
                std::ifstream c("/proc/" + first + "/comm");
                if ((c >> comm) && comm == "sleep")
                    break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    ~NsHolder()
    {
        ::kill(m_pid, SIGKILL);
        ::waitpid(m_pid, nullptr, 0);
    }
    NsHolder(const NsHolder&) = delete;
    NsHolder& operator=(const NsHolder&) = delete;
    int open(const char* ns) const
    {
        return ::open(("/proc/" + std::to_string(m_pid) + "/ns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    }
    int open_user_parent() const
    {
        int child = open("user");
        int parent = ::ioctl(child, NS_GET_PARENT);
        ::close(child);
        return parent < 0 ? parent : ::fcntl(parent, F_SETFD, FD_CLOEXEC), parent;
    }
    static std::string link(const std::string& path)
    {
        char buf[256];
        ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
        return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
    }

private:
    pid_t m_pid;
};

int memfd_with(const std::string& data)
{
    int fd = ::memfd_create("cocoon-diff", MFD_CLOEXEC);
    if (fd < 0 || ::write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
        throw std::runtime_error("memfd_create/write failed");
    ::lseek(fd, 0, SEEK_SET);
    return fd;
}

std::string read_fd(int fd)
{
    std::string out;
    char buf[4096];
    ::lseek(fd, 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<size_t>(n));
    return out;
}

struct Captured {
    int code = -1;
    std::string out, err;
};

// Runs argv with cwd `cwd`, a fixed environment, stdin from /dev/null, and `fds` (source fd ->
// number) as the only other open fds.
Captured spawn(const std::vector<std::string>& argv, const std::string& cwd,
               const std::vector<std::pair<int, int>>& fds)
{
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC))
        throw std::runtime_error("pipe2 failed");
    pid_t pid = ::fork();
    if (pid == 0) {
        int null = ::open("/dev/null", O_RDONLY);
        ::dup2(null, 0);
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        // Every fd above 2 closes at exec but the row's, which move to their numbers in two steps
        // so that no source is overwritten before it is copied.
        ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        std::vector<int> high;
        for (const auto& [src, num] : fds)
            high.push_back(::fcntl(src, F_DUPFD_CLOEXEC, 200));
        for (size_t i = 0; i < fds.size(); ++i)
            ::dup2(high[i], fds[i].second);
        if (::chdir(cwd.c_str()) != 0)
            _exit(126);
        std::vector<char*> args;
        for (const std::string& a : argv)
            args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        char* env[] = {const_cast<char*>("PATH=/usr/bin:/bin"), const_cast<char*>("HOME=/nonexistent"),
                       const_cast<char*>("DIFF=1"), nullptr};
        ::execve(args[0], args.data(), env);
        _exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    Captured r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    pollfd p[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    bool timed_out = false;
    for (int open_fds = 2; open_fds > 0;) {
        auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        if (::poll(p, 2, static_cast<int>(left)) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; ++i) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t n = ::read(p[i].fd, buf, sizeof buf);
            if (n > 0) {
                (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
            } else {
                ::close(p[i].fd);
                p[i].fd = -1;
                --open_fds;
            }
        }
    }
    if (timed_out)
        ::kill(pid, SIGKILL);
    for (auto& f : p)
        if (f.fd >= 0)
            ::close(f.fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (timed_out)
        ADD_FAILURE() << "timed out after 15 s: " << argv[0];
    return r;
}

// The probe prints namespace links raw; whether each is the caller's is what compares.
std::string normalise_ns(const std::string& line)
{
    std::istringstream in(line);
    std::string key, name, link;
    in >> key >> name >> link;
    std::string mine = NsHolder::link("/proc/self/ns/" + name);
    if (link.empty() || link[0] == '(')
        return line;
    return "ns " + name + " " + (link == mine ? "host" : "new");
}

// The command line: the row's runner, bwrap, the base root unless the row has none, the row's options and command.
std::vector<std::string> command_line(const Row& row, const std::string& bwrap, const std::string& probe,
                                      const std::string& dir)
{
    std::vector<std::string> argv = row.runner;
    argv.push_back(bwrap);
    if (row.base)
        argv.insert(argv.end(), {"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib",
                                 "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
                                 "--ro-bind", probe, "/probe"});
    for (const std::string& a : row.options)
        argv.push_back(replace_all(replace_all(a, "{T}", dir), "{P}", probe));
    for (const std::string& a : row.command)
        argv.push_back(replace_all(a, "{T}", dir));
    return argv;
}

// The fd a row hands to bwrap, opened here; `holder` is made on first use.
int open_row_fd(const Fd& fd, const std::string& dir, std::optional<NsHolder>& holder)
{
    int src = -1;
    switch (fd.kind) {
    case Fd::Data:
        src = memfd_with(fd.text);
        break;
    case Fd::Output:
        src = memfd_with("");
        break;
    case Fd::Path:
        src = ::open(replace_all(fd.text, "{T}", dir).c_str(), O_PATH | O_CLOEXEC);
        break;
    case Fd::Userns:
    case Fd::UsernsParent:
    case Fd::Pidns:
        // A holder whose unshare failed (seen once in CI under load: its /proc entry was
        // gone) is made again, once.
        for (int again = 0; again < 2 && src < 0; ++again) {
            if (!holder || again > 0)
                holder.emplace();
            src = fd.kind == Fd::UsernsParent ? holder->open_user_parent()
                                              : holder->open(fd.kind == Fd::Userns ? "user" : "pid_for_children");
        }
        break;
    }
    if (src < 0)
        throw std::runtime_error("cannot make fd " + std::to_string(fd.num) + ": " + std::strerror(errno));
    return src;
}

// The fds of one run: the namespaces' holder, and the fds opened for the row, in its order.
struct RowFds {
    std::optional<NsHolder> holder;
    std::vector<int> owned;
};

// Runs the command line with the row's fds, which `fds` keeps open for the report.
Captured run_bwrap(const Row& row, const std::vector<std::string>& argv, const std::string& dir, RowFds& fds)
{
    Captured c;
    // Debian's bwrap 0.8.0 was seen once (under CI's ASan pass) failing its own setup with
    // "Creating newroot failed: Value too large for defined data type" (EOVERFLOW), a failure of
    // bwrap's, not of the row: that run is made once more, with fresh fds (data fds are consumed).
    for (int attempt = 0; attempt < 2; ++attempt) {
        for (int fd : fds.owned)
            ::close(fd);
        fds.owned.clear();
        std::vector<std::pair<int, int>> numbered;
        for (const Fd& fd : row.fds) {
            const int src = open_row_fd(fd, dir, fds.holder);
            fds.owned.push_back(src);
            numbered.emplace_back(src, fd.num);
        }
        c = spawn(argv, dir, numbered);
        if (c.err.find("Creating newroot failed: Value too large") == std::string::npos)
            break;
    }
    return c;
}

// bwrap 0.8.0 sometimes prints a setup error twice (from two of its processes), and the two
// writes may interleave ("bwrap: bwrap: MSG" then "MSG", "bwrap: " then "bwrap: MSG", or one line
// "bwrap: MSGMSG"):
// each message once, whole, with its prefix, is enough.
std::vector<std::string> error_lines(const std::string& err)
{
    std::vector<std::string> errs;
    std::set<std::string> seen;
    // A usage on stderr (no command): its first line, with the program's path as its name alone;
    // the option list after it is cocoon's, longer than bwrap's (docs/bwrap-differences.md).
    static const std::regex kUsage("^usage: (?:[^ ]*/)?(bwrap \\[OPTIONS\\.\\.\\.\\] .*)");
    if (std::smatch m; std::regex_search(err, m, kUsage))
        return {"usage: " + m[1].str()};
    for (const std::string& line : split_lines(err)) {
        const std::string prefix = "bwrap: ";
        std::string msg = line;
        while (msg.rfind(prefix, 0) == 0)
            msg.erase(0, prefix.size());
        // bwrap writes "bwrap: ", the message and the newline apart, from two processes at once for
        // some errors: the second's prefix may land at the end of the first's line ("bwrap:
        // MSGbwrap: "), and its message then stands alone on the next ("MSG").
        while (msg.size() >= prefix.size() && msg.compare(msg.size() - prefix.size(), prefix.size(), prefix) == 0)
            msg.resize(msg.size() - prefix.size());
        // The second write may also land on the first's line: "bwrap: MSGMSG".
        if (msg.size() % 2 == 0 && msg.compare(0, msg.size() / 2, msg, msg.size() / 2) == 0)
            msg.resize(msg.size() / 2);
        if (msg.empty() || !seen.insert(msg).second)
            continue;
        errs.push_back(line.rfind(prefix, 0) == 0 ? prefix + msg : msg);
    }
    return errs;
}

// A line of the probe's, with what differs between any two runs taken out.
std::string normalise_probe_line(std::string line)
{
    if (line.rfind("ns ", 0) == 0)
        line = normalise_ns(line);
    // Wherever the caller may make cgroups in its own (root; the unprivileged pass's delegated
    // cgroup), cocoon runs the command in cocoon-PID/command below it (docs/bwrap-differences.md,
    // row all_rows; tests/e2e/cgroup_test.cc checks it).
    if (line.rfind("cgroup ", 0) == 0)
        line = std::regex_replace(line, std::regex("(0::[^ ]*)/cocoon-[0-9]+(-[0-9]+)?(/command)?"), "$1");
    if (line.rfind("cgroup ", 0) == 0)
        line = std::regex_replace(line, std::regex("0::$"), "0::/");
    return line;
}

// What bwrap wrote to one of the row's output fds, its figures masked.
std::vector<std::string> output_fd_lines(int num, int fd)
{
    static const std::regex kVolatile("\"(child-pid|[a-z]+-namespace|wall-time-us|cpu-user-us|cpu-system-us|memory-"
                                      "peak-bytes|pids-peak|tmpfs-peak-bytes)\": ?[0-9]+");
    // "sampled", or "cgroup+sampled" where the caller's cgroup is delegated (usage_test checks which).
    static const std::regex kAccounting("\"accounting\": \"[a-z+]+\"");
    std::vector<std::string> out;
    for (const std::string& line : split_lines(read_fd(fd)))
        out.push_back(
            "fd" + std::to_string(num) + " " +
            std::regex_replace(std::regex_replace(line, kVolatile, "\"$1\": N"), kAccounting, "\"accounting\": \"A\""));
    return out;
}

}  // namespace

Report run_row(const Row& row, const std::string& bwrap, const std::string& probe)
{
    TempDir dir;
    populate(dir);
    const std::vector<std::string> argv = command_line(row, bwrap, probe, dir.path());
    RowFds fds;
    const Captured c = run_bwrap(row, argv, dir.path(), fds);

    Report report;
    for (const std::string& a : argv)
        report.argv += (report.argv.empty() ? "" : " ") + a;
    auto add = [&](const std::string& line) {
        report.lines.push_back(replace_all(replace_all(line, dir.path(), "{T}"), probe, "{P}"));
    };
    add("exit " + std::to_string(c.code));
    for (const std::string& line : error_lines(c.err))
        add("err " + line);
    bool own_pid_ns = false;
    for (const std::string& line : split_lines(c.out)) {
        const std::string normal = normalise_probe_line(line);
        own_pid_ns = own_pid_ns || normal == "ns pid new";
        add(normal);
    }
    // Host pids differ between any two runs; outside a new PID namespace only their comm compares.
    if (!own_pid_ns)
        std::erase_if(report.lines, [](const std::string& l) {
            return l.rfind("pid ", 0) == 0 || l.rfind("ppid ", 0) == 0 || l.rfind("procs ", 0) == 0;
        });
    for (size_t i = 0; i < row.fds.size(); ++i)
        if (row.fds[i].kind == Fd::Output)
            for (const std::string& line : output_fd_lines(row.fds[i].num, fds.owned[i]))
                add(line);
    for (const std::string& path : row.after) {
        struct stat st;
        std::string p = replace_all(path, "{T}", dir.path());
        add("after " + p + (::lstat(p.c_str(), &st) == 0 ? " exists" : " missing"));
    }
    for (int fd : fds.owned)
        ::close(fd);
    return report;
}

}  // namespace cocoon::test::diff
