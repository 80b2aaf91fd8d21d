// Test support: child processes with captured output, temp dirs, host checks.
#include "tests/support/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace cocoon::test {

std::string cocoon_bin()
{
    const char* env = std::getenv("COCOON_BIN");
    return env && *env ? env : COCOON_BIN_DEFAULT;
}

Result run(const std::vector<std::string>& argv, const std::string& input, int timeout_ms)
{
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
        throw std::runtime_error("pipe2 failed");
    // Built before the fork: the child of a threaded test (a swapper thread) must not allocate,
    // whose allocator's lock another thread may have held at the fork (ASan's did, in CI).
    std::vector<char*> args;
    for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        execv(args[0], args.data());
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    if (!input.empty() && write(in[1], input.data(), input.size()) < 0) {
        // the child may exit without reading; that is its business
    }
    close(in[1]);

    Result r;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    bool timed_out = false;
    while (open_fds > 0) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            timed_out = true;
            break;
        }
        if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n > 0) {
                (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
            } else {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    if (timed_out)
        kill(pid, SIGKILL);
    for (auto& f : fds)
        if (f.fd >= 0)
            close(f.fd);
    int status = 0;
    waitpid(pid, &status, 0);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (timed_out)
        ADD_FAILURE() << "timed out after " << timeout_ms << " ms: " << argv[0];
    return r;
}

pid_t start_logged(const std::vector<std::string>& argv, const std::string& out_path)
{
    // As in run(): nothing allocated after the fork.
    std::vector<std::string> copy = argv;
    std::vector<char*> cargv;
    for (std::string& a : copy)
        cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        int in = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out < 0 || in < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
            ::_exit(127);
        ::execv(cargv[0], cargv.data());
        ::_exit(127);
    }
    return pid;
}

int wait_exit(pid_t pid, int timeout_ms)
{
    int status = 0;
    for (int waited = 0; ::waitpid(pid, &status, WNOHANG) == 0; waited += 10) {
        if (waited >= timeout_ms) {
            ADD_FAILURE() << "process " << pid << " did not exit in " << timeout_ms << " ms";
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Result cocoon(const std::vector<std::string>& args, const std::string& input)
{
    std::vector<std::string> argv{cocoon_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, input);
}

TempDir::TempDir()
{
    char tmpl[] = "/tmp/cocoon-test-XXXXXX";
    if (!mkdtemp(tmpl))
        throw std::runtime_error("mkdtemp failed");
    m_path = tmpl;
}

TempDir::~TempDir()
{
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
}

void write_file(const std::string& path, const std::string& data, mode_t mode)
{
    std::ofstream(path) << data;
    chmod(path.c_str(), mode);
}

std::string read_file(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

bool exists(const std::string& path)
{
    struct stat st;
    return lstat(path.c_str(), &st) == 0;
}

std::vector<std::string> mount_table()
{
    std::vector<std::string> lines;
    std::ifstream in("/proc/self/mountinfo");
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

std::map<std::string, std::string> files_under(const std::string& dir)
{
    std::map<std::string, std::string> files;
    // skip: overlayfs makes WORKDIR/work with mode 0, which only root reads.
    for (const auto& entry : std::filesystem::recursive_directory_iterator(
             dir, std::filesystem::directory_options::skip_permission_denied)) {
        const std::string path = entry.path().string();
        files[path] = entry.is_directory() ? "/" : entry.is_regular_file() ? read_file(path) : "(special)";
    }
    return files;
}

std::vector<pid_t> processes_with(const std::string& marker)
{
    std::vector<pid_t> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos)
            continue;
        std::string cmdline = read_file("/proc/" + name + "/cmdline");
        if (cmdline.find(marker) != std::string::npos && std::stoi(name) != getpid())
            found.push_back(std::stoi(name));
    }
    return found;
}

std::vector<std::string> minimal_root()
{
    return {"--ro-bind", "/usr",      "/usr",    "--symlink", "usr/bin",   "/bin",      "--symlink", "usr/sbin",
            "/sbin",     "--symlink", "usr/lib", "/lib",      "--symlink", "usr/lib64", "/lib64"};
}

bool is_root()
{
    return getuid() == 0;
}

std::string unique_marker(const std::string& prefix)
{
    static std::atomic<unsigned> counter{0};
    return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(std::time(nullptr)) + "-" +
           std::to_string(counter++);
}

}  // namespace cocoon::test
