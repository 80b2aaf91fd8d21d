// Links planted by an earlier run in a directory the sandbox can write must
// not turn a later bind into a view of the host (issue 13): WT/.git replaced
// by a link to /, to a home, to a parent, used as a bind source or overlay
// layer, also while a writer swaps the link and the real directory. Each case
// runs as the caller and, for root, again with --cap-drop ALL; CI runs the
// suite a second time unprivileged. The sandboxed command tries to read a
// secret the test left on the host: it must never print it.
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "tests/e2e/e2e.h"
#include "tests/e2e/no_openat2.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// The ways a capable caller runs the same command line: as it is, and (root
// only) with every capability dropped.
std::vector<std::vector<std::string>> caller_modes()
{
    if (is_root())
        return {{}, {"--cap-drop", "ALL"}};
    return {{}};
}

// A worktree WT whose .git the test replaces, and a secret elsewhere on the
// host that no sandbox below is given.
struct Worktree {
    TempDir wt, host;
    std::string secret = unique_marker("host-secret");
    std::string secret_path = host / "secret";

    Worktree() { write_file(secret_path, secret + "\n"); }
    std::string git() const { return wt / ".git"; }
    void plant(const std::string& target) const { ASSERT_EQ(::symlink(target.c_str(), git().c_str()), 0) << git(); }
    // The orchestrator's usual line: WT read-write, WT/.git read-only.
    std::vector<std::string> binds() const { return {"--bind", wt.path(), wt.path(), "--ro-bind", git(), git()}; }
    // Reads the secret wherever a leak could put it: at its own path (the
    // host's root stacked on the sandbox's) or under WT/.git.
    std::vector<std::string> probe() const
    {
        // 2>&1: the minimal root has no /dev/null to send errors to.
        return sh("cat " + secret_path + " " + git() + secret_path + " " + git() + "/secret 2>&1; true");
    }
};

// Refused (see tests/support/refusal.h), and the secret is not in what the command printed.
void expect_refused(const Result& r, const Worktree& w, const std::string& why)
{
    EXPECT_FALSE(contains(r.out, w.secret)) << "the host's secret reached the sandbox";
    test::expect_refused(r, {why});
}

// The probe would see the secret if the host's root were in view: run it in
// a sandbox that is given the whole host, read-only.
TEST(PlantedLink, TheProbeFindsAHostInView)
{
    Worktree w;
    w.plant("/");
    Result r = cocoon(args({{"--ro-bind", "/", "/"}, w.probe()}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, w.secret)) << r.out;
}

TEST(PlantedLink, ToTheHostRootIsRefused)
{
    Worktree w;
    w.plant("/");
    for (const auto& mode : caller_modes()) {
        auto before = mount_table();
        Result r = in_sandbox(args({mode, w.binds()}), w.probe());
        expect_refused(r, w, "leads through a symbolic link to the sandbox's root");
        EXPECT_EQ(mount_table(), before);
    }
}

TEST(PlantedLink, ToARelativeParentIsRefused)
{
    for (const char* target : {"..", "../..", "./../."}) {
        Worktree w;
        w.plant(target);
        for (const auto& mode : caller_modes()) {
            Result r = in_sandbox(args({mode, w.binds()}), w.probe());
            expect_refused(r, w, "leads through a symbolic link to ");
        }
    }
}

// The orchestrator gives the agent a fresh home at the caller's home path;
// the link names that path, which the sandbox has (as a tmpfs), so the
// destination resolves, but to another file than the source.
TEST(PlantedLink, ToAHomeIsRefused)
{
    Worktree w;
    TempDir home;
    write_file(home / "id_ed25519", w.secret + "\n");
    w.plant(home.path());
    for (const auto& mode : caller_modes()) {
        Result r = in_sandbox(args({mode, {"--tmpfs", home.path()}, w.binds()}),
                              sh("cat " + w.git() + "/id_ed25519 " + home.path() + "/id_ed25519 2>&1; true"));
        expect_refused(r, w, "leads through a symbolic link to another file than " + w.git() + " is in the sandbox");
    }
    // Without the home in the sandbox, the destination cannot even be made.
    Result r = in_sandbox(w.binds(), w.probe());
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_FALSE(contains(r.out, w.secret));
}

// WT bound elsewhere: the destination is spelled differently from the source
// but reaches the same planted link.
TEST(PlantedLink, UnderAnotherSpellingIsRefused)
{
    Worktree w;
    TempDir home;
    write_file(home / "id_ed25519", w.secret + "\n");
    w.plant(home.path());
    Result r = in_sandbox({"--tmpfs", home.path(), "--bind", w.wt.path(), "/work", "--ro-bind", w.git(), "/work/.git"},
                          sh("cat /work/.git/id_ed25519 " + home.path() + "/id_ed25519 2>&1; true"));
    expect_refused(r, w, "another file than /work/.git is in the sandbox");
}

TEST(PlantedLink, AsAnOverlayLayerIsRefused)
{
    Worktree w;
    w.plant("/");
    for (const auto& mode : caller_modes()) {
        Result r = in_sandbox(
            args({mode, {"--bind", w.wt.path(), w.wt.path(), "--overlay-src", w.git(), "--tmp-overlay", w.git()}}),
            w.probe());
        expect_refused(r, w,
                       "Can't mount --tmp-overlay on " + w.git() + ": " + w.git() +
                           " leads through a symbolic link to the sandbox's root");
    }
}

// Other mount ops cannot be stacked onto the root through a link either.
TEST(PlantedLink, TmpfsOverTheRootIsRefused)
{
    Worktree w;
    w.plant("/");
    Result r = in_sandbox({"--bind", w.wt.path(), w.wt.path(), "--tmpfs", w.git()}, {"true"});
    expect_refused(r, w,
                   "Can't mount tmpfs on " + w.git() + ": " + w.git() +
                       " leads through a symbolic link to the sandbox's root");
}

// Every entry under dir, recursively (what a refused start must leave as it was).
std::set<std::string> tree(const std::string& dir)
{
    std::set<std::string> out;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
        out.insert(entry.path().string());
    return out;
}

// A link up and a name back down: WT/up -> .., so WT/up/NAME, NAME being WT's own name, is WT
// itself. A mount meant for that subdirectory would cover the directory its path is spelled
// through (the worktree, with all the orchestrator bound there).
TEST(PlantedLink, UpAndBackDownOntoADirectoryOfItsOwnPathIsRefused)
{
    Worktree w;
    const std::string up = w.wt / "up";
    ASSERT_EQ(::symlink("..", up.c_str()), 0);
    const std::string dest = up + "/" + std::filesystem::path(w.wt.path()).filename().string();
    const auto before = tree(w.wt.path());
    for (const auto& op : std::vector<std::vector<std::string>>{{"--tmpfs", dest}, {"--ro-bind", w.host.path(), dest}})
        for (const auto& mode : caller_modes()) {
            Result r = in_sandbox(args({mode, {"--bind", w.wt.path(), w.wt.path()}, op}), w.probe());
            expect_refused(r, w, dest + " leads through a symbolic link to a directory that contains it");
            EXPECT_EQ(tree(w.wt.path()), before);
        }
}

// Issue 20, item 4: run 1 planted WT/sub -> the caller's home; run 2 binds
// WT/sub/.ssh onto itself with a fresh home. On the host the source is the
// real ~/.ssh; in the sandbox the destination leads into the fresh home (or,
// with the fresh home elsewhere, to a path the sandbox does not have), where
// it does not exist. Refused before anything is made, wherever the home is.
void expect_a_link_in_the_middle_refused(const std::function<Result(const std::function<Result()>&)>& runner)
{
    Worktree w;
    TempDir home;
    ASSERT_EQ(::mkdir((home / ".ssh").c_str(), 0700), 0);
    write_file(home / ".ssh/id_ed25519", w.secret + "\n");
    const std::string sub = w.wt / "sub";
    ASSERT_EQ(::symlink(home.path().c_str(), sub.c_str()), 0);
    const auto wt_before = tree(w.wt.path()), home_before = tree(home.path());
    for (const std::string& fresh : {home.path(), std::string("/home/agent")})
        for (const auto& mode : caller_modes()) {
            Result r = runner([&] {
                return in_sandbox(args({mode,
                                        {"--fresh-home", fresh, "--bind", w.wt.path(), w.wt.path(), "--ro-bind",
                                         sub + "/.ssh", sub + "/.ssh"}}),
                                  sh("cat " + sub + "/.ssh/id_ed25519 " + fresh + "/.ssh/id_ed25519 2>&1; true"));
            });
            expect_refused(r, w, "leads through a symbolic link, and so does " + sub + "/.ssh");
            EXPECT_EQ(tree(w.wt.path()), wt_before);
            EXPECT_EQ(tree(home.path()), home_before);
        }
}

TEST(PlantedLink, ALinkInTheMiddleOfASourceIntoAFreshHomeIsRefused)
{
    expect_a_link_in_the_middle_refused([](const std::function<Result()>& start) { return start(); });
}

// The honest case still works: .git a link to a real directory beside it,
// which the sandbox sees at the same place; it becomes read-only.
TEST(PlantedLink, ALinkToTheSameFileIsBound)
{
    Worktree w;
    ASSERT_EQ(::mkdir((w.wt / ".git-real").c_str(), 0755), 0);
    write_file(w.wt / ".git-real/HEAD", "ref: main\n");
    w.plant(".git-real");
    for (const auto& mode : caller_modes()) {
        Result r = in_sandbox(args({mode, w.binds()}),
                              sh("cat " + w.git() + "/HEAD; touch " + w.git() + "/x 2>&1 | grep -c Read-only"));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "ref: main\n1\n");
    }
}

TEST(PlantedLink, NoFollowSourcesRefusesAnyLink)
{
    Worktree w;
    ASSERT_EQ(::mkdir((w.wt / ".git-real").c_str(), 0755), 0);
    w.plant(".git-real");
    for (const auto& mode : caller_modes()) {
        Result r = in_sandbox(args({{"--no-follow-sources"}, mode, w.binds()}), w.probe());
        expect_refused(r, w,
                       "Can't find source path " + w.git() +
                           ": a component is a symbolic link (refused by --no-follow-sources)");
        r = in_sandbox(args({{"--no-follow-sources", "--overlay-src", w.git(), "--tmp-overlay", "/o"}, mode}),
                       {"true"});
        expect_refused(r, w, "Can't find source path " + w.git() + ": a component is a symbolic link");
    }
    // A link higher up counts too; a real directory is bound as usual.
    TempDir outer;
    ASSERT_EQ(::symlink(w.wt.path().c_str(), (outer / "wt").c_str()), 0);
    Result r = in_sandbox({"--no-follow-sources", "--ro-bind", outer / "wt", "/wt"}, {"true"});
    expect_refused(r, w, "Can't find source path " + outer / "wt");
    r = in_sandbox({"--no-follow-sources", "--ro-bind", w.wt.path(), "/wt"}, sh("ls -A /wt"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, ".git\n.git-real\n");
}

// A writer (here a thread of the test; in the attack, an agent in another
// sandbox on the same worktree) swaps WT/.git between the real directory and
// a link to / with RENAME_EXCHANGE while sandboxes start. Every start must
// either be refused or bind the real directory; none may see the host.
TEST(PlantedLink, RaceWithASwappingWriterNeverExposesTheHost)
{
#if defined(COCOON_SANITIZED)
    // Under ASan, about one run in five beside load had one start that never ended (killed by
    // run()'s 20 s timeout), in CI and here; not seen in the other builds (8 runs here beside
    // CI). Its cause is not found yet (closing note of 2026-12-05); the other builds run it.
    GTEST_SKIP() << "one start in ~5 runs hangs under ASan only (cause open); run by the other builds";
#endif
    Worktree w;
    ASSERT_EQ(::mkdir(w.git().c_str(), 0755), 0);
    write_file(w.git() + "/HEAD", "ref: real\n");
    const std::string link = w.wt / ".git-link";
    ASSERT_EQ(::symlink("/", link.c_str()), 0);

    std::atomic<bool> stop{false};
    std::atomic<long> swaps{0};
    std::thread swapper([&] {
        while (!stop) {
            if (::renameat2(AT_FDCWD, w.git().c_str(), AT_FDCWD, link.c_str(), RENAME_EXCHANGE) == 0)
                ++swaps;
        }
    });
    int refused = 0, bound = 0;
    for (const auto& mode : caller_modes())
        for (int i = 0; i < 25; ++i) {
            Result r = in_sandbox(args({mode, w.binds()}), sh("cat " + w.git() + "/HEAD 2>&1; " + w.probe()[2]));
            EXPECT_FALSE(contains(r.out, w.secret)) << "start " << i << " exposed the host";
            if (r.code == 0) {
                // The real directory, or nothing: renaming a mount point away
                // from another mount namespace detaches the mount (Linux
                // allows it since 3.18), and the sandbox then sees the link,
                // which leads to its own root.
                EXPECT_TRUE(r.out.rfind("ref: real\n", 0) == 0 || contains(r.out, "HEAD: No such file")) << r.out;
                ++bound;
            } else {
                EXPECT_EQ(r.code, 1) << r.err;
                EXPECT_TRUE(r.out.empty()) << r.out;
                ++refused;
            }
        }
    stop = true;
    swapper.join();
    EXPECT_GT(swaps, 100) << "the writer hardly ran; the race was not exercised";
    EXPECT_GT(refused, 0) << "no start met the link (bound " << bound << ")";
}

// The same attacks where openat2 answers ENOSYS (tests/e2e/no_openat2.h): cocoon resolves every
// destination and source with its userspace walk, which must refuse them alike.
TEST(PlantedLinkWithoutOpenat2, LinksToTheRootAParentOrAHomeAreRefused)
{
    for (const char* target : {"/", "..", "../..", "./../."}) {
        Worktree w;
        w.plant(target);
        for (const auto& mode : caller_modes()) {
            auto before = mount_table();
            Result r = without_openat2([&] { return in_sandbox(args({mode, w.binds()}), w.probe()); });
            expect_refused(r, w, "leads through a symbolic link to ");
            EXPECT_EQ(mount_table(), before);
        }
        Result r = without_openat2([&] {
            return in_sandbox({"--bind", w.wt.path(), w.wt.path(), "--tmpfs", w.git()}, {"true"});
        });
        expect_refused(r, w, "Can't mount tmpfs on " + w.git() + ": " + w.git() + " leads through a symbolic link to ");
    }
    Worktree w;
    TempDir home;
    write_file(home / "id_ed25519", w.secret + "\n");
    w.plant(home.path());
    for (const auto& mode : caller_modes()) {
        Result r = without_openat2([&] {
            return in_sandbox(args({mode, {"--tmpfs", home.path()}, w.binds()}),
                              sh("cat " + w.git() + "/id_ed25519 " + home.path() + "/id_ed25519 2>&1; true"));
        });
        expect_refused(r, w, "leads through a symbolic link to another file than " + w.git() + " is in the sandbox");
    }
}

TEST(PlantedLinkWithoutOpenat2, ALinkInTheMiddleOfASourceIntoAFreshHomeIsRefused)
{
    expect_a_link_in_the_middle_refused(without_openat2);
}

TEST(PlantedLinkWithoutOpenat2, ALinkToTheSameFileIsBoundAndNoFollowSourcesRefusesAnyLink)
{
    Worktree w;
    ASSERT_EQ(::mkdir((w.wt / ".git-real").c_str(), 0755), 0);
    write_file(w.wt / ".git-real/HEAD", "ref: main\n");
    w.plant(".git-real");
    for (const auto& mode : caller_modes()) {
        Result r = without_openat2([&] {
            return in_sandbox(args({mode, w.binds()}),
                              sh("cat " + w.git() + "/HEAD; touch " + w.git() + "/x 2>&1 | grep -c Read-only"));
        });
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "ref: main\n1\n");
        r = without_openat2([&] { return in_sandbox(args({{"--no-follow-sources"}, mode, w.binds()}), w.probe()); });
        expect_refused(r, w,
                       "Can't find source path " + w.git() +
                           ": a component is a symbolic link (refused by --no-follow-sources)");
    }
}

// A destination planted as a link in a directory the sandbox's own tmpfs holds, and files made
// through a dangling link: --file, --symlink and --dir stay inside the new root.
TEST(PlantedLinkWithoutOpenat2, DanglingLinksMakeFilesInsideTheRoot)
{
    Worktree w;
    ASSERT_EQ(::symlink("../../../../../../../../made-by-cocoon", (w.wt / "dangling").c_str()), 0);
    Result r = without_openat2([&] {
        return in_sandbox({"--bind", w.wt.path(), "/work", "--file", "0", "/work/dangling"}, sh("cat /made-by-cocoon"));
    });
    // bwrap's rule: --file writes through an existing link, here resolved inside the new root.
    EXPECT_FALSE(exists("/made-by-cocoon")) << "a file was made on the host's root";
    EXPECT_FALSE(exists(w.wt.path() + "/../made-by-cocoon"));
    EXPECT_EQ(r.code, 0) << r.err;
}

TEST(PlantedLinkWithoutOpenat2, RaceWithASwappingWriterNeverExposesTheHost)
{
#if defined(COCOON_SANITIZED)
    // without_openat2 forks a child that runs cocoon while the swapper thread runs: in the ASan
    // runtime that child can block forever on a lock the thread held at the fork (seen in CI).
    // The other builds run it; the race without openat2 is also tried by the unit test of the walk.
    GTEST_SKIP() << "forking from a threaded test process deadlocks in the ASan runtime; run by the other builds";
#endif
    Worktree w;
    ASSERT_EQ(::mkdir(w.git().c_str(), 0755), 0);
    write_file(w.git() + "/HEAD", "ref: real\n");
    const std::string link = w.wt / ".git-link";
    ASSERT_EQ(::symlink("/", link.c_str()), 0);
    std::atomic<bool> stop{false};
    std::atomic<long> swaps{0};
    std::thread swapper([&] {
        while (!stop)
            if (::renameat2(AT_FDCWD, w.git().c_str(), AT_FDCWD, link.c_str(), RENAME_EXCHANGE) == 0)
                ++swaps;
    });
    int refused = 0;
    for (const auto& mode : caller_modes())
        for (int i = 0; i < 15; ++i) {
            Result r = without_openat2([&] {
                return in_sandbox(args({mode, w.binds()}), sh("cat " + w.git() + "/HEAD 2>&1; " + w.probe()[2]));
            });
            EXPECT_FALSE(contains(r.out, w.secret)) << "start " << i << " exposed the host";
            if (r.code == 0)
                EXPECT_TRUE(r.out.rfind("ref: real\n", 0) == 0 || contains(r.out, "HEAD: No such file")) << r.out;
            else
                ++refused;
        }
    stop = true;
    swapper.join();
    EXPECT_GT(swaps, 100) << "the writer hardly ran; the race was not exercised";
    EXPECT_GT(refused, 0) << "no start met the link";
}

}  // namespace
}  // namespace cocoon::test
