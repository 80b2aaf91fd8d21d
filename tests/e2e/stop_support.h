// Support for the stop-signal e2e tests: cocoon started in the background (its pid, wait status and
// --json-status-fd report) and /proc scans that find a sandbox's processes. Runs in the test process.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"

namespace cocoon::test {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

inline void sleep_ms(int ms)
{
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Polls `done` every step_ms until it holds (true) or timeout_ms have passed (false).
inline bool wait_until(const std::function<bool()>& done, int timeout_ms, int step_ms = 20)
{
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        if (done())
            return true;
        if (Clock::now() >= deadline)
            return false;
        sleep_ms(step_ms);
    }
}

// What /proc/PID/stat says about a process; pids are the test's (the host's) view.
struct ProcStat {
    char state = '?';
    pid_t ppid = 0, pgid = 0, sid = 0;
    unsigned long long flags = 0;  // the kernel's task flags
    unsigned long long start = 0;  // clock ticks after boot: tells a reused pid apart
    // In do_exit (PF_EXITING): it never runs its own code again, though /proc may show it for a
    // while, on a loaded machine for over a second (its namespaces' teardown waits for RCU).
    bool exiting() const { return (flags & 0x4) != 0 || state == 'Z' || state == 'X'; }
};

inline std::optional<ProcStat> proc_stat(pid_t pid)
{
    const std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = text.rfind(')');
    if (paren == std::string::npos || paren + 2 > text.size())
        return std::nullopt;
    std::istringstream in(text.substr(paren + 2));
    ProcStat st;
    in >> st.state >> st.ppid >> st.pgid >> st.sid;
    std::string skip;
    for (int field = 7; field < 22; ++field)  // tty_nr .. itrealvalue; 9 is flags
        if (field == 9)
            in >> st.flags;
        else
            in >> skip;
    in >> st.start;
    if (!in)
        return std::nullopt;
    return st;
}

inline std::vector<pid_t> all_pids()
{
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = entry.path().filename();
        if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
            pids.push_back(static_cast<pid_t>(std::stol(name)));
    }
    return pids;
}

// A process known by pid and start time, so that a reused pid never counts as it.
struct ProcessId {
    pid_t pid = 0;
    unsigned long long start = 0;

    static ProcessId of(pid_t pid)
    {
        auto st = proc_stat(pid);
        return {pid, st ? st->start : 0};
    }

    // Not exited: /proc still shows it with the same start time, and not as a zombie.
    bool running() const
    {
        if (pid <= 0)
            return false;
        auto st = proc_stat(pid);
        return st && st->start == start && !st->exiting();
    }
};

// The inode of a process's PID namespace, or 0 when /proc does not show it to us.
inline ino_t pid_ns_of(pid_t pid)
{
    struct stat st;
    if (::stat(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), &st) < 0)
        return 0;
    return st.st_ino;
}

// The running processes in the PID namespace `ns` that /proc lets the caller see. An unprivileged
// caller cannot see the namespace of a non-dumpable process (cocoon's PID 1): track that one by pid.
inline std::vector<pid_t> processes_in_pid_ns(ino_t ns)
{
    std::vector<pid_t> found;
    if (ns == 0)
        return found;
    for (pid_t pid : all_pids()) {
        if (pid_ns_of(pid) != ns)
            continue;
        auto st = proc_stat(pid);
        if (st && !st->exiting())
            found.push_back(pid);
    }
    return found;
}

// Every process group in the process tree under `root` (root's included), as a supervisor that
// knows only cocoon's pid finds them: by parent pid, from /proc/*/stat.
inline std::set<pid_t> process_groups_under(pid_t root)
{
    std::multimap<pid_t, pid_t> children;
    std::map<pid_t, pid_t> pgid;
    for (pid_t pid : all_pids())
        if (auto st = proc_stat(pid)) {
            children.emplace(st->ppid, pid);
            pgid[pid] = st->pgid;
        }
    std::set<pid_t> groups;
    std::vector<pid_t> todo{root};
    while (!todo.empty()) {
        pid_t pid = todo.back();
        todo.pop_back();
        if (auto it = pgid.find(pid); it != pgid.end() && it->second > 0)
            groups.insert(it->second);
        auto [first, last] = children.equal_range(pid);
        for (auto it = first; it != last; ++it)
            todo.push_back(it->second);
    }
    return groups;
}

// The fd numbers cocoon gets its --json-status-fd and --info-fd on.
constexpr int kJsonFd = 9;
constexpr int kInfoFd = 8;

inline int code_of(int wait_status)
{
    return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

// The command line for spawn(): cocoon, --json-status-fd kJsonFd (and --info-fd kInfoFd), `args`.
inline std::vector<std::string> cocoon_argv(const std::vector<std::string>& args, bool info = false)
{
    std::vector<std::string> argv{cocoon_bin(), "--json-status-fd", std::to_string(kJsonFd)};
    if (info)
        argv.insert(argv.end(), {"--info-fd", std::to_string(kInfoFd)});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

// Starts `argv` in its own process group (signals meant for cocoon's group must never reach the
// test runner), with default signal dispositions and an empty mask, stdin from /dev/null, and
// each fds[i].first as fds[i].second (fd numbers below 100); every other fd closes on exec. The
// child makes only async-signal-safe calls, so this may run on any thread.
inline pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::pair<int, int>>& fds)
{
    std::vector<char*> args;
    for (const std::string& arg : argv)
        args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    std::vector<int> moved(fds.size());
    pid_t pid = ::fork();
    if (pid != 0)
        return pid;
    ::setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP)
            ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // Out of the way first, so that no source is overwritten before it is moved.
    for (size_t i = 0; i < fds.size(); ++i)
        if ((moved[i] = ::fcntl(fds[i].first, F_DUPFD_CLOEXEC, 100)) < 0)
            ::_exit(127);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || ::dup2(null, 0) < 0)
        ::_exit(127);
    for (size_t i = 0; i < fds.size(); ++i)
        if (::dup2(moved[i], fds[i].second) < 0)
            ::_exit(127);
    ::execv(args[0], args.data());
    ::_exit(127);
}

// spawn(argv) with stdout and stderr on out_fd, json_fd as kJsonFd and, if given, info_fd as kInfoFd.
inline pid_t spawn_cocoon(const std::vector<std::string>& argv, int json_fd, int out_fd, int info_fd = -1)
{
    std::vector<std::pair<int, int>> fds{{out_fd, 1}, {out_fd, 2}, {json_fd, kJsonFd}};
    if (info_fd >= 0)
        fds.emplace_back(info_fd, kInfoFd);
    return spawn(argv, fds);
}

// A cocoon running in the background, and its sandbox. Whatever is still running of either when
// this goes away is SIGKILLed, so a failed test leaves nothing behind.
class Sandbox {
public:
    // Starts cocoon with `args` as the test's child; its output goes to out_path. With info_fd,
    // cocoon also gets --info-fd on (a duplicate of) it.
    Sandbox(const std::vector<std::string>& args, const std::string& out_path, int info_fd = -1) : m_out_path(out_path)
    {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) < 0)
            throw std::runtime_error("pipe2 failed");
        m_json.reset(fds[0]);
        ::fcntl(m_json.get(), F_SETFL, O_NONBLOCK);
        UniqueFd json_w(fds[1]);
        UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        pid_t pid = spawn_cocoon(cocoon_argv(args, info_fd >= 0), json_w.get(), out.get(), info_fd);
        if (pid < 0)
            throw std::runtime_error("fork failed");
        m_cocoon = ProcessId::of(pid);
        m_child = true;
    }

    // A cocoon that another process started: its pid and the read end of its status pipe.
    Sandbox(pid_t cocoon, UniqueFd json, const std::string& out_path)
        : m_out_path(out_path), m_cocoon(ProcessId::of(cocoon)), m_json(std::move(json))
    {
        ::fcntl(m_json.get(), F_SETFL, O_NONBLOCK);
    }

    ~Sandbox()
    {
        if (m_pid1.pid <= 0)
            wait_started(0);  // PID 1 from the report, if it came: without it the sandbox would stay
        if (m_pid1.running())
            ::kill(m_pid1.pid, SIGKILL);
        if (m_cocoon.running())
            ::kill(m_cocoon.pid, SIGKILL);
        if (m_child && !m_status)
            ::waitpid(m_cocoon.pid, nullptr, 0);
    }

    Sandbox(const Sandbox&) = delete;
    Sandbox& operator=(const Sandbox&) = delete;

    pid_t pid() const { return m_cocoon.pid; }
    const ProcessId& pid1() const { return m_pid1; }
    ino_t pid_ns() const { return m_pid_ns; }
    std::string output() const { return read_file(m_out_path); }

    // Waits for the report's first line, {"child-pid": N, ...}, and takes PID 1 from it, and the
    // PID namespace when the line names it ("pid-namespace").
    bool wait_started(int timeout_ms = 5000)
    {
        if (!wait_until([&] { return status_lines().size() >= 1; }, timeout_ms, 5))
            return false;
        const std::string first = status_lines().front();
        auto child = json_number(first, "child-pid");
        if (!child)
            return false;
        m_pid1 = ProcessId::of(static_cast<pid_t>(*child));
        if (auto ns = json_number(first, "pid-namespace"))
            m_reported_pid_ns = static_cast<ino_t>(*ns);
        return true;
    }

    std::optional<ino_t> reported_pid_ns() const { return m_reported_pid_ns; }

    // Reads the PID namespace off a running child of PID 1 (the command is dumpable, PID 1 is
    // not); false if there is none to read. The namespace is held open for the Sandbox's life: the
    // kernel gives a freed namespace's inode number to the next namespace made, and a test running
    // beside this one would otherwise find its own sandbox's processes under our number.
    bool locate_pid_ns()
    {
        for (pid_t pid : all_pids()) {
            auto st = proc_stat(pid);
            if (!st || st->ppid != m_pid1.pid || st->state == 'Z' || !m_pid1.running())
                continue;
            UniqueFd ns(::open(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), O_RDONLY | O_CLOEXEC));
            struct stat ns_st;
            auto again = proc_stat(pid);
            if (!ns || ::fstat(ns.get(), &ns_st) < 0 || !again || again->start != st->start ||
                again->ppid != m_pid1.pid)
                continue;
            m_pid_ns = ns_st.st_ino;
            m_pid_ns_fd = std::move(ns);
            return true;
        }
        return false;
    }

    // The lines --json-status-fd wrote so far.
    std::vector<std::string> status_lines()
    {
        char buf[4096];
        ssize_t n;
        while ((n = ::read(m_json.get(), buf, sizeof buf)) > 0)
            m_report.append(buf, static_cast<size_t>(n));
        return lines(m_report);
    }

    std::string last_status_line()
    {
        std::vector<std::string> report = status_lines();
        return report.empty() ? "" : report.back();
    }

    // cocoon has not exited. For our child, reaps it when it has.
    bool running()
    {
        if (!m_child)
            return m_cocoon.running();
        if (m_status)
            return false;
        int status;
        if (::waitpid(m_cocoon.pid, &status, WNOHANG) == m_cocoon.pid) {
            m_status = status;
            return false;
        }
        return true;
    }

    // cocoon's wait status (our child only), or nothing if it still runs after timeout_ms.
    std::optional<int> wait_status(int timeout_ms)
    {
        wait_until([&] { return !running(); }, timeout_ms, 5);
        return m_status;
    }

    // The sandbox's running processes: those in its PID namespace, and PID 1.
    std::vector<pid_t> remaining() const
    {
        std::vector<pid_t> found = processes_in_pid_ns(m_pid_ns);
        if (m_pid1.running() && std::find(found.begin(), found.end(), m_pid1.pid) == found.end())
            found.push_back(m_pid1.pid);
        return found;
    }

    // Nothing of the sandbox runs any more within timeout_ms.
    bool gone_within(int timeout_ms) const
    {
        return wait_until([&] { return remaining().empty(); }, timeout_ms, 20);
    }

    // The running sandbox process that is PID 1's child and runs `marker`: the command.
    std::optional<pid_t> find_child_of_pid1(const std::string& marker) const
    {
        for (pid_t pid : processes_in_pid_ns(m_pid_ns)) {
            auto st = proc_stat(pid);
            if (st && st->ppid == m_pid1.pid &&
                contains(read_file("/proc/" + std::to_string(pid) + "/cmdline"), marker))
                return pid;
        }
        return std::nullopt;
    }

    static std::optional<long long> json_number(const std::string& line, const std::string& key)
    {
        const std::string quoted = "\"" + key + "\": ";
        const size_t at = line.find(quoted);
        long long value = 0;
        if (at == std::string::npos)
            return std::nullopt;
        const char* begin = line.data() + at + quoted.size();
        if (std::from_chars(begin, line.data() + line.size(), value).ec != std::errc())
            return std::nullopt;
        return value;
    }

private:
    std::string m_out_path;
    ProcessId m_cocoon;
    bool m_child = false;
    std::optional<int> m_status;
    UniqueFd m_json;
    std::string m_report;
    ProcessId m_pid1;
    std::optional<ino_t> m_reported_pid_ns;
    ino_t m_pid_ns = 0;
    UniqueFd m_pid_ns_fd;
};

}  // namespace cocoon::test
