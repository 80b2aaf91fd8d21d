// The userspace openat2 (base/resolve.h) against the kernel's, side by side: hostile trees in a
// temp dir (absolute and relative links, ".." chains above the root, loops, /proc magic links,
// dangling links with O_CREAT, long names), every resolve and open flag combination cocoon uses
// and a few more; both must answer the same file (or make the same one) or the same errno. A
// thread swapping a directory with RENAME_EXCHANGE during walks must never lead either outside.
// No privilege needed.
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/resolve.h"
#include "tests/support/process.h"

namespace cocoon::sys {
namespace {

using test::TempDir;

int kernel_openat2(int dirfd, const std::string& path, int flags, unsigned long long resolve, mode_t mode,
                   UniqueFd& out)
{
    open_how how{};
    how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
    how.mode = mode;
    how.resolve = resolve;
    for (;;) {
        long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
        if (fd >= 0) {
            out.reset(static_cast<int>(fd));
            return 0;
        }
        if (errno != EAGAIN && errno != EINTR)
            return -errno;
    }
}

bool kernel_has_openat2()
{
    return ::syscall(SYS_openat2, -1, nullptr, nullptr, 0) < 0 && errno != ENOSYS;
}

void mkdir_or_fail(const std::string& path)
{
    ASSERT_EQ(::mkdir(path.c_str(), 0755), 0) << path << ": " << std::strerror(errno);
}

void link_or_fail(const std::string& target, const std::string& path)
{
    ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0) << path << ": " << std::strerror(errno);
}

const std::string kLong(255, 'n');  // NAME_MAX

// fds the /proc links name: the same numbers in every tree. The file is a scratch one: an
// unscoped walk follows the links and may truncate it.
struct ProcFds {
    TempDir scratch;
    UniqueFd file, dir{::open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC)};
    UniqueFd pipe_read, pipe_write;
    mutable std::set<std::string> built;  // what build() makes, by path under the temp dir
    ProcFds()
    {
        test::write_file(scratch / "file", "scratch");
        file.reset(::open((scratch / "file").c_str(), O_RDONLY | O_CLOEXEC));
        int p[2];
        if (::pipe2(p, O_CLOEXEC) == 0) {
            pipe_read.reset(p[0]);
            pipe_write.reset(p[1]);
        }
    }
};

// Every entry under t (links not followed): its path under t, and its device and inode.
std::map<std::string, std::pair<dev_t, ino_t>> tree(const std::string& t)
{
    std::map<std::string, std::pair<dev_t, ino_t>> out;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(t)) {
        struct stat st;
        if (::lstat(entry.path().c_str(), &st) == 0)
            out[entry.path().string().substr(t.size())] = {st.st_dev, st.st_ino};
    }
    return out;
}

// T/outside holds what no scoped walk may reach; T/root is the root.
void build(const std::string& t, const ProcFds& fds)
{
    const std::string r = t + "/root";
    for (const char* d : {"/outside", "/outside/dir", "/root", "/root/dir", "/root/dir/sub", "/root/empty"})
        mkdir_or_fail(t + d);
    test::write_file(t + "/outside/secret", "secret");
    test::write_file(r + "/file", "file");
    test::write_file(r + "/dir/sub/deep", "deep");
    mkdir_or_fail(r + "/" + kLong);
    test::write_file(r + "/" + kLong + "/file", "long");
    const std::map<std::string, std::string> links = {
        {"abs_file", "/file"},
        {"abs_dir", "/dir"},
        {"rel_file", "dir/../file"},
        {"rel_dir", "dir/sub"},
        {"dir/sub/up", "../.."},
        {"dir/sub/up_file", "../../file"},
        {"dotdot_escape", "../../../../../../outside/secret"},
        {"dotdot_dir", "../outside"},
        {"abs_escape", "/../../outside/secret"},
        {"to_root", "/"},
        {"to_dot", "."},
        {"loop_a", "loop_b"},
        {"loop_b", "loop_a"},
        {"self_loop", "self_loop"},
        {"proc_abs", "/proc/self/fd/" + std::to_string(fds.file.get())},
        {"proc_rel", "../../../../../../../../proc/self/fd/" + std::to_string(fds.file.get())},
        {"proc_rel_dir", "../../../../../../../../proc/self/fd/" + std::to_string(fds.dir.get())},
        {"proc_rel_pipe", "../../../../../../../../proc/self/fd/" + std::to_string(fds.pipe_read.get())},
        {"proc_rel_exe", "../../../../../../../../proc/self/exe"},
        {"proc_rel_mounts", "../../../../../../../../proc/mounts"},
        {"dangling_in", "/made_in"},
        {"dangling_rel", "dir/made_rel"},
        {"dangling_out", "../outside/made_out"},
        {"dangling_abs_out", "/../outside/made_abs"},
        {"dangling_dir", "/nodir/x"},
        {"dangling_slash", "made_slash/"},
        {"to_long", kLong + "/file"},
        {"slashes", "//dir///sub//deep"},
    };
    for (const auto& [name, target] : links)
        link_or_fail(target, r + "/" + name);
    // 40 links in a row resolve; 41 do not (the kernel's MAXSYMLINKS).
    for (int i = 0; i < 41; ++i)
        link_or_fail("c" + std::to_string(i + 1), r + "/c" + std::to_string(i));
    link_or_fail("file", r + "/c41");
    if (fds.built.empty())
        for (const auto& [path, id] : tree(t))
            fds.built.insert(path);
}

const std::vector<std::string> kPaths = {
    "",
    ".",
    "..",
    "/",
    "file",
    "/file",
    "../file",
    "../../../file",
    "dir/sub/../../file",
    "dir/sub/deep",
    "dir/",
    "dir/sub/deep/",
    "dir//sub///deep",
    "file/",
    "file/x",
    "file/..",
    "missing",
    "missing/x",
    "abs_file",
    "abs_dir",
    "abs_dir/sub/deep",
    "abs_dir/../file",
    "abs_dir/../../../outside/secret",
    "rel_file",
    "rel_file/",
    "rel_dir/deep",
    "rel_dir/../sub/../../file",
    "dir/sub/up",
    "dir/sub/up/file",
    "dir/sub/up/../../outside/secret",
    "dir/sub/up_file",
    "dotdot_escape",
    "dotdot_dir",
    "dotdot_dir/secret",
    "abs_escape",
    "to_root",
    "to_root/..",
    "to_root/../../outside/secret",
    "to_dot/to_dot/file",
    "loop_a",
    "loop_a/x",
    "self_loop",
    "c1",
    "c0",
    "proc_abs",
    "proc_rel",
    "proc_rel_dir",
    "proc_rel_dir/x",
    "proc_rel_pipe",
    "proc_rel_exe",
    "proc_rel_mounts",
    "dangling_in",
    "dangling_rel",
    "dangling_out",
    "dangling_abs_out",
    "dangling_dir",
    "dangling_slash",
    "made_new",
    "dir/made_new",
    "missing/made_new",
    "empty/",
    kLong + "/file",
    "to_long",
    std::string(256, 'n'),
    std::string(4096, 'x'),
};

// Every resolve set cocoon passes (mount/apply.cc, ns/monitor/login_file.cc), and the other scopes.
const std::vector<unsigned long long> kResolves = {
    RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
    RESOLVE_NO_SYMLINKS,
    0,
    RESOLVE_IN_ROOT,
    RESOLVE_BENEATH,
    RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_MAGICLINKS,
};

struct Open {
    int flags;
    mode_t mode;
};

// Every open cocoon makes through openat2, and plain reads and creates besides.
const std::vector<Open> kOpens = {
    {O_PATH, 0},
    {O_PATH | O_DIRECTORY, 0},
    {O_PATH | O_NOFOLLOW, 0},
    {O_PATH | O_DIRECTORY | O_NOFOLLOW, 0},
    {O_RDONLY, 0},
    {O_RDONLY | O_DIRECTORY, 0},
    {O_RDONLY | O_NOFOLLOW, 0},
    {O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_NONBLOCK, 0644},
    {O_WRONLY | O_CREAT | O_EXCL, 0600},
};

// "errno E", or "at PLACE" (its path under t, for a file of the tree, else its device and inode),
// and what was made in the tree (which is then removed, so the next case starts from the tree
// as built).
std::string outcome(int err, const UniqueFd& fd, const std::string& t, const ProcFds& fds, bool may_make)
{
    // An open without O_CREAT makes nothing: the tree as built tells where its answer is.
    static std::map<std::string, std::map<std::string, std::pair<dev_t, ino_t>>> as_built;
    auto known = as_built.find(t);
    if (may_make || known == as_built.end())
        known = as_built.insert_or_assign(t, tree(t)).first;
    const auto& entries = known->second;
    std::string text;
    struct stat want {};
    if (err)
        text = std::string("errno ") + std::strerror(-err);
    else if (::fstat(fd.get(), &want) < 0)
        text = std::string("fstat: ") + std::strerror(errno);
    else
        text = "at " + std::to_string(want.st_dev) + ":" + std::to_string(want.st_ino);
    for (const auto& [path, id] : entries)
        if (!err && id == std::pair{want.st_dev, want.st_ino})
            text = "at " + path;
    for (const auto& [path, id] : entries)
        if (!fds.built.count(path)) {
            text += "; made " + path;
            ::unlink((t + path).c_str());
        }
    return text;
}

using OpenFn = int (*)(int, const std::string&, int, unsigned long long, mode_t, UniqueFd&);

// One case, on the tree at t.
std::string try_case(OpenFn open, const ProcFds& fds, const std::string& t, const std::string& path,
                     unsigned long long resolve, const Open& o, bool from_proc)
{
    UniqueFd root(::open(from_proc ? "/proc" : (t + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd fd;
    int err = open(root.get(), path, o.flags, resolve, o.mode, fd);
    return outcome(err, fd, t, fds, o.flags & O_CREAT);
}

std::string describe(const std::string& path, unsigned long long resolve, const Open& o)
{
    char text[128];
    std::snprintf(text, sizeof text, " (resolve %#llx, flags %#o, mode %#o)", resolve, o.flags, o.mode);
    return "path \"" + (path.size() > 64 ? path.substr(0, 64) + "..." : path) + "\"" + text;
}

TEST(Openat2Fallback, AnswersAsTheKernelOnHostileTrees)
{
    if (!kernel_has_openat2())
        GTEST_SKIP() << "this kernel has no openat2 to compare with";
    ProcFds fds;
    ASSERT_TRUE(fds.file && fds.dir && fds.pipe_read);
    TempDir shared;
    build(shared.path(), fds);
    int cases = 0;
    // Unscoped walks that may create a file: only paths that stay in the temp dir (an absolute
    // path or link would make the file in the host's root).
    const std::set<std::string> creatable = {"made_new",     "dir/made_new", "missing/made_new",
                                             "dangling_rel", "dangling_out", "rel_file",
                                             "file",         "dir/",         "loop_a"};
    for (const std::string& path : kPaths)
        for (unsigned long long resolve : kResolves)
            for (const Open& o : kOpens) {
                if ((o.flags & O_CREAT) && !(resolve & (RESOLVE_IN_ROOT | RESOLVE_BENEATH)) && !creatable.count(path))
                    continue;
                EXPECT_EQ(try_case(openat2_userspace, fds, shared.path(), path, resolve, o, false),
                          try_case(kernel_openat2, fds, shared.path(), path, resolve, o, false))
                    << describe(path, resolve, o);
                ++cases;
            }
    EXPECT_GT(cases, 3000);
}

// /proc itself as the root: its plain links (self, thread-self, mounts) are followed, its magic
// links (fds, exe, cwd, root, namespaces) refused.
TEST(Openat2Fallback, AnswersAsTheKernelOnProcLinks)
{
    if (!kernel_has_openat2())
        GTEST_SKIP() << "this kernel has no openat2 to compare with";
    ProcFds fds;
    TempDir shared;
    build(shared.path(), fds);
    const std::string tid = std::to_string(::gettid());
    std::vector<std::string> paths = {"self",
                                      "self/",
                                      "thread-self",
                                      "mounts",
                                      "net",
                                      "self/fd",
                                      "self/exe",
                                      "self/cwd",
                                      "self/root",
                                      "self/root/etc",
                                      "self/ns/mnt",
                                      "self/cwd/..",
                                      "/proc/self/fd/0",
                                      "self/task/" + tid + "/fd",
                                      "thread-self/exe",
                                      "1/exe",
                                      "1/root/etc",
                                      "self/map_files"};
    for (int fd : {fds.file.get(), fds.dir.get(), fds.pipe_read.get()}) {
        paths.push_back("self/fd/" + std::to_string(fd));
        paths.push_back("thread-self/fd/" + std::to_string(fd));
        paths.push_back("self/fd/" + std::to_string(fd) + "/x");
    }
    for (const std::string& path : paths)
        for (unsigned long long resolve : kResolves)
            for (const Open& o : kOpens) {
                if (o.flags & O_CREAT)
                    continue;
                EXPECT_EQ(try_case(openat2_userspace, fds, shared.path(), path, resolve, o, true),
                          try_case(kernel_openat2, fds, shared.path(), path, resolve, o, true))
                    << describe(path, resolve, o);
            }
}

// A thread swaps T/root/a (a directory inside the root) with T/out (one outside it) with
// RENAME_EXCHANGE while both resolve paths that climb out of a with "..": every answer is the
// file inside the root, never T/secret, whichever directory the walk entered.
TEST(Openat2Fallback, ARenameRaceNeverLeadsOutside)
{
    if (!kernel_has_openat2())
        GTEST_SKIP() << "this kernel has no openat2 to compare with";
    TempDir t;
    for (const char* d : {"/root", "/root/a", "/root/a/b", "/out", "/out/b"})
        mkdir_or_fail(t.path() + d);
    test::write_file(t / "secret", "outside");
    test::write_file(t / "root/secret", "inside");
    link_or_fail("a/b/../../..", t / "root/up");
    struct stat inside;
    ASSERT_EQ(::stat((t / "root/secret").c_str(), &inside), 0);
    UniqueFd root(::open((t / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));

    std::atomic<bool> stop{false};
    std::atomic<long> swaps{0};
    std::thread swapper([&] {
        const std::string a = t / "root/a", out = t / "out";
        while (!stop)
            if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0)
                ++swaps;
    });
    std::map<std::string, int> answers;
    for (OpenFn open : {openat2_userspace, kernel_openat2})
        for (int i = 0; i < 4000; ++i)
            for (const char* path : {"a/b/../../../secret", "a/b/../../../../secret", "up/secret", "a/../secret"}) {
                UniqueFd fd;
                int err = open(root.get(), path, O_RDONLY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 0, fd);
                struct stat st {};
                ASSERT_TRUE(err == 0 && ::fstat(fd.get(), &st) == 0)
                    << path << ": " << std::strerror(-err) << (open == kernel_openat2 ? " (kernel)" : " (userspace)");
                EXPECT_TRUE(st.st_dev == inside.st_dev && st.st_ino == inside.st_ino)
                    << path << " led outside the root" << (open == kernel_openat2 ? " (kernel)" : " (userspace)");
                ++answers[open == kernel_openat2 ? "kernel" : "userspace"];
            }
    stop = true;
    swapper.join();
    EXPECT_GT(swaps, 1000) << "the swapping thread hardly ran; the race was not exercised";
    EXPECT_EQ(answers["userspace"], 16000);
}

// The same with a link swapped in for a directory: T/root/s is a directory or a link to "../../..",
// in turns. Opening s/secret gives the file in it or, through the link, the root's; making s/new
// makes it in one or the other; never anything outside the root.
TEST(Openat2Fallback, ALinkSwappedForADirectoryNeverLeadsOutside)
{
    if (!kernel_has_openat2())
        GTEST_SKIP() << "this kernel has no openat2 to compare with";
    TempDir t;
    for (const char* d : {"/root", "/root/s"})
        mkdir_or_fail(t.path() + d);
    test::write_file(t / "secret", "outside");
    test::write_file(t / "root/secret", "inside");
    test::write_file(t / "root/s/secret", "inside s");
    link_or_fail("../../..", t / "root/l");
    struct stat in_root, in_s;
    ASSERT_EQ(::stat((t / "root/secret").c_str(), &in_root), 0);
    ASSERT_EQ(::stat((t / "root/s/secret").c_str(), &in_s), 0);
    UniqueFd root(::open((t / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));

    std::atomic<bool> stop{false};
    std::atomic<long> swaps{0};
    std::thread swapper([&] {
        const std::string dir = t / "root/s", link = t / "root/l";
        while (!stop)
            if (::renameat2(AT_FDCWD, dir.c_str(), AT_FDCWD, link.c_str(), RENAME_EXCHANGE) == 0)
                ++swaps;
    });
    for (OpenFn open : {openat2_userspace, kernel_openat2})
        for (int i = 0; i < 4000; ++i) {
            const char* who = open == kernel_openat2 ? " (kernel)" : " (userspace)";
            UniqueFd fd;
            int err = open(root.get(), "s/secret", O_RDONLY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 0, fd);
            struct stat st {};
            // ENOENT: s was neither while the walk looked (between the two renames of an exchange
            // it is always one or the other, so this is not expected either).
            ASSERT_TRUE(err == 0 && ::fstat(fd.get(), &st) == 0) << std::strerror(-err) << who;
            EXPECT_TRUE((st.st_dev == in_root.st_dev && st.st_ino == in_root.st_ino) ||
                        (st.st_dev == in_s.st_dev && st.st_ino == in_s.st_ino))
                << "s/secret led outside the root" << who;
            err = open(root.get(), "s/new", O_WRONLY | O_CREAT, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, 0600, fd);
            EXPECT_EQ(err, 0) << std::strerror(-err) << who;
        }
    stop = true;
    swapper.join();
    EXPECT_GT(swaps, 1000) << "the swapping thread hardly ran; the race was not exercised";
    EXPECT_FALSE(test::exists(t / "new")) << "a file was made outside the root";
    // The directory ends at s or at l.
    EXPECT_TRUE(test::exists(t / "root/new") || test::exists(t / "root/s/new") || test::exists(t / "root/l/new"));
}

// What cocoon's flags rely on, named: a dangling link never creates a file outside the root,
// and a flag the walk does not emulate is refused, not ignored.
TEST(Openat2Fallback, RefusesWhatItCannotKeep)
{
    TempDir t;
    mkdir_or_fail(t / "root");
    link_or_fail("../made", t / "root/dangling");
    UniqueFd root(::open((t / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    UniqueFd fd;
    ASSERT_EQ(openat2_userspace(root.get(), "dangling", O_WRONLY | O_CREAT, RESOLVE_IN_ROOT, 0600, fd), 0);
    EXPECT_TRUE(test::exists(t / "root/made"));
    EXPECT_FALSE(test::exists(t / "made"));
    EXPECT_EQ(openat2_userspace(root.get(), "x", O_PATH, RESOLVE_NO_XDEV, 0, fd), -ENOSYS);
    EXPECT_EQ(openat2_userspace(root.get(), "x", O_PATH, RESOLVE_CACHED, 0, fd), -ENOSYS);
    EXPECT_EQ(openat2_userspace(root.get(), "x", O_PATH, RESOLVE_IN_ROOT | RESOLVE_BENEATH, 0, fd), -EINVAL);
}

}  // namespace
}  // namespace cocoon::sys
