// Startup benchmark driver: times fork+execv+waitpid of labelled commands, runs
// interleaved so drift hits every label alike, each round in a shuffled order so that no label
// always follows the same one (a start is slowed by its predecessor's teardown, which the kernel
// runs after it ends, and a heavier predecessor slows it more). Standalone; runs as its caller.
// Besides wall time it records the CPU time of each run (user + system of the
// process and every descendant it waited for, from wait4's rusage), which other
// load on the machine disturbs much less than the wall clock. A process that is
// not waited for inside the tree is not counted (bwrap's sandbox: bwrap exits
// without waiting for it).
//
// usage: startup_bench [--runs N] [--warmup W] [--gap-ms G] -- LABEL [NAME=VALUE...] cmd args... ::: LABEL ...
// --gap-ms: a pause before each run, not timed. The kernel tears a sandbox's namespaces down after
// it has ended, in workqueues and for tens of milliseconds (a network namespace's cleanup_net
// runs ~45 ms after its last process, batched; free_ipc, the keyring's garbage collector): run
// back to back, every start shares the CPUs and the kernel's locks with the teardowns of the
// dozen before it, which no start an orchestrator makes seconds apart does.
// (NAME=VALUE words after a label are added to that command's environment, as env(1) would, but
// without an exec of its own: tools/bench/features sets COCOON_BENCH_SKIP so.)
// --copies K: each command's executable is copied K times (a directory of the driver's own under
// /tmp, removed at its end) and round r runs copy r % K. On this project's VM two copies of one
// binary start up to 0.25 ms apart, every round alike (where the page cache put each one's pages,
// which the hypervisor's shadow page tables then follow): one copy per label would credit that
// to the label. A setuid executable loses its bit in a copy: give such a command --copies 1.
// Runs in: dev.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern char** environ;

namespace {

constexpr std::string_view kSeparator = ":::";

struct Command {
    std::string label;
    std::string path;  // resolved once, so PATH search is not timed
    std::vector<std::string> copies;  // --copies: the executable's copies, run in turn
    std::vector<std::string> argv;  // argv[0] as given
    std::vector<std::string> env;  // the NAME=VALUE words given before it
    std::vector<double> samples_ms;
    std::vector<double> cpu_ms;
};

struct Options {
    int runs = 300;
    int warmup = 20;
    int gap_ms = 0;
    int copies = 1;
    std::vector<Command> commands;
};

[[noreturn]] void die(const std::string& message)
{
    std::fprintf(stderr, "startup_bench: %s\n", message.c_str());
    std::exit(1);
}

[[noreturn]] void die_errno(const std::string& call, int err)
{
    die(call + ": " + std::strerror(err));
}

[[noreturn]] void usage()
{
    die("usage: startup_bench [--runs N] [--warmup W] [--gap-ms G] [--copies K] -- LABEL cmd args... "
        "[::: LABEL cmd args...]...");
}

int parse_count(std::string_view flag, const char* text, int min)
{
    int value = 0;
    std::string_view s = text;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || value < min)
        die(std::string(flag) + ": expected an integer >= " + std::to_string(min) + ", got '" + text + "'");
    return value;
}

// A name without '/' is looked up in $PATH, as execvp would, but before timing starts.
std::string resolve(const std::string& name)
{
    if (name.find('/') != std::string::npos) {
        if (::access(name.c_str(), X_OK) != 0)
            die_errno("access(" + name + ")", errno);
        return name;
    }
    const char* env = std::getenv("PATH");
    std::string_view path = env ? env : "/usr/local/bin:/usr/bin:/bin";
    while (true) {
        size_t colon = path.find(':');
        std::string dir(path.substr(0, colon));
        std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
        if (::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        if (colon == std::string_view::npos)
            break;
        path.remove_prefix(colon + 1);
    }
    die(name + ": not found in PATH");
}

Options parse_args(int argc, char** argv)
{
    Options o;
    int i = 1;
    for (; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if ((a == "--runs" || a == "--warmup" || a == "--gap-ms" || a == "--copies") && i + 1 < argc) {
            int& slot = a == "--runs" ? o.runs : a == "--warmup" ? o.warmup : a == "--gap-ms" ? o.gap_ms : o.copies;
            slot = parse_count(a, argv[++i], a == "--runs" || a == "--copies" ? 1 : 0);
        } else {
            usage();
        }
    }
    // Split the rest at ":::" into LABEL cmd args... groups.
    std::vector<std::string> group;
    auto flush = [&] {
        if (group.size() < 2)
            die("each group needs a LABEL and a command");
        Command c;
        c.label = group[0];
        size_t first = 1;
        // NAME=VALUE: a name before the '=' (no '/': a path with '=' in it is the command).
        auto is_assignment = [](const std::string& w) {
            const size_t eq = w.find('=');
            return eq != std::string::npos && eq > 0 && w.find('/') > eq;
        };
        while (first + 1 < group.size() && is_assignment(group[first]))
            c.env.push_back(group[first++]);
        c.argv.assign(group.begin() + static_cast<long>(first), group.end());
        c.path = resolve(c.argv[0]);
        for (const Command& other : o.commands)
            if (other.label == c.label)
                die("duplicate label '" + c.label + "'");
        o.commands.push_back(std::move(c));
        group.clear();
    };
    for (; i < argc; ++i) {
        if (argv[i] == kSeparator)
            flush();
        else
            group.emplace_back(argv[i]);
    }
    flush();
    return o;
}

std::string describe(const Command& c)
{
    std::string s = c.label + " (";
    for (size_t i = 0; i < c.argv.size(); ++i)
        s += (i ? " " : "") + c.argv[i];
    return s + ")";
}

double now_ms()
{
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

double cpu_ms_of(const rusage& ru)
{
    auto ms = [](const timeval& tv) { return double(tv.tv_sec) * 1e3 + double(tv.tv_usec) / 1e3; };
    return ms(ru.ru_utime) + ms(ru.ru_stime);
}

struct Sample {
    double wall_ms;
    double cpu_ms;
};

// One timed run: from just before fork to just after waitpid. Any failure is fatal,
// since a fast failing sandbox would otherwise look like a fast sandbox.
Sample run_once(const Command& c, const std::string& path, const std::vector<char*>& argv, char* const* envp,
                int devnull)
{
    double start = now_ms();
    pid_t pid = ::fork();
    if (pid < 0)
        die_errno("fork", errno);
    if (pid == 0) {
        // Child: only async-signal-safe calls until execv.
        if (::dup2(devnull, STDOUT_FILENO) < 0 || ::dup2(devnull, STDERR_FILENO) < 0)
            ::_exit(126);
        ::execve(path.c_str(), argv.data(), envp);
        ::_exit(127);
    }
    int status = 0;
    rusage ru{};
    while (::wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR)
            die_errno("wait4", errno);
    double elapsed = now_ms() - start;
    if (WIFSIGNALED(status))
        die(describe(c) + ": killed by signal " + std::to_string(WTERMSIG(status)));
    if (WEXITSTATUS(status) != 0)
        die(describe(c) + ": exited with status " + std::to_string(WEXITSTATUS(status)) +
            (WEXITSTATUS(status) == 127 ? " (exec failed?)" : ""));
    return {elapsed, cpu_ms_of(ru)};
}

// Linear interpolation between order statistics; `sorted` must be non-empty.
double percentile(const std::vector<double>& sorted, double p)
{
    double pos = p * double(sorted.size() - 1);
    size_t lo = size_t(pos);
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - double(lo));
}

const Command* find_label(const std::vector<Command>& commands, std::string_view label)
{
    for (const Command& c : commands)
        if (c.label == label)
            return &c;
    return nullptr;
}

void report(std::vector<Command>& commands, int runs, int warmup, int gap_ms, int copies)
{
    size_t width = 0;
    for (const Command& c : commands)
        width = std::max(width, c.label.size());
    // Paired: each round runs every label back to back, so the median of a label's differences to
    // the first label's run of the same round leaves out the drift that moves both (before the
    // samples are sorted below).
    std::vector<double> paired(commands.size(), 0.0);
    for (size_t i = 1; i < commands.size(); ++i) {
        std::vector<double> diffs;
        for (size_t r = 0; r < commands[i].samples_ms.size(); ++r)
            diffs.push_back(commands[i].samples_ms[r] - commands[0].samples_ms[r]);
        std::sort(diffs.begin(), diffs.end());
        paired[i] = percentile(diffs, 0.5);
    }
    std::vector<double> medians, cpu_medians;
    std::printf(
        "# runs=%d warmup=%d gap_ms=%d copies=%d order=shuffled unit=ms (fork..waitpid; cpu = user+sys of the whole "
        "tree)\n",
        runs, warmup, gap_ms, copies);
    for (Command& c : commands) {
        std::sort(c.samples_ms.begin(), c.samples_ms.end());
        std::sort(c.cpu_ms.begin(), c.cpu_ms.end());
        double median = percentile(c.samples_ms, 0.5);
        medians.push_back(median);
        cpu_medians.push_back(percentile(c.cpu_ms, 0.5));
        std::printf("median_ms %-*s %8.3f   p10_ms %8.3f   p90_ms %8.3f   cpu_ms %8.3f   n %zu\n", int(width),
                    c.label.c_str(), median, percentile(c.samples_ms, 0.1), percentile(c.samples_ms, 0.9),
                    cpu_medians.back(), c.samples_ms.size());
    }
    for (size_t i = 1; i < commands.size(); ++i)
        std::printf("paired_ms %-*s %8.3f   (the median of its run less %s's, round by round)\n", int(width),
                    commands[i].label.c_str(), paired[i], commands[0].label.c_str());
    auto index = [&](const Command* c) { return size_t(c - commands.data()); };
    auto ratio = [&](const Command* num, const Command* den) {
        std::string name = num->label + "/" + den->label;
        std::printf("ratio %-*s %8.3f   cpu %8.3f\n", int(2 * width + 1), name.c_str(),
                    medians[index(num)] / medians[index(den)], cpu_medians[index(num)] / cpu_medians[index(den)]);
    };
    // Anchors: what the others are divided by. bwrap is the competitor; floor
    // (tools/bench/startup builds it) is the least work that gives the same
    // sandbox; direct and unshare are plain process and namespace costs.
    constexpr std::string_view kAnchors[] = {"bwrap", "floor", "direct", "unshare"};
    auto is_anchor = [&](std::string_view label) {
        return std::find(std::begin(kAnchors), std::end(kAnchors), label) != std::end(kAnchors);
    };
    for (std::string_view anchor_name : kAnchors) {
        const Command* anchor = find_label(commands, anchor_name);
        if (!anchor)
            continue;
        // Each anchor divides the commands under test and bwrap.
        for (const Command& c : commands)
            if (&c != anchor && (!is_anchor(c.label) || c.label == "bwrap"))
                ratio(&c, anchor);
    }
}

std::string copies_dir;

void remove_copies()
{
    if (!copies_dir.empty()) {
        std::error_code ignored;
        std::filesystem::remove_all(copies_dir, ignored);
    }
}

// --copies: K copies of each command's executable in a directory of our own (mode 0755, as the
// copies: the driver runs them as whoever runs it).
void make_copies(std::vector<Command>& commands, int copies)
{
    if (copies == 1) {
        for (Command& c : commands)
            c.copies = {c.path};
        return;
    }
    std::string dir = "/tmp/startup-bench.XXXXXX";
    if (!::mkdtemp(dir.data()))
        die_errno("mkdtemp(" + dir + ")", errno);
    copies_dir = dir;
    std::atexit(remove_copies);
    if (::chmod(dir.c_str(), 0755) != 0)
        die_errno("chmod(" + dir + ")", errno);
    for (size_t i = 0; i < commands.size(); ++i)
        for (int k = 0; k < copies; ++k) {
            std::string to = dir + "/" + std::to_string(i) + "-" + std::to_string(k);
            std::error_code ec;
            std::filesystem::copy_file(commands[i].path, to, ec);
            if (ec || ::chmod(to.c_str(), 0755) != 0)
                die("copying " + commands[i].path + " to " + to + ": " + (ec ? ec.message() : std::strerror(errno)));
            commands[i].copies.push_back(to);
        }
}

}  // namespace

int main(int argc, char** argv)
{
    Options o = parse_args(argc, argv);
    make_copies(o.commands, o.copies);

    int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull < 0)
        die_errno("open(/dev/null)", errno);

    std::vector<std::vector<char*>> argvs, envps;
    for (Command& c : o.commands) {
        std::vector<char*> v;
        for (std::string& s : c.argv)
            v.push_back(s.data());
        v.push_back(nullptr);
        argvs.push_back(std::move(v));
        std::vector<char*> e;
        for (std::string& s : c.env)
            e.push_back(s.data());
        for (char** p = environ; *p; ++p)
            e.push_back(*p);
        e.push_back(nullptr);
        envps.push_back(std::move(e));
        c.samples_ms.reserve(size_t(o.runs));
        c.cpu_ms.reserve(size_t(o.runs));
    }

    // Round r runs every label once, in an order of its own (a fixed seed: a run is repeatable).
    std::vector<size_t> order(o.commands.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937 shuffler(35);
    for (int r = 0; r < o.warmup + o.runs; ++r) {
        std::shuffle(order.begin(), order.end(), shuffler);
        for (size_t i : order) {
            if (o.gap_ms > 0) {
                const timespec gap{o.gap_ms / 1000, static_cast<long>(o.gap_ms % 1000) * 1000000};
                ::nanosleep(&gap, nullptr);
            }
            const Command& c = o.commands[i];
            Sample sample = run_once(c, c.copies[size_t(r) % c.copies.size()], argvs[i], envps[i].data(), devnull);
            if (r >= o.warmup) {
                o.commands[i].samples_ms.push_back(sample.wall_ms);
                o.commands[i].cpu_ms.push_back(sample.cpu_ms);
            }
        }
    }

    report(o.commands, o.runs, o.warmup, o.gap_ms, o.copies);
    std::fflush(stdout);
    return 0;
}
