// End-to-end checks of --login-file: renewals in place and by rename reach SRC while the sandbox
// runs, SRC keeps its mode and owner, hostile DESTs are refused, SIGKILL during the write-back
// leaves SRC whole, two sandboxes share one SRC. Runs the binary as whoever runs the tests.
#include <fcntl.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/e2e.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// SRC's directory, bound read-only where the sandbox can watch SRC change.
constexpr const char* kWatch = "/watch";

std::vector<std::string> login(const TempDir& dir, const std::string& name = "cred")
{
    return {"--login-file", dir / name, kLoginDest, "--ro-bind", dir.path(), kWatch};
}

// sh: waits up to `tries` rounds of 10 ms (at least 3 s) for /watch/cred to hold `want`, then
// prints "LABEL MS" (the time it took) or "LABEL timeout".
std::string wait_src(const std::string& label, const std::string& want, int tries = 300)
{
    const std::string n = std::to_string(tries);
    return "t0=$(date +%s%N); i=0; while [ \"$(cat /watch/cred)\" != '" + want + "' ] && [ $i -lt " + n +
           " ]; do sleep 0.01; i=$((i+1)); done; "
           "if [ $i -lt " +
           n + " ]; then echo " + label + " $((($(date +%s%N)-t0)/1000000)); else echo " + label + " timeout; fi; ";
}

// cocoon with `args`, stdout and stderr into out_path, running on its own.
pid_t start(const std::vector<std::string>& args, const std::string& out_path)
{
    std::vector<std::string> argv = {cocoon_bin()};
    argv.insert(argv.end(), args.begin(), args.end());
    return start_logged(argv, out_path);
}

TEST(LoginFile, InPlaceAndRenameRenewalsReachSrcWhileTheSandboxRunsAndKeepItsMode)
{
    TempDir dir;
    write_file(dir / "cred", "v1", 0640);
    ASSERT_EQ(::chmod((dir / "cred").c_str(), 0640), 0);
    // SRC must be the caller's; its group is kept (root may give it any).
    const bool chowned = is_root() && ::chown((dir / "cred").c_str(), static_cast<uid_t>(-1), 4322) == 0;
    const std::string script =
        "cat /home/agent/.cred; echo; stat -c '%a' /home/agent/.cred; "
        // In place: truncate and write in two chunks with a pause; never saved half-way.
        "exec 3>/home/agent/.cred; printf v2- >&3; sleep 0.4; [ \"$(cat /watch/cred)\" = v1 ] && echo "
        "half-not-saved; printf part2 >&3; exec 3>&-; " +
        wait_src("inplace", "v2-part2") +
        // By rename: a temp file beside DEST.
        "printf v3 > /home/agent/.cred.tmp && mv /home/agent/.cred.tmp /home/agent/.cred; " + wait_src("rename", "v3");
    Result r = in_sandbox(login(dir), sh(script));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    std::vector<std::string> out = lines(r.out);
    ASSERT_EQ(out.size(), 5U) << r.out;
    EXPECT_EQ(out[0], "v1");
    EXPECT_EQ(out[1], "640");
    EXPECT_EQ(out[2], "half-not-saved");
    EXPECT_NE(out[3], "inplace timeout");
    EXPECT_NE(out[4], "rename timeout");
    std::printf("renewal reached SRC after (ms): %s, %s\n", out[3].c_str(), out[4].c_str());
    EXPECT_EQ(read_file(dir / "cred"), "v3");
    struct stat st;
    ASSERT_EQ(::stat((dir / "cred").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640U);
    EXPECT_EQ(st.st_uid, ::getuid());
    if (chowned) {
        EXPECT_EQ(st.st_gid, 4322U);
    }
    // Nothing else is left in SRC's directory (no temp file).
    auto files = files_under(dir.path());
    EXPECT_EQ(files.size(), 1U);
}

TEST(LoginFile, ARenewalAtExitIsSavedToo)
{
    TempDir dir;
    write_file(dir / "cred", "old", 0600);
    Result r = in_sandbox({"--login-file", dir / "cred", kLoginDest}, sh("printf new > /home/agent/.cred"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_file(dir / "cred"), "new");
}

TEST(LoginFile, HostileDestsAreRefusedWithOneLineEachAndSrcKeepsItsContent)
{
    TempDir dir;
    write_file(dir / "cred", "good-1", 0600);
    const std::string d = kLoginDest;
    // Each step puts something hostile at DEST, waits for the monitor to look, and removes it.
    const std::string pause = "sleep 0.5; ";
    const std::string script =
        "cd /home/agent; "
        "ln -sf /etc/passwd .cred; " +
        pause + "rm -f .cred; " + "echo evil > other; ln -f other .cred; " + pause + "rm -f .cred other; " +
        "mkfifo .cred; " + pause + "rm -f .cred; " +
        "if mknod .cred c 1 3 2>/dev/null || mknod .cred c 0 0 2>/dev/null; then echo device; fi; " + pause +
        "rm -f .cred; "
        "mkdir .cred; " +
        pause + "rmdir .cred; " + "yes | head -c 2000000 > .cred; " + pause + "rm -f .cred; " +
        // Still served: a good renewal goes through.
        "printf good-2 > .t; mv .t .cred; " + wait_src("good", "good-2");
    Result r = in_sandbox(args({login(dir), {"--dev", "/dev", "--cap-add", "ALL"}}), sh(script));
    ASSERT_EQ(r.code, 0) << r.err;
    const bool device = contains(r.out, "device");
    EXPECT_FALSE(contains(r.out, "good timeout")) << r.out;
    EXPECT_EQ(read_file(dir / "cred"), "good-2");
    std::vector<std::string> warnings = lines(r.err);
    std::vector<std::string> kinds = {"a symbolic link", "2 hard links", "a FIFO", "a directory", "larger than 1 MiB"};
    if (device)
        kinds.push_back("a device");
    EXPECT_EQ(warnings.size(), kinds.size()) << r.err;
    for (const std::string& kind : kinds) {
        int seen = 0;
        for (const std::string& w : warnings)
            if (contains(w, kind)) {
                ++seen;
                EXPECT_EQ(
                    w.rfind("cocoon: login sync: --login-file " + (dir / "cred") + " " + kLoginDest + ": DEST is ", 0),
                    0U)
                    << w;
            }
        EXPECT_EQ(seen, 1) << kind << " in:\n" << r.err;
    }
}

TEST(LoginFile, SrcIsAlwaysOneWholeVersionWhenCocoonIsKilledDuringWriteBacks)
{
    TempDir dir, logs;
    constexpr int kLines = 30000;  // ~270 KB a version
    auto version = [](int k) {
        std::string line = "token-" + std::to_string(k) + "\n", all;
        for (int i = 0; i < kLines; ++i)
            all += line;
        return all;
    };
    // Renewals alternate between rename and in place, one every 0.25 s.
    const std::string script =
        "k=1; while true; do if [ $((k % 2)) = 0 ]; then yes token-$k | head -n " + std::to_string(kLines) +
        " > /home/agent/.t && mv /home/agent/.t /home/agent/.cred; else yes token-$k | head -n " +
        std::to_string(kLines) + " > /home/agent/.cred; fi; k=$((k+1)); sleep 0.25; done";
    std::mt19937 rng(7);
    int renewed = 0;
    const int kRounds = 12;
    for (int round = 0; round < kRounds; ++round) {
        write_file(dir / "cred", version(0), 0600);
        pid_t pid = start(args({minimal_root(),
                                {"--unshare-pid", "--die-with-parent", "--login-file", dir / "cred", kLoginDest},
                                sh(script)}),
                          logs / "out");
        std::this_thread::sleep_for(std::chrono::milliseconds(200 + rng() % 1200));
        // The last round, whatever the speed, kills once a renewal has reached SRC (a control).
        for (int waited = 0; round == kRounds - 1 && read_file(dir / "cred") == version(0) && waited < 10000;
             waited += 10)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ::kill(pid, SIGKILL);
        EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
        const std::string src = read_file(dir / "cred");
        int k = -1;
        if (src.rfind("token-", 0) == 0)
            k = std::stoi(src.substr(6));
        ASSERT_GE(k, 0) << "round " << round << ": SRC starts with " << src.substr(0, 20);
        ASSERT_EQ(src, version(k)) << "round " << round << ": SRC is not one whole version";
        renewed += k > 0;
    }
    // A temp file a kill left beside SRC is gone once the next cocoon on SRC starts (one is
    // planted too: the window between linkat and renameat is small for a random kill to hit).
    write_file(dir / ".cred.cocoon-999999999-1", "half", 0600);
    Result r = in_sandbox({"--login-file", dir / "cred", kLoginDest}, {"true"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(files_under(dir.path()).size(), 1U);
    // How many random kills came after a renewal depends on the speed; the last round's does not.
    std::printf("renewals reached SRC in %d of %d rounds\n", renewed, kRounds);
    EXPECT_GE(renewed, 1);
}

TEST(LoginFile, TwoSandboxesShareOneSrc)
{
    TempDir dir, logs;
    write_file(dir / "cred", "v1", 0600);
    // A waits for B's renewal to reach its own DEST; B renews once A has started.
    const std::string a_script = "i=0; while [ \"$(cat /home/agent/.cred)\" != v2 ] && [ $i -lt 500 ]; do sleep 0.01; "
                                 "i=$((i+1)); done; echo A $(cat /home/agent/.cred)";
    pid_t a = start(args({minimal_root(), {"--login-file", dir / "cred", kLoginDest}, sh(a_script)}), logs / "a");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Result b = in_sandbox(login(dir),
                          sh("cat /home/agent/.cred; echo; printf v2 > /home/agent/.cred; " + wait_src("B", "v2")));
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(lines(b.out)[0], "v1");
    EXPECT_FALSE(contains(b.out, "timeout"));
    EXPECT_EQ(wait_exit(a), 0);
    EXPECT_EQ(read_file(logs / "a"), "A v2\n");
    EXPECT_EQ(read_file(dir / "cred"), "v2");
}

TEST(LoginFile, ASandboxThatChangedItsOwnCopyKeepsItAndSavesItLast)
{
    TempDir dir, logs;
    write_file(dir / "cred", "v1", 0600);
    // A writes its own version in place and keeps the file open (not yet saved) until B's renewal
    // has reached SRC, however long B takes.
    const std::string a_script = "exec 3>/home/agent/.cred; printf a-own >&3; " + wait_src("B-seen", "v2", 1000) +
                                 "echo A $(cat /home/agent/.cred); exec 3>&-; " + wait_src("A-saved", "a-own");
    pid_t a = start(args({minimal_root(), login(dir), sh(a_script)}), logs / "a");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Result b = in_sandbox(login(dir), sh("printf v2 > /home/agent/.cred; " + wait_src("B", "v2")));
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_FALSE(contains(b.out, "timeout"));
    EXPECT_EQ(wait_exit(a), 0);
    std::vector<std::string> out = lines(read_file(logs / "a"));
    ASSERT_EQ(out.size(), 3U) << read_file(logs / "a");
    EXPECT_NE(out[0], "B-seen timeout");
    EXPECT_EQ(out[1], "A a-own");
    EXPECT_NE(out[2], "A-saved timeout");
    EXPECT_EQ(read_file(dir / "cred"), "a-own");
}

TEST(LoginFile, TwoLoginFilesInOneDirectoryAndAnEarlierTmpfsThereShareIt)
{
    TempDir dir;
    write_file(dir / "one", "1", 0600);
    write_file(dir / "two", "2", 0600);
    Result r = in_sandbox({"--unshare-pid", "--proc", "/proc", "--tmpfs", "/home/agent/", "--login-file", dir / "one",
                           "/home/agent/one", "--login-file", dir / "two", "home/agent/two"},
                          sh("cat /home/agent/one /home/agent/two; echo; grep -c ' /home/agent ' /proc/self/mountinfo "
                             "|| true; printf 3 > /home/agent/two"));
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(lines(r.out).size(), 2U) << r.out;
    EXPECT_EQ(lines(r.out)[0], "12");
    EXPECT_EQ(lines(r.out)[1], "1");  // one tmpfs on /home/agent, the --tmpfs
    EXPECT_EQ(read_file(dir / "two"), "3");
}

// Issue 20, 1: SRC lies in a directory the agent can write (here bound
// read-write at /wt). What it plants at SRC's name, a link to a file of the
// caller's, is replaced by the next write-back, never written through; a link
// at SRC at the start is refused, and so is a link in SRC's directory path
// under --no-follow-sources (the recipe).
TEST(LoginFile, ALinkAtSrcIsNeverFollowed)
{
    TempDir dir, victim_dir, logs;
    const std::string victim = victim_dir / "authorized_keys";
    write_file(victim, "ssh-ed25519 the-callers-key\n", 0600);
    write_file(dir / "cred", "v1", 0600);
    for (const auto& mode : is_root() ? std::vector<std::vector<std::string>>{{}, {"--cap-drop", "ALL"}}
                                      : std::vector<std::vector<std::string>>{{}}) {
        const std::string script = "ln -sf " + victim + " /wt/cred.new && mv -f /wt/cred.new /wt/cred; " +
                                   "printf renewed > /home/agent/.cred; sleep 0.6; ls -l /wt/cred";
        Result r = in_sandbox(args({mode, {"--bind", dir.path(), "/wt", "--login-file", dir / "cred", kLoginDest}}),
                              sh(script));
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(read_file(victim), "ssh-ed25519 the-callers-key\n");
        struct stat st;
        ASSERT_EQ(::lstat((dir / "cred").c_str(), &st), 0);
        EXPECT_TRUE(S_ISREG(st.st_mode));
        EXPECT_EQ(read_file(dir / "cred"), "renewed");
        write_file(dir / "cred", "v1", 0600);
    }
    // At the start: a link at SRC, and a link in its directory under --no-follow-sources.
    HostSnapshot host("login-link", victim_dir.path());
    ASSERT_EQ(::unlink((dir / "cred").c_str()), 0);
    ASSERT_EQ(::symlink(victim.c_str(), (dir / "cred").c_str()), 0);
    Result r = in_sandbox(args({host.mark(), {"--login-file", dir / "cred", kLoginDest}}), {"true"});
    expect_refused(r, {"--login-file", dir / "cred", "is a symbolic link; pass the real path"});
    ASSERT_EQ(::symlink(victim_dir.path().c_str(), (dir / "sub").c_str()), 0);
    r = in_sandbox(
        args({host.mark(), {"--no-follow-sources", "--login-file", dir / "sub/authorized_keys", kLoginDest}}),
        {"true"});
    expect_refused(r, {"--login-file", dir / "sub/authorized_keys", "(refused by --no-follow-sources)"});
    host.expect_unchanged();
}

// SRC's directory is the worktree, which the agent can open: a lock it holds
// there (flock, as cocoon's write-backs take) must not stall the monitor,
// which still forwards SIGTERM to the sandbox; the renewal is saved once the
// agent is gone.
TEST(LoginFile, AnAgentsLockOnSrcsDirectoryDoesNotStallTheMonitor)
{
    TempDir dir, logs;
    write_file(dir / "cred", "v1", 0600);
    pid_t pid = start(args({minimal_root(),
                            {"--unshare-pid", "--forward-signals", "--dev", "/dev", "--bind", dir.path(), "/wt",
                             "--login-file", dir / "cred", kLoginDest},
                            sh("flock -x /wt sleep 60 & sleep 0.2; printf renewed > /home/agent/.cred; sleep 60")}),
                      logs / "out");
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    EXPECT_EQ(read_file(dir / "cred"), "v1");
    const auto asked = std::chrono::steady_clock::now();
    ::kill(pid, SIGTERM);
    EXPECT_EQ(wait_exit(pid, 5000), 128 + SIGTERM);
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(3)) << read_file(logs / "out");
    EXPECT_EQ(read_file(dir / "cred"), "renewed") << read_file(logs / "out");
}

// Issue 20, 1b. Each sandbox renames a new version into DEST and at once
// rewrites DEST in place with a writer that pauses between the truncation and
// each of its two writes. A reader on the host reads SRC all the while: it
// may only ever see whole versions (never an empty or half-written file).
void renewals_with_a_slow_writer(int sandboxes, int renewals, const std::string& pause)
{
    TempDir dir, logs;
    write_file(dir / "cred", "v0-whole", 0600);
    const std::string script = "for i in $(seq " + std::to_string(renewals) +
                               "); do printf \"$K-$i-r-whole\" > /home/agent/.t && mv /home/agent/.t "
                               "/home/agent/.cred; { sleep " +
                               pause + "; printf \"$K-$i-w\"; sleep " + pause +
                               "; printf -- -whole; } "
                               "> /home/agent/.cred; sleep 0.02; done";
    std::atomic<bool> stop{false};
    std::atomic<long> reads{0};
    std::vector<std::string> bad;
    std::thread reader([&] {
        while (!stop) {
            std::string seen = read_file(dir / "cred");
            ++reads;
            if (seen.size() < 6 || seen.compare(seen.size() - 6, 6, "-whole") != 0)
                bad.push_back(seen);
        }
    });
    std::vector<pid_t> pids;
    for (int k = 0; k < sandboxes; ++k)
        pids.push_back(start(args({minimal_root(),
                                   {"--setenv", "K", "s" + std::to_string(k), "--login-file", dir / "cred", kLoginDest},
                                   sh(script)}),
                             logs / std::to_string(k)));
    for (size_t k = 0; k < pids.size(); ++k)
        EXPECT_EQ(wait_exit(pids[k], 120000), 0) << read_file(logs / std::to_string(k));
    stop = true;
    reader.join();
    EXPECT_TRUE(bad.empty()) << bad.size() << " of " << reads << " reads saw a partial SRC, e.g. '" << bad[0] << "'";
    const std::string last = read_file(dir / "cred");
    EXPECT_TRUE(last.rfind("s", 0) == 0 && contains(last, "-whole")) << last;
    std::printf("%ld reads of SRC, %zu partial; SRC ends as %s\n", reads.load(), bad.size(), last.c_str());
}

TEST(LoginFile, ASlowWriterAfterARenameIsNeverSavedHalfWay)
{
    // Each pause outlasts the monitor's quiet period (150 ms).
    renewals_with_a_slow_writer(1, 8, "0.2");
}

TEST(LoginFile, SixteenSandboxesWithSlowWritersOnOneSrcShowOnlyWholeVersions)
{
    renewals_with_a_slow_writer(16, 20, "0.03");
}

// Issue 20, 1: an unprivileged caller whose SRC has a group it is not in
// (root gave it one): the renewal is saved with the caller's group and SRC's
// mode, said in one warning line. Needs root to set up and the test user to
// run as.
TEST(LoginFile, ARenewalIsNotLostForAGroupTheCallerIsNotIn)
{
    if (!is_root())
        GTEST_SKIP() << "needs root to give SRC a group its unprivileged caller is not in (the root pass runs it)";
    passwd* user = ::getpwnam(kTestUser);
    ASSERT_TRUE(user) << kNoTestUser;
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    const std::string sub = dir / "state";
    ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
    ASSERT_EQ(::chown(sub.c_str(), user->pw_uid, user->pw_gid), 0);
    write_file(sub + "/cred", "v1", 0640);
    ASSERT_EQ(::chmod((sub + "/cred").c_str(), 0640), 0);
    ASSERT_EQ(::chown((sub + "/cred").c_str(), user->pw_uid, 0), 0);
    Result r = run(
        args({{"/usr/bin/setpriv", "--reuid", "cocoon-test", "--regid", "cocoon-test", "--clear-groups", cocoon_bin()},
              minimal_root(),
              {"--login-file", sub + "/cred", kLoginDest},
              sh("printf renewed > /home/agent/.cred")}));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(read_file(sub + "/cred"), "renewed");
    struct stat st;
    ASSERT_EQ(::stat((sub + "/cred").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, user->pw_uid);
    EXPECT_EQ(st.st_gid, user->pw_gid);
    EXPECT_EQ(st.st_mode & 07777, 0640U);
    ASSERT_EQ(lines(r.err).size(), 1U) << r.err;
    // The line names the step, the temp file the group was refused on, and why.
    EXPECT_EQ(r.err.rfind("cocoon: login sync: --login-file " + sub + "/cred " + kLoginDest +
                              ": can't keep SRC's group 0 on " + sub + "/.cred.cocoon-",
                          0),
              0U)
        << r.err;
    EXPECT_TRUE(contains(r.err, ": Operation not permitted; saved with group ")) << r.err;
}

// Each refusal is one line naming the option, and leaves the host as it was. --login-file-try
// refuses an SRC that exists as --login-file does; only a missing one is no error for it.
void refusals_leave_nothing_behind(const std::string& option)
{
    TempDir dir;
    write_file(dir / "cred", "v1", 0600);
    write_file(dir / "big", std::string(2 << 20, 'x'), 0600);
    ::mkdir((dir / "sub").c_str(), 0700);
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    ASSERT_EQ(::symlink((dir / "cred").c_str(), (dir / "link").c_str()), 0);
    HostSnapshot host("login-refused", dir.path());
    auto refused = [&](const std::string& src, const std::string& dest, const std::string& why,
                       const std::vector<std::string>& more = {}) {
        Result r = in_sandbox(args({host.mark(), more, {option, src, dest}}), {"true"});
        expect_refused(r, {option + " " + src + " ", dest, why});
    };
    if (option == "--login-file")
        refused(dir / "missing", kLoginDest, "No such file or directory");
    refused(dir / "sub", kLoginDest, "is a directory");
    refused(dir / "fifo", kLoginDest, "is a FIFO");
    refused(dir / "link", kLoginDest, "is a symbolic link; pass the real path");
    refused(dir / "cred/x", kLoginDest, "Not a directory");
    refused(dir / "cred/x/y", kLoginDest, "Not a directory");
    refused(dir / "big", kLoginDest, "larger than 1 MiB");
    ASSERT_EQ(::link((dir / "cred").c_str(), (dir / "cred2").c_str()), 0);
    refused(dir / "cred", kLoginDest, "a file with 2 hard links");
    ASSERT_EQ(::unlink((dir / "cred2").c_str()), 0);
    if (is_root()) {
        ASSERT_EQ(::chown((dir / "big").c_str(), 4321, 4321), 0);
        refused(dir / "big", kLoginDest, "owned by uid 4321, not by the caller");
    } else {
        // Root may write anywhere; an unprivileged caller is refused a directory it cannot write,
        // and so is --login-file-try a missing one below it (before anything is made).
        ASSERT_EQ(::chmod((dir / "sub").c_str(), 0500), 0);
        refused(dir / "sub/cred", kLoginDest, "the directory " + (dir / "sub") + " must be writable");
        if (option == "--login-file-try")
            refused(dir / "sub/new/cred", kLoginDest, "the directory " + (dir / "sub") + " must be writable");
        ASSERT_EQ(::chmod((dir / "sub").c_str(), 0700), 0);
    }
    if (option == "--login-file-try")
        refused(dir / "new/../cred", kLoginDest, "a .. below it cannot be made");
    refused(dir / "cred", "/cred", "DEST must be below a directory other than /");
    refused(dir / "cred", "/home/../cred", "..");
    refused(dir / "cred", kLoginDest, "DEST given twice", {"--login-file", dir / "cred", kLoginDest});
    refused(dir / "cred", kLoginDest, "DEST given twice", {"--login-file-try", dir / "cred", kLoginDest});
    host.expect_unchanged();
}

TEST(LoginFile, RefusedInputLeavesNothingBehind)
{
    refusals_leave_nothing_behind("--login-file");
}

TEST(LoginFileTry, RefusedInputLeavesNothingBehind)
{
    refusals_leave_nothing_behind("--login-file-try");
}

// Issue 22: storms the agent makes in DEST's directory cost the monitor little: two seconds each
// of writes to another file there, renames over DEST, rewrites of DEST in place, and renewals just
// slow enough to be saved. What holds whatever the build's speed is asserted: SRC is written at
// most once a second (and once more at the end), a renewal then left alone for the save interval
// reaches SRC while the sandbox runs, and the last one reaches it at the end. The monitor's CPU
// share and the number of write-backs depend on the speed, and are printed.
TEST(LoginFile, StormsInDestsDirectoryCostTheMonitorLittle)
{
    TempDir dir;
    write_file(dir / "cred", "v0", 0600);
    // Every write-back renames a temp file over SRC's name: counted here.
    UniqueFd watch(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    ASSERT_TRUE(watch);
    ASSERT_GE(::inotify_add_watch(watch.get(), dir.path().c_str(), IN_MOVED_TO), 0);
    TempDir logs;
    const std::string storms =
        "timeout 2 sh -c 'while :; do echo x > /home/agent/other; done'; "
        "timeout 2 sh -c 'while :; do echo x > /home/agent/t; mv /home/agent/t /home/agent/.cred; done'; "
        "timeout 2 sh -c 'i=0; while :; do echo v$i > /home/agent/.cred; i=$((i+1)); done'; "
        // Renewals just past the quiet period: each one a version to save.
        "timeout 2 sh -c 'i=0; while :; do echo r$i > /home/agent/.cred; i=$((i+1)); sleep 0.17; done'; "
        // Left alone: saved within the save interval and the quiet period, however busy the storms kept the monitor.
        "echo quiet > /home/agent/.cred; " +
        wait_src("quiet", "quiet", 1000) + "echo final > /home/agent/.cred; sleep 0.5";
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = start(args({minimal_root(), {"--dev", "/dev"}, login(dir), sh(storms)}), logs / "out");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double before = cpu_seconds(pid);
    // Read as they come: the kernel merges an unread event into a like one before it.
    int saves = 0;
    auto count_saves = [&] {
        alignas(inotify_event) char buf[4096];
        for (ssize_t n; (n = ::read(watch.get(), buf, sizeof buf)) > 0;)
            for (ssize_t off = 0; off < n;) {
                const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
                saves += ev->len && std::string(ev->name) == "cred";
                off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
            }
    };
    const auto storms_from = std::chrono::steady_clock::now();
    for (int i = 0; i < 140; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        count_saves();
    }
    const double after = cpu_seconds(pid);
    const double storm_wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - storms_from).count();
    EXPECT_EQ(wait_exit(pid, 60000), 0) << read_file(logs / "out");
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    count_saves();
    const std::string out = read_file(logs / "out");
    EXPECT_TRUE(contains(out, "quiet ") && !contains(out, "quiet timeout")) << out;
    EXPECT_EQ(read_file(dir / "cred"), "final\n");
    // One write-back a second at most while the sandbox runs, one more at its end: the storms of
    // writes never let DEST rest for the quiet period, and the renewals would be saved 10 times in
    // 2 s without the limit.
    EXPECT_LE(saves, static_cast<int>(wall) + 2) << "in " << wall << " s";
    if (before >= 0 && after >= 0)
        std::printf("monitor CPU during the storms: %.1f%% of a CPU\n", (after - before) / storm_wall * 100);
    std::printf("write-backs: %d in %.1f s; %s\n", saves, wall, lines(out).empty() ? "" : lines(out).back().c_str());
}

}  // namespace
}  // namespace cocoon::test
