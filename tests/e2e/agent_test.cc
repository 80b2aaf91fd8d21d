// e2e: --agent PROFILE's expansion as cocoon prints it (--dry-run), against the checked-in
// expansion of each built-in profile (tests/golden/NAME.dry-run), and each way --agent is refused:
// one line, exit 1, nothing started. Runs the binary as whoever runs the tests; a root caller adds
// --host-user, which the expansion shows apart.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/e2e/e2e.h"

namespace cocoon::test {
namespace {

struct Golden {
    const char* name;
    std::string_view text;
};
#include "golden_dry_run.inc"  // kGolden: tests/golden/*.dry-run, as they were at the build

const std::vector<std::string> kProfiles = {"claude", "codex", "gemini", "generic", "opencode"};

// A run of cocoon from `cwd` with HOME (and no XDG_CONFIG_HOME: no profile of the user's) as
// given; as root, with --host-user nobody first, which --agent needs there.
Result agent_run(const std::string& cwd, const std::string& home, const std::vector<std::string>& options)
{
    std::vector<std::string> argv = {"/usr/bin/env",   "-u",           "XDG_CONFIG_HOME",
                                     "--chdir=" + cwd, "HOME=" + home, cocoon_bin()};
    if (is_root())
        argv.insert(argv.end(), {"--host-user", "nobody"});
    argv.insert(argv.end(), options.begin(), options.end());
    return run(argv);
}

// --dry-run's text with the worktree's path written $WORKTREE, and a root caller's --host-user
// line left out: the same text for every caller.
std::string as_golden(std::string text, const std::string& worktree)
{
    for (size_t at; (at = text.find(worktree)) != std::string::npos;)
        text.replace(at, worktree.size(), "$WORKTREE");
    const std::string host_user = "  --host-user nobody \\\n";
    if (size_t at = text.find(host_user); is_root() && at != std::string::npos)
        text.erase(at, host_user.size());
    return text;
}

TEST(AgentGolden, EachBuiltInProfilesExpansionIsTheCheckedInOne)
{
    TempDir worktree;
    for (const std::string& name : kProfiles) {
        Result r = agent_run(worktree.path(), "/home/me", {"--agent", name, "--dry-run"});
        ASSERT_EQ(r.code, 0) << name << ": " << r.err;
        EXPECT_EQ(r.err, "") << name;
        const std::string got = as_golden(r.out, worktree.path());
        // COCOON_UPDATE_GOLDEN=1: the expansions are written back to the tree (after a change of a
        // profile, to be reviewed in the diff).
        if (std::getenv("COCOON_UPDATE_GOLDEN"))
            std::ofstream(std::string(COCOON_GOLDEN_DIR) + "/" + name + ".dry-run") << got;
        bool found = false;
        for (const Golden& g : kGolden)
            if (g.name == name) {
                found = true;
                EXPECT_EQ(got, g.text) << name << ": the expansion changed (COCOON_UPDATE_GOLDEN=1 rewrites "
                                       << "tests/golden/" << name << ".dry-run)";
            }
        EXPECT_TRUE(found) << "no tests/golden/" << name << ".dry-run";
    }
}

// What --dry-run prints runs as it reads: pasted into sh with --dry-run added, it prints itself.
TEST(AgentGolden, TheExpansionPastedIntoShIsTheSameCommandLine)
{
    TempDir worktree;
    Result first = agent_run(worktree.path(), "/home/me",
                             {"--agent", "claude", "--setenv", "NOTE", "it's a 'quoted' $word", "--dry-run", "--",
                              "claude", "-p", "fix the bug; then test"});
    ASSERT_EQ(first.code, 0) << first.err;
    const std::string script = "cd '" + worktree.path() + "' && HOME=/home/agent-golden " + cocoon_bin() +
                               " --dry-run" + first.out.substr(first.out.find(" \\\n"));
    Result again = run({"/bin/sh", "-c", script});
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_EQ(again.out.substr(again.out.find('\n')), first.out.substr(first.out.find('\n')));
    EXPECT_NE(first.out.find("  --setenv NOTE 'it'\\''s a '\\''quoted'\\'' $word' \\\n"), std::string::npos)
        << first.out;
    EXPECT_NE(first.out.find("  -- claude -p 'fix the bug; then test'\n"), std::string::npos) << first.out;
}

// A --agent run that must not start: one line on stderr that says `expected`, exit 1, and the
// command (which would mark the worktree) never ran.
void expect_refused(const std::string& worktree, const std::vector<std::string>& options, const std::string& expected,
                    const std::string& home = "/home/me")
{
    const std::vector<std::string> mounts_before = mount_table();
    std::vector<std::string> all = options;
    all.insert(all.end(), {"--", "/bin/sh", "-c", "touch started"});
    Result r = agent_run(worktree, home, all);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(lines(r.err).size(), 1U) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << "wanted '" << expected << "' in: " << r.err;
    EXPECT_FALSE(exists(worktree + "/started"));
    EXPECT_EQ(mount_table(), mounts_before);
}

TEST(AgentBadInput, EachIsOneLineAndNothingStarts)
{
    TempDir worktree, profiles;
    write_file(profiles / "unknown-option.profile", "--unshare-all\n--no-such-option x\n");
    write_file(profiles / "loop-a.profile", "include ./loop-b.profile\n");
    write_file(profiles / "loop-b.profile", "include ./loop-a.profile\n");
    ASSERT_EQ(::mkdir((profiles / "dir.profile").c_str(), 0755), 0);
    ASSERT_EQ(::mkfifo((profiles / "fifo.profile").c_str(), 0644), 0);
    expect_refused(worktree.path(), {"--agent", "no-such-profile"}, "cocoon: --agent no-such-profile: no profile");
    expect_refused(worktree.path(), {"--agent", profiles / "unknown-option.profile"},
                   "cocoon: " + (profiles / "unknown-option.profile") + ":2: Unknown option --no-such-option");
    expect_refused(worktree.path(), {"--agent", profiles / "loop-a.profile"}, "includes itself (an include loop)");
    expect_refused(worktree.path(), {"--agent", profiles / "dir.profile"}, "is not a profile: a directory");
    // A FIFO is never opened for a blocking read: the run ends at once, refused.
    expect_refused(worktree.path(), {"--agent", profiles / "fifo.profile"}, "is not a profile: not a regular file");
    expect_refused(worktree.path(), {"--agent", "generic", "--agent", "generic"}, "cocoon: --agent given twice");
    // The agent writes the worktree: a profile there is never read.
    write_file(worktree / "agent.profile", "--unshare-net\n");
    expect_refused(worktree.path(), {"--agent", worktree / "agent.profile"}, "which the agent may write");
    expect_refused(worktree.path(), {"--worktree", worktree.path()},
                   "--worktree " + worktree.path() + ": only with --agent");
}

// Security: the worktree is bound read-write over the fresh home: one that is the home, or holds
// it, would give the agent every file of the caller's.
TEST(AgentBadInput, AWorktreeThatHoldsTheHomeIsRefused)
{
    TempDir home;
    ASSERT_EQ(::mkdir((home / "project").c_str(), 0755), 0);
    for (const std::string& worktree : {home.path(), std::string("/")})
        expect_refused(home / "project", {"--agent", "generic", "--worktree", worktree},
                       "(" + worktree + ") is or holds the home " + home.path(), home.path());
    expect_refused(home.path(), {"--agent", "generic"},
                   "the current directory (" + home.path() + ") is or holds the home", home.path());
}

TEST(AgentBadInput, RootWithoutHostUserIsRefused)
{
    if (!is_root())
        GTEST_SKIP() << "the refusal is a root caller's; an unprivileged one runs (AgentRun.*)";
    TempDir worktree;
    Result r = run({"/usr/bin/env", "--chdir=" + worktree.path(), "HOME=/root", cocoon_bin(), "--agent", "generic",
                    "--", "/bin/sh", "-c", "touch started"});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "cocoon: --agent generic as root needs --host-user USER, so that the agent never acts as root on "
                     "the host: make a user for it (useradd --system --no-create-home agent) and add --host-user "
                     "agent\n");
    EXPECT_FALSE(exists(worktree / "started"));
}

}  // namespace
}  // namespace cocoon::test
