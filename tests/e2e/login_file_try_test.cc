// End-to-end checks of --login-file-try: a missing SRC (and missing directories of its path) is
// made by the first version the command writes at DEST, renewed as any SRC afterwards, both ways;
// a run that writes nothing, or is refused, makes nothing on the host. Runs the binary as
// whoever runs the tests (root, then cocoon-test in CI). The refusals it shares with --login-file
// are in login_file_test.cc (RefusedInputLeavesNothingBehind runs them for both options).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// sh: waits up to 5 s for FILE to hold `want`, then prints "LABEL ok" or "LABEL timeout".
std::string wait_for(const std::string& label, const std::string& file, const std::string& want)
{
    return "i=0; while [ \"$(cat " + file + " 2>/dev/null)\" != '" + want +
           "' ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; "
           "if [ $i -lt 500 ]; then echo " +
           label + " ok; else echo " + label + " timeout; fi; ";
}

// Waits up to 5 s for the host file `path` to hold `want`.
bool host_file_becomes(const std::string& path, const std::string& want)
{
    for (int i = 0; i < 500 && read_file(path) != want; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return read_file(path) == want;
}

// A renewal on the host, as another sandbox's write-back makes it: a whole file renamed over SRC.
void renew_on_host(const std::string& src, const std::string& content)
{
    write_file(src + ".host", content, 0600);
    ASSERT_EQ(::rename((src + ".host").c_str(), src.c_str()), 0);
}

void expect_mode_and_owner(const std::string& path, mode_t mode)
{
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 07777, mode) << path;
    EXPECT_EQ(st.st_uid, ::geteuid()) << path;
}

// The command sees no DEST, writes one by rename: SRC is made with it (0600, the caller's); an
// in-place renewal follows it, then a renewal on the host reaches DEST. `src` may lie in missing
// directories; /watch shows SRC's directory where it exists at the start.
// cocoon runs with `umask`; the command with 022.
void first_login_then_renewals(const std::string& src, const std::vector<std::string>& more,
                               const std::string& umask = "022")
{
    TempDir logs;
    const std::string script = "umask 022; [ -e /home/agent/.cred ] || echo absent; "
                               "printf v1 > /home/agent/.t && mv /home/agent/.t /home/agent/.cred; "
                               "sleep 1.2; printf v2 > /home/agent/.cred; " +
                               wait_for("host", kLoginDest, "v3-host");
    std::vector<std::string> argv = args({{"/bin/sh", "-c", "umask " + umask + "; exec \"$0\" \"$@\"", cocoon_bin()},
                                          minimal_root(),
                                          more,
                                          {"--unshare-pid", "--dev", "/dev", "--login-file-try", src, kLoginDest},
                                          sh(script)});
    pid_t pid = start_logged(argv, logs / "out");
    const bool v1 = host_file_becomes(src, "v1");
    // The first version is saved at once; the second waits for the save gap (1 s).
    const bool v2 = host_file_becomes(src, "v2");
    if (v2)
        renew_on_host(src, "v3-host");
    EXPECT_EQ(wait_exit(pid, 20000), 0) << read_file(logs / "out");
    EXPECT_TRUE(v1) << read_file(logs / "out");
    EXPECT_TRUE(v2) << read_file(logs / "out");
    EXPECT_EQ(read_file(logs / "out"), "absent\nhost ok\n");
    EXPECT_EQ(read_file(src), "v3-host");
    expect_mode_and_owner(src, 0600);
}

TEST(LoginFileTry, AMissingSrcIsMadeByTheFirstVersionAndRenewedBothWaysAfter)
{
    TempDir dir;
    // SRC's directory is readable in the sandbox, where the made SRC shows up.
    first_login_then_renewals(dir / "cred", {"--ro-bind", dir.path(), "/watch"});
    struct stat st;
    ASSERT_EQ(::stat((dir / "cred").c_str(), &st), 0);
    EXPECT_EQ(st.st_gid, ::getegid());
    // Nothing else is left in SRC's directory (no temp file).
    EXPECT_EQ(files_under(dir.path()).size(), 1U);
}

TEST(LoginFileTry, MissingDirectoriesOfSrcAreMade0700)
{
    TempDir dir;
    // A umask that would take the owner's write bit: the directories are 0700 all the same.
    first_login_then_renewals(dir / "a/b/cred", {}, "0277");
    expect_mode_and_owner(dir / "a", 0700);
    expect_mode_and_owner(dir / "a/b", 0700);
    EXPECT_EQ(files_under(dir.path()).size(), 3U);
}

// A run whose command writes no DEST (or whose DEST is refused) leaves no SRC, and makes none of
// SRC's missing directories: they are made only for the first version saved.
TEST(LoginFileTry, ACommandThatWritesNothingMakesNothing)
{
    TempDir dir;
    HostSnapshot host("login-try-nothing", dir.path());
    Result r = in_sandbox(args({host.mark(), {"--login-file-try", dir / "cred", kLoginDest}}),
                          sh("[ -e /home/agent/.cred ] || echo absent; ls -A /home/agent | wc -l"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out, "absent\n0\n");
    r = in_sandbox(args({host.mark(), {"--login-file-try", dir / "a/b/cred", kLoginDest}}),
                   sh("ln -s /etc/passwd /home/agent/.cred"));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "DEST is a symbolic link: refused, and SRC stays missing")) << r.err;
    // A set-up that fails after SRC was looked at (an --chdir to nowhere) leaves nothing either.
    r = in_sandbox(args({host.mark(), {"--login-file-try", dir / "a/b/cred", kLoginDest, "--chdir", "/nowhere"}}),
                   {"true"});
    EXPECT_EQ(r.code, 1);
    host.expect_unchanged();
    EXPECT_TRUE(files_under(dir.path()).empty());
}

// Under --no-follow-sources a link in SRC's path is refused before anything is made, whether it
// leads to an existing directory (where the missing part would be made) or to nothing; without
// it, a link to nothing is refused too (mkdir would not make its target).
TEST(LoginFileTry, ALinkInSrcsPathIsRefusedAndNothingIsMade)
{
    TempDir dir, elsewhere;
    ASSERT_EQ(::symlink(elsewhere.path().c_str(), (dir / "link").c_str()), 0);
    ASSERT_EQ(::symlink((elsewhere / "none").c_str(), (dir / "dangling").c_str()), 0);
    HostSnapshot host("login-try-link", dir.path()), there("login-try-link2", elsewhere.path());
    auto refused = [&](const std::string& src, const std::vector<std::string>& more,
                       const std::vector<std::string>& named) {
        Result r = in_sandbox(args({host.mark(), more, {"--login-file-try", src, kLoginDest}}),
                              sh("printf v1 > /home/agent/.cred"));
        std::vector<std::string> all = {"--login-file-try", src, kLoginDest};
        all.insert(all.end(), named.begin(), named.end());
        expect_refused(r, all);
    };
    const std::vector<std::string> nofollow = {"--no-follow-sources"};
    const std::string why = "is a symbolic link (refused by --no-follow-sources); pass the real path";
    refused(dir / "link/new/cred", nofollow, {"a component of " + (dir / "link/new"), why});
    refused(dir / "link/cred", nofollow, {"a component of " + (dir / "link"), why});
    refused(dir / "dangling/new/cred", nofollow, {why});
    refused(dir / "dangling/cred", {}, {dir / "dangling", "is a symbolic link to a missing directory"});
    host.expect_unchanged();
    there.expect_unchanged();
}

}  // namespace
}  // namespace cocoon::test
