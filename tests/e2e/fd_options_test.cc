// End-to-end checks of the options that take file descriptors from the caller:
// --args, --sync-fd, --block-fd, --userns-block-fd, --lock-file, --seccomp and
// --add-seccomp-fd, each in a real sandbox, against /usr/bin/bwrap where the
// two can be compared. Runs as the test's caller (root or not).
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/fd_support.h"
#include "tests/support/bwrap.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

using namespace std::string_literals;
using namespace std::chrono_literals;

// A compiled filter, as seccomp_export_bpf writes it: allow everything except
// `syscalls`, which fail with `err`.
std::string compile_filter(const std::vector<int>& syscalls, int err)
{
    std::unique_ptr<void, decltype(&seccomp_release)> ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
    if (!ctx)
        throw std::runtime_error("seccomp_init");
    for (int nr : syscalls)
        if (seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(static_cast<unsigned>(err)), nr, 0) < 0)
            throw std::runtime_error("seccomp_rule_add");
    UniqueFd mem(::memfd_create("filter", MFD_CLOEXEC));
    if (!mem || seccomp_export_bpf(ctx.get(), mem.get()) < 0)
        throw std::runtime_error("seccomp_export_bpf");
    std::string bytes(static_cast<size_t>(::lseek(mem.get(), 0, SEEK_END)), '\0');
    if (::pread(mem.get(), bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()))
        throw std::runtime_error("pread");
    return bytes;
}

const std::string kMkdirAndLink = "mkdir /tmp/d 2>&1 && echo made; ln -s x /tmp/l 2>&1 && echo linked; true";

std::string mkdir_filter()
{
    return compile_filter({SCMP_SYS(mkdir), SCMP_SYS(mkdirat)}, EPERM);
}

std::string symlink_filter()
{
    return compile_filter({SCMP_SYS(symlink), SCMP_SYS(symlinkat)}, EACCES);
}

bool process_holds(pid_t pid, const std::string& link)
{
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec))
        if (std::filesystem::read_symlink(entry.path(), ec).string() == link)
            return true;
    return false;
}

// Writes a /proc file in one write(2), as the kernel wants id maps written.
void sys_write(const std::string& path, const std::string& data)
{
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd) << path << ": " << std::strerror(errno);
    ASSERT_EQ(::write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()))
        << path << ": " << std::strerror(errno);
}

// The child-pid of an --info-fd report.
pid_t child_pid(const std::string& info)
{
    size_t at = info.find("\"child-pid\": ");
    return at == std::string::npos ? -1 : std::stoi(info.substr(at + 13));
}

std::string read_some(int fd)
{
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Whether another process holds a lock on path that a write lock would meet.
bool locked_by_other(const std::string& path)
{
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct flock probe {};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    return fd && ::fcntl(fd.get(), F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
}

// --- --args ---

TEST(ArgsFd, OptionsFromTheFileApplyInPlace)
{
    UniqueFd file =
        pipe_holding("--setenv\0FROM_FILE\0yes\0--setenv\0ORDER\0file\0--unshare-uts\0--hostname\0args-box"s);
    BackgroundCommand b(minimal_cocoon_argv({"--setenv", "ORDER", "before", "--args", "5"},
                                            sh("echo $FROM_FILE $ORDER $(hostname); " + fd_open_test(5, '<'))),
                        {{5, file.get()}});
    Result r = b.finish();
    ASSERT_EQ(r.code, 0) << r.err;
    // The file's --setenv ORDER came after the command line's, so it wins.
    EXPECT_EQ(r.out, "yes file args-box\n");
}

TEST(ArgsFd, IsReadOnceAndClosed)
{
    UniqueFd file = pipe_holding("--setenv\0A\0x\0"s);
    // A second --args of the same fd finds it closed, as bwrap does.
    Result r =
        BackgroundCommand(minimal_cocoon_argv({"--args", "5", "--args", "5"}, {"true"}), {{5, file.get()}}).finish();
    expect_refused(r, {"--args", "fd 5", "Bad file descriptor"});
}

TEST(ArgsFd, Refusals)
{
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--args", "7"}, {"true"})).finish(), {"--args", "fd 7"});
    UniqueFd nested = pipe_holding("--args\0006\0"s);
    UniqueFd inner = pipe_holding("--unshare-net\0"s);
    expect_refused(
        BackgroundCommand(minimal_cocoon_argv({"--args", "5"}, {"true"}), {{5, nested.get()}, {6, inner.get()}})
            .finish(),
        {"--args not supported in arguments file"});
    UniqueFd command = pipe_holding("--unshare-net\0true\0"s);
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--args", "5"}, {"true"}), {{5, command.get()}}).finish(),
                   {"--args 5", "'true'"});
}

// --- --seccomp, --add-seccomp-fd ---

TEST(Seccomp, FilterIsEnforced)
{
    // Control: without a filter both calls work.
    Result open = in_sandbox({"--tmpfs", "/tmp"}, sh(kMkdirAndLink));
    ASSERT_EQ(open.code, 0) << open.err;
    EXPECT_EQ(open.out, "made\nlinked\n");

    UniqueFd filter = pipe_holding(mkdir_filter());
    Result r = BackgroundCommand(minimal_cocoon_argv({"--tmpfs", "/tmp", "--seccomp", "5"}, sh(kMkdirAndLink)),
                                 {{5, filter.get()}})
                   .finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Operation not permitted")) << r.out;
    EXPECT_FALSE(contains(r.out, "made")) << r.out;
    EXPECT_TRUE(contains(r.out, "linked")) << r.out;
}

TEST(Seccomp, AddedFiltersAllApply)
{
    UniqueFd first = pipe_holding(mkdir_filter());
    UniqueFd second = pipe_holding(symlink_filter());
    Result r =
        BackgroundCommand(minimal_cocoon_argv({"--tmpfs", "/tmp", "--add-seccomp-fd", "5", "--add-seccomp-fd", "6"},
                                              sh(kMkdirAndLink)),
                          {{5, first.get()}, {6, second.get()}})
            .finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "Operation not permitted")) << r.out;  // EPERM from the first
    EXPECT_TRUE(contains(r.out, "Permission denied")) << r.out;  // EACCES from the second
    EXPECT_FALSE(contains(r.out, "made")) << r.out;
    EXPECT_FALSE(contains(r.out, "linked")) << r.out;
}

TEST(Seccomp, Refusals)
{
    UniqueFd ragged = pipe_holding("abc");
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--seccomp", "5"}, {"true"}), {{5, ragged.get()}}).finish(),
                   {"--seccomp 5", "multiple of 8"});
    UniqueFd empty = pipe_holding("");
    expect_refused(
        BackgroundCommand(minimal_cocoon_argv({"--add-seccomp-fd", "5"}, {"true"}), {{5, empty.get()}}).finish(),
        {"--add-seccomp-fd 5", "0 bytes"});
    UniqueFd huge = pipe_holding(std::string(size_t{4097} * 8, '\0'));
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--seccomp", "5"}, {"true"}), {{5, huge.get()}}).finish(),
                   {"--seccomp 5", "4096 instructions"});
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--seccomp", "7"}, {"true"})).finish(),
                   {"--seccomp 7", "Bad file descriptor"});
    UniqueFd a = pipe_holding(mkdir_filter()), b = pipe_holding(mkdir_filter());
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--seccomp", "5", "--add-seccomp-fd", "6"}, {"true"}),
                                     {{5, a.get()}, {6, b.get()}})
                       .finish(),
                   {"--add-seccomp-fd cannot be combined with --seccomp"});
}

// --- --block-fd ---

TEST(BlockFd, CommandWaitsForTheByte)
{
    TempDir out;
    Pipe go;
    BackgroundCommand b(minimal_cocoon_argv({"--bind", out.path(), "/out", "--block-fd", "5"},
                                            sh("touch /out/started; " + fd_open_test(5, '<') + "; echo ran")),
                        {{5, go.read.get()}});
    std::this_thread::sleep_for(300ms);
    EXPECT_TRUE(b.running());
    EXPECT_FALSE(exists(out / "started")) << "the command ran before the byte was written";
    ASSERT_EQ(::write(go.write.get(), "x", 1), 1);
    Result r = b.finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "ran\n");
    EXPECT_TRUE(exists(out / "started"));
}

TEST(BlockFd, EndOfFileAlsoReleases)
{
    Pipe go;
    BackgroundCommand b(minimal_cocoon_argv({"--block-fd", "5"}, {"true"}), {{5, go.read.get()}});
    std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(b.running());
    go.write.reset();
    Result r = b.finish();
    EXPECT_EQ(r.code, 0) << r.err;
}

// --- --userns-block-fd ---

TEST(UsernsBlockFd, CallerWritesTheIdMaps)
{
    Pipe go, info;
    BackgroundCommand b(minimal_cocoon_argv({"--unshare-user", "--unshare-pid", "--proc", "/proc", "--userns-block-fd",
                                             "5", "--info-fd", "6"},
                                            sh("id -u; id -g; cat /proc/self/uid_map")),
                        {{5, go.read.get()}, {6, info.write.get()}});
    info.write.reset();
    pid_t pid = child_pid(read_some(info.read.get()));
    ASSERT_GT(pid, 0);
    const std::string proc = "/proc/" + std::to_string(pid);
    // cocoon left the maps to us.
    EXPECT_EQ(read_file(proc + "/uid_map"), "");
    sys_write(proc + "/uid_map", "4321 " + std::to_string(::getuid()) + " 1\n");
    sys_write(proc + "/setgroups", "deny");
    sys_write(proc + "/gid_map", "4322 " + std::to_string(::getgid()) + " 1\n");
    ASSERT_EQ(::write(go.write.get(), "x", 1), 1);
    Result r = b.finish();
    ASSERT_EQ(r.code, 0) << r.err;
    auto l = lines(r.out);
    ASSERT_EQ(l.size(), 3u) << r.out;
    EXPECT_EQ(l[0], "4321");
    EXPECT_EQ(l[1], "4322");
}

TEST(UsernsBlockFd, Refusals)
{
    Pipe go;
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--unshare-user", "--userns-block-fd", "5"}, {"true"}),
                                     {{5, go.read.get()}})
                       .finish(),
                   {"--userns-block-fd requires --info-fd"});
    expect_refused(
        BackgroundCommand(
            minimal_cocoon_argv({"--unshare-user", "--userns-block-fd", "5", "--info-fd", "1", "--uid", "0"}, {"true"}),
            {{5, go.read.get()}})
            .finish(),
        {"--userns-block-fd", "--uid"});
    expect_refused(
        BackgroundCommand(minimal_cocoon_argv({"--unshare-user", "--userns-block-fd", "7", "--info-fd", "1"}, {"true"}))
            .finish(),
        {"--userns-block-fd 7", "Bad file descriptor"});
}

// --- --sync-fd ---

void check_sync_fd(const std::vector<std::string>& extra)
{
    TempDir out;
    Pipe sync;
    BackgroundCommand b(minimal_cocoon_argv(args({extra, {"--bind", out.path(), "/out", "--sync-fd", "5"}}),
                                            sh(fd_open_test(5, '>') + "; echo started > /out/started; "
                                                                      "while [ ! -e /out/go ]; do sleep 0.02; done")),
                        {{5, sync.write.get()}});
    sync.write.reset();
    ASSERT_TRUE(eventually([&] { return exists(out / "started"); }));
    // The sandbox holds the write end; cocoon itself does not.
    EXPECT_FALSE(hung_up(sync.read.get()));
    EXPECT_FALSE(process_holds(b.pid(), pipe_name(sync.read.get())));
    write_file(out / "go", "");
    Result r = b.finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "");  // not "fd-leaked"
    EXPECT_TRUE(hung_up(sync.read.get()));
}

TEST(SyncFd, HeldWhileTheSandboxRunsWithPidNamespace)
{
    check_sync_fd({"--unshare-pid"});
}

TEST(SyncFd, HeldWhileTheSandboxRunsWithoutPidNamespace)
{
    check_sync_fd({});
}

// It tracks the sandbox, not cocoon: SIGKILL of cocoon (no --die-with-parent)
// leaves the sandbox running, and the fd open until it ends.
TEST(SyncFd, OutlivesAKilledCocoon)
{
    TempDir out;
    Pipe sync;
    BackgroundCommand b(minimal_cocoon_argv({"--unshare-pid", "--bind", out.path(), "/out", "--sync-fd", "5"},
                                            sh("touch /out/started; while [ ! -e /out/go ]; do sleep 0.02; done")),
                        {{5, sync.write.get()}});
    sync.write.reset();
    ASSERT_TRUE(eventually([&] { return exists(out / "started"); }));
    ::kill(b.pid(), SIGKILL);
    ASSERT_TRUE(eventually([&] { return !b.running(); }));
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(hung_up(sync.read.get()));
    write_file(out / "go", "");
    EXPECT_TRUE(eventually([&] { return hung_up(sync.read.get()); }));
}

// A caller's fd that no option names is handed to the command (fd_handover_test.cc), and kept
// by neither cocoon nor the sandbox's PID 1, which keeps only the sync fd: once the command has
// closed it, nothing holds it, though the sandbox runs on, cocoon killed or not.
TEST(SyncFd, PidOneKeepsNoOtherCallerFd)
{
    TempDir out;
    Pipe sync, stray;
    BackgroundCommand b(
        minimal_cocoon_argv({"--unshare-pid", "--bind", out.path(), "/out", "--sync-fd", "5"},
                            sh("exec 6>&-; touch /out/started; while [ ! -e /out/go ]; do sleep 0.02; done")),
        {{5, sync.write.get()}, {6, stray.write.get()}});
    sync.write.reset();
    stray.write.reset();
    ASSERT_TRUE(eventually([&] { return exists(out / "started"); }));
    EXPECT_TRUE(eventually([&] { return hung_up(stray.read.get()); })) << "fd 6 is held outside the command";
    ::kill(b.pid(), SIGKILL);
    ASSERT_TRUE(eventually([&] { return !b.running(); }));
    EXPECT_FALSE(hung_up(sync.read.get()));  // the sync fd it keeps
    write_file(out / "go", "");
    EXPECT_TRUE(eventually([&] { return hung_up(sync.read.get()); }));
}

TEST(SyncFd, WithAsPid1TheCommandKeepsIt)
{
    Pipe sync;
    Result r = BackgroundCommand(
                   minimal_cocoon_argv({"--unshare-pid", "--as-pid-1", "--sync-fd", "5"}, sh(fd_open_test(5, '>'))),
                   {{5, sync.write.get()}})
                   .finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "fd-open\n") << r.err;
}

TEST(SyncFd, BadFd)
{
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--sync-fd", "7"}, {"true"})).finish(),
                   {"--sync-fd 7", "Bad file descriptor"});
    expect_refused(BackgroundCommand(minimal_cocoon_argv({"--block-fd", "7"}, {"true"})).finish(),
                   {"--block-fd 7", "Bad file descriptor"});
}

// --- --lock-file ---

void check_lock(const std::vector<std::string>& extra)
{
    TempDir out;
    const std::string lock = out / "lockme";
    write_file(lock, "");
    BackgroundCommand b(minimal_cocoon_argv(args({extra, {"--bind", out.path(), "/out", "--lock-file", "/out/lockme"}}),
                                            sh("touch /out/started; while [ ! -e /out/go ]; do sleep 0.02; done")));
    EXPECT_TRUE(eventually([&] { return exists(out / "started"); }));
    EXPECT_TRUE(locked_by_other(lock)) << "no lock while the sandbox runs";
    write_file(out / "go", "");
    Result r = b.finish();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(locked_by_other(lock)) << "the lock outlived the sandbox";
}

TEST(LockFile, HeldWhileTheSandboxRunsWithPidNamespace)
{
    check_lock({"--unshare-pid"});
}

TEST(LockFile, HeldWhileTheSandboxRunsWithoutPidNamespace)
{
    check_lock({});
}

TEST(LockFile, MissingFileIsRefused)
{
    TempDir out;
    Result r = in_sandbox({"--bind", out.path(), "/out", "--lock-file", "/out/missing"}, {"true"});
    expect_refused(r, {"/out/missing", "No such file or directory"});
    EXPECT_FALSE(exists(out / "missing"));
}

// --- the same command lines under /usr/bin/bwrap ---

class Bwrap : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (std::string why = bwrap_unusable(); !why.empty())
            GTEST_SKIP() << why;
    }

    // The same options and command, once under each; returns {cocoon, bwrap}.
    static std::pair<Result, Result> both(const std::vector<std::string>& options,
                                          const std::vector<std::string>& command,
                                          const std::vector<std::function<UniqueFd()>>& fds)
    {
        auto one = [&](const std::string& bin) {
            std::vector<UniqueFd> held;
            std::vector<std::pair<int, int>> map;
            for (size_t i = 0; i < fds.size(); ++i) {
                held.push_back(fds[i]());
                map.emplace_back(static_cast<int>(5 + i), held.back().get());
            }
            return BackgroundCommand(args({{bin}, minimal_root(), options, command}), map).finish();
        };
        return {one(cocoon_bin()), one(kBwrap)};
    }
};

TEST_F(Bwrap, ArgsGiveTheSameResult)
{
    auto [c, b] = both({"--setenv", "ORDER", "before", "--args", "5"}, sh("echo $FROM_FILE $ORDER"),
                       {[] { return pipe_holding("--setenv\0FROM_FILE\0yes\0--setenv\0ORDER\0file"s); }});
    EXPECT_EQ(c.code, 0) << c.err;
    EXPECT_EQ(c.out, "yes file\n");
    EXPECT_EQ(c.code, b.code);
    EXPECT_EQ(c.out, b.out);
}

TEST_F(Bwrap, SeccompGivesTheSameResult)
{
    auto [c, b] = both({"--tmpfs", "/tmp", "--add-seccomp-fd", "5", "--add-seccomp-fd", "6"}, sh(kMkdirAndLink),
                       {[] { return pipe_holding(mkdir_filter()); }, [] { return pipe_holding(symlink_filter()); }});
    EXPECT_EQ(c.code, 0) << c.err;
    EXPECT_TRUE(contains(c.out, "Operation not permitted")) << c.out;
    EXPECT_EQ(c.code, b.code);
    EXPECT_EQ(c.out, b.out);
}

TEST_F(Bwrap, BadFdsFailTheSame)
{
    for (const char* option : {"--args", "--seccomp", "--add-seccomp-fd"}) {
        auto [c, b] = both({option, "7"}, {"true"}, {});
        EXPECT_EQ(c.code, 1) << option << ": " << c.err;
        EXPECT_EQ(b.code, 1) << option << ": " << b.err;
        EXPECT_TRUE(contains(c.err, "Bad file descriptor")) << c.err;
        EXPECT_TRUE(contains(b.err, "Bad file descriptor")) << b.err;
    }
}

}  // namespace
}  // namespace cocoon::test
