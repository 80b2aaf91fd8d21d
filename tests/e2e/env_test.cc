// End-to-end checks of what the command starts with: hostname, environment
// edits in command-line order, and working directory.
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace cocoon::test {
namespace {

std::vector<std::string> with_name(const std::string& env_output, const std::string& name)
{
    std::vector<std::string> out;
    for (const std::string& line : lines(env_output))
        if (line.rfind(name + "=", 0) == 0)
            out.push_back(line);
    return out;
}

TEST(Uts, HostnameOption)
{
    char host_name[HOST_NAME_MAX + 1] = {};
    ASSERT_EQ(::gethostname(host_name, sizeof host_name - 1), 0);
    ASSERT_NE(std::string(host_name), "cocoon-e2e-box");

    Result r = in_sandbox({"--unshare-uts", "--hostname", "cocoon-e2e-box"}, {"hostname"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "cocoon-e2e-box\n");
}

// The README's agent recipe (and tools/run): the caller's environment and hostname stay out; the
// agent gets PATH, TERM, LANG, HOME and the proxy variables, and the name "sandbox".
TEST(Env, TheRecipeGivesOnlyWhatItSets)
{
    ::setenv("COCOON_E2E_TOKEN", "secret", 1);
    Result r = in_sandbox({"--unshare-all", "--hostname", "sandbox", "--clearenv", "--setenv", "PATH",
                           "/usr/local/bin:/usr/bin:/bin", "--setenv", "TERM", "xterm", "--setenv", "LANG", "C.UTF-8",
                           "--fresh-home", "/home/agent", "--chdir", "/", "--proxy-env", "3128"},
                          sh("hostname; env | sort"));
    ::unsetenv("COCOON_E2E_TOKEN");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string proxy = "http://127.0.0.1:3128";
    EXPECT_EQ(lines(r.out),
              (std::vector<std::string>{"sandbox", "ALL_PROXY=" + proxy, "HOME=/home/agent", "HTTPS_PROXY=" + proxy,
                                        "HTTP_PROXY=" + proxy, "LANG=C.UTF-8", "NODE_USE_ENV_PROXY=1",
                                        "NO_PROXY=127.0.0.1,localhost,::1", "PATH=/usr/local/bin:/usr/bin:/bin",
                                        "PWD=/", "TERM=xterm", "http_proxy=" + proxy, "https_proxy=" + proxy,
                                        "no_proxy=127.0.0.1,localhost,::1"}))
        << r.out;
}

TEST(Env, SetenvAndUnsetenv)
{
    Result set = in_sandbox({"--setenv", "FOO", "bar"}, {"env"});
    ASSERT_EQ(set.code, 0) << set.err;
    EXPECT_EQ(with_name(set.out, "FOO"), std::vector<std::string>{"FOO=bar"}) << set.out;

    // HOME set first, so the removal is visible whatever the caller's env holds.
    Result unset = in_sandbox({"--setenv", "HOME", "/cocoon-home", "--unsetenv", "HOME"}, {"env"});
    ASSERT_EQ(unset.code, 0) << unset.err;
    EXPECT_EQ(with_name(unset.out, "HOME"), std::vector<std::string>{}) << unset.out;

    Result unset_inherited = in_sandbox({"--unsetenv", "HOME"}, {"env"});
    ASSERT_EQ(unset_inherited.code, 0) << unset_inherited.err;
    EXPECT_EQ(with_name(unset_inherited.out, "HOME"), std::vector<std::string>{}) << unset_inherited.out;

    // Control: a later --setenv wins over an earlier --unsetenv.
    Result reset = in_sandbox({"--unsetenv", "HOME", "--setenv", "HOME", "/cocoon-home"}, {"env"});
    ASSERT_EQ(reset.code, 0) << reset.err;
    EXPECT_EQ(with_name(reset.out, "HOME"), std::vector<std::string>{"HOME=/cocoon-home"}) << reset.out;
}

TEST(Env, ClearenvKeepsOnlyLaterSetenvAndPwd)
{
    Result r =
        in_sandbox({"--chdir", "/usr", "--setenv", "A", "1", "--clearenv", "--setenv", "B", "2"}, {"/usr/bin/env"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(line_set(r.out), (std::set<std::string>{"B=2", "PWD=/usr"})) << r.out;
}

TEST(Env, ChdirSetsTheWorkingDirectory)
{
    Result r = in_sandbox({"--chdir", "/usr"}, sh("pwd; echo $PWD"));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "/usr\n/usr\n");
}

// Without --chdir, and with the caller's cwd absent inside, the command starts
// in its own $HOME (the one --setenv gave it), not the caller's.
TEST(Env, DefaultDirectoryIsTheCommandsHome)
{
    TempDir outside;  // the caller's cwd: not bound into the sandbox
    std::string cocoon_bin_path = cocoon_bin();
    std::vector<std::string> argv{"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", outside.path(), cocoon_bin_path};
    for (const std::string& a : args({minimal_root(), {"--setenv", "HOME", "/usr/lib"}, sh("pwd; echo $PWD")}))
        argv.push_back(a);
    Result r = run(argv);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "/usr/lib\n/usr/lib\n");
}

}  // namespace
}  // namespace cocoon::test
