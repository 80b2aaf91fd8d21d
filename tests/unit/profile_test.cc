// Unit tests of --agent's profiles (tools/cocoon/profile.cc): what a profile file becomes on the
// command line, and each way a profile is refused, in one line naming the file and line.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/sys_error.h"
#include "tests/support/process.h"
#include "tools/cocoon/profile.h"

using namespace cocoon;
using cocoon::test::TempDir;
using cocoon::test::write_file;
using Words = std::vector<std::string>;

namespace {

class Profiles : public ::testing::Test {
protected:
    Profiles()
    {
        ::mkdir((m_dir / "user").c_str(), 0700);
        ::mkdir((m_dir / "installed").c_str(), 0700);
        m_paths.home = "/home/u";
        m_paths.worktree = "/src/my project";
        m_paths.dirs = {m_dir / "user", m_dir / "installed"};
    }

    void installed(const std::string& name, const std::string& text)
    {
        write_file(m_dir / ("installed/" + name + ".profile"), text);
    }

    // expand_agent on `words`; the words after, and the origins through `origins`.
    Words expand(Words words, Words* origins = nullptr)
    {
        Words got_origins;
        tools::expand_agent(words, got_origins, m_paths);
        if (origins)
            *origins = got_origins;
        return words;
    }

    // The one-line error expand_agent throws, or "" when it throws none.
    std::string refusal(Words words)
    {
        try {
            expand(std::move(words));
        } catch (const std::exception& e) {
            return e.what();
        }
        return "";
    }

    TempDir m_dir;
    tools::AgentPaths m_paths;
};

TEST_F(Profiles, ExpandWhereAgentStandsWithTheRunsPathsPutIn)
{
    installed("base", "# the layout\n\n  --unshare-all\n--bind $WORKTREE \"$WORKTREE\"\n--fresh-home $HOME\n");
    installed("mine", "include base\n--setenv A 'two words'\n--ro-bind $HOME/x\\ y /y\n");
    Words origins;
    const Words words = expand({"--hostname", "h", "--agent", "mine", "--bind", "/a", "/b"}, &origins);
    EXPECT_EQ(words,
              (Words{"--hostname", "h", "--unshare-all", "--bind", "/src/my project", "/src/my project", "--fresh-home",
                     "/home/u", "--setenv", "A", "two words", "--ro-bind", "/home/u/x y", "/y", "--bind", "/a", "/b"}));
    const std::string base = m_dir / "installed/base.profile", mine = m_dir / "installed/mine.profile";
    EXPECT_EQ(origins, (Words{"", base + ":3", base + ":4", base + ":5", mine + ":2", mine + ":3", ""}));
}

TEST_F(Profiles, TheUsersOwnComesBeforeTheInstalledOneAndAPathIsAPath)
{
    installed("p", "--unshare-net\n");
    write_file(m_dir / "user/p.profile", "--unshare-ipc\n");
    EXPECT_EQ(expand({"--agent", "p"}), (Words{"--unshare-ipc"}));
    write_file(m_dir / "elsewhere", "--unshare-uts\ninclude ./sub\n");
    write_file(m_dir / "sub", "--unshare-pid\n");  // a path relative to the including file
    EXPECT_EQ(expand({"--agent", m_dir / "elsewhere"}), (Words{"--unshare-uts", "--unshare-pid"}));
}

TEST_F(Profiles, RelayReplacesTheProfilesEgress)
{
    installed("p", "--unshare-all\n--egress 3128\n--proxy-env 3128\n--egress-allow api.example.com\n");
    EXPECT_EQ(expand({"--agent", "p", "--relay", "8080", "/run/proxy.sock"}),
              (Words{"--unshare-all", "--proxy-env", "8080", "--relay", "8080", "/run/proxy.sock"}));
    // The caller's own --proxy-env stands; none is added.
    EXPECT_EQ(expand({"--relay", "8080", "/s", "--agent", "p", "--proxy-env", "9"}),
              (Words{"--relay", "8080", "/s", "--unshare-all", "--proxy-env", "9"}));
    // Without --relay the profile's egress stays, and --egress-allow after adds a host.
    EXPECT_EQ(expand({"--agent", "p", "--egress-allow", "b.example.com"}),
              (Words{"--unshare-all", "--egress", "3128", "--proxy-env", "3128", "--egress-allow", "api.example.com",
                     "--egress-allow", "b.example.com"}));
}

TEST_F(Profiles, WorktreeGivesWayToo)
{
    installed("p", "--chdir $WORKTREE\n");
    EXPECT_EQ(expand({"--worktree", "/elsewhere", "--agent", "p"}), (Words{"--chdir", "/src/my project"}));
}

TEST_F(Profiles, BadProfilesAreOneLineNamingFileAndLine)
{
    const std::string p = m_dir / "installed/p.profile";
    installed("p", "--unshare-all\n--no-such-option\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":2: Unknown option --no-such-option");
    installed("p", "--bind /a\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: --bind takes 2 arguments, the line has 1");
    installed("p", "--unshare-all extra\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: --unshare-all takes 0 arguments, the line has 1");
    installed("p", "unshare-all\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: Unknown option unshare-all");
    installed("p", "--setenv X $USER\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: $USER: a profile knows $HOME and $WORKTREE, nothing else");
    installed("p", "--setenv A \"open\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: a quote is not closed");
    installed("p", "--setenv A \\q\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: unknown escape sequence");
    installed("p", "--agent other\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: --agent cannot be used in a profile");
    installed("p", "--args 3\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: --args cannot be used in a profile");
    installed("p", "include\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: include takes one profile, a name or a path");
    installed("p", "include nowhere\n");
    EXPECT_EQ(refusal({"--agent", "p"}), p + ":1: include nowhere: no profile nowhere (looked for nowhere.profile in " +
                                             (m_dir / "user") + ", " + (m_dir / "installed") + ")");
}

TEST_F(Profiles, AnIncludeLoopIsRefused)
{
    installed("a", "--unshare-net\ninclude b\n");
    installed("b", "include a\n");
    const std::string b = m_dir / "installed/b.profile", a = m_dir / "installed/a.profile";
    EXPECT_EQ(refusal({"--agent", "a"}), b + ":1: include a: " + a + " includes itself (an include loop)");
    installed("self", "include self\n");
    EXPECT_NE(refusal({"--agent", "self"}).find("includes itself (an include loop)"), std::string::npos);
}

TEST_F(Profiles, WhatIsNotAProfileFileIsRefused)
{
    ::mkdir((m_dir / "installed/dir.profile").c_str(), 0700);
    EXPECT_EQ(refusal({"--agent", "dir"}),
              "--agent dir: " + (m_dir / "installed/dir.profile") + " is not a profile: a directory");
    ASSERT_EQ(::mkfifo((m_dir / "installed/fifo.profile").c_str(), 0600), 0);
    EXPECT_EQ(refusal({"--agent", "fifo"}),
              "--agent fifo: " + (m_dir / "installed/fifo.profile") + " is not a profile: not a regular file");
    EXPECT_EQ(refusal({"--agent", "none"}), "--agent none: no profile none (looked for none.profile in " +
                                                (m_dir / "user") + ", " + (m_dir / "installed") + ")");
    write_file(m_dir / "installed/big.profile", std::string(size_t{65} << 10, '#'));
    EXPECT_EQ(refusal({"--agent", "big"}),
              "--agent big: " + (m_dir / "installed/big.profile") + " is larger than 64 KiB");
    EXPECT_NE(refusal({"--agent", m_dir / "missing"})
                  .find("--agent " + (m_dir / "missing") + ": " + (m_dir / "missing") + ": No such file or directory"),
              std::string::npos)
        << refusal({"--agent", m_dir / "missing"});
}

// Security: a profile the agent could have written in an earlier run is never read.
TEST_F(Profiles, AProfileInTheWorktreeIsRefused)
{
    ::mkdir((m_dir / "wt").c_str(), 0700);
    m_paths.worktree = m_dir / "wt";
    write_file(m_dir / "wt/agent.profile", "--unshare-net\n");
    EXPECT_EQ(refusal({"--agent", m_dir / "wt/agent.profile"}),
              "--agent " + (m_dir / "wt/agent.profile") + ": " + (m_dir / "wt/agent.profile") + " is in the worktree " +
                  (m_dir / "wt") + ", which the agent may write: keep profiles outside it");
    installed("p", "include " + (m_dir / "wt/agent.profile") + "\n");
    EXPECT_NE(refusal({"--agent", "p"}).find("is in the worktree"), std::string::npos);
}

TEST_F(Profiles, AgentTwiceIsRefused)
{
    installed("p", "--unshare-net\n");
    EXPECT_EQ(refusal({"--agent", "p", "--agent", "p"}),
              "--agent given twice: one profile a run (a profile may include another)");
    EXPECT_EQ(refusal({"--agent", "p", "--worktree", "/a", "--worktree", "/b"}), "--worktree given twice");
}

TEST(DryRun, OneOptionALineQuotedForSh)
{
    EXPECT_EQ(tools::dry_run_text({"--unshare-all", "--dry-run", "--setenv", "A", "it's here", "--bind", "/a b", "/c"},
                                  {"sh", "-c", "echo $HOME"}),
              "cocoon \\\n  --unshare-all \\\n  --setenv A 'it'\\''s here' \\\n  --bind '/a b' /c \\\n"
              "  -- sh -c 'echo $HOME'\n");
    EXPECT_EQ(tools::dry_run_text({"--unshare-net"}, {}), "cocoon \\\n  --unshare-net\n");
    EXPECT_EQ(tools::shell_quote(""), "''");
    EXPECT_EQ(tools::shell_quote("/usr/local/bin:/usr/bin"), "/usr/local/bin:/usr/bin");
}

}  // namespace
