// e2e: each built-in --agent profile runs a fake agent CLI (a shell script below) that behaves
// like the real one where the layout matters: it finds its variables and its worktree, renews its
// login file by rename at the real CLI's path, reaches a local server standing in for its hosts
// through the proxy variables and through transparent egress, is let through to its own hosts and
// refused others, and finds no fd, variable or file of the caller's that the layout hides; then
// its process group gets SIGINT (which it catches, as the CLIs do to end a turn) and SIGTERM, and
// nothing of it is left. As root (with --host-user cocoon-test) and unprivileged (CI's second pass).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/e2e/relay_support.h"
#include "tests/e2e/stop_support.h"

namespace cocoon::test {
namespace {

using namespace relay_e2e;

// What the real CLI does that the layout must serve: where it keeps its login (under HOME), the
// variables it needs, and the hosts it contacts.
struct Cli {
    std::string profile;
    std::string login;  // "" for none
    bool first_login;  // the caller has no login file yet: the CLI's first one is saved
    std::vector<std::string> variables;  // NAME=VALUE
    std::vector<std::string> hosts;
};

const std::vector<Cli> kClis = {
    {"claude", ".claude/.credentials.json", false, {}, {"api.anthropic.com", "platform.claude.com"}},
    {"codex", ".codex/auth.json", true, {}, {"api.openai.com", "chatgpt.com", "auth.openai.com"}},
    {"gemini",
     ".gemini/oauth_creds.json",
     false,
     {"GEMINI_CLI_TRUST_WORKSPACE=true"},
     {"generativelanguage.googleapis.com", "oauth2.googleapis.com"}},
    {"opencode", ".local/share/opencode/auth.json", true, {}, {"models.opencode.ai", "registry.npmjs.org"}},
    {"generic", "", false, {}, {}},
};

// A test's name in CTest's list: the profile's.
void PrintTo(const Cli& cli, std::ostream* out)
{
    *out << cli.profile;
}

// The fake CLI. $0: the test's marker, which its shells carry; $1: the local server's port; $2:
// the login file's path ("" for none); $3: "first" when the caller had none; $4: the hosts,
// space-separated; then NAME=VALUE variables it needs.
// Prints "FAIL: ..." for each thing that is not as the layout promises, then "ready", then waits
// (a child of its own with it) until a signal other than INT ends it.
const char* kFakeCli = R"SH(
port=$1 login=$2 first=$3 hosts=$4; shift 4
fail() { echo "FAIL: $*"; }
for v in "$@"; do [ "$(printenv "${v%%=*}")" = "${v#*=}" ] || fail "variable ${v%%=*}"; done
[ "$HTTPS_PROXY" = http://127.0.0.1:3128 ] && [ "$HTTP_PROXY" = http://127.0.0.1:3128 ] || fail "proxy variables"
[ "$TERM" = caller-term ] || fail "TERM is '$TERM'"
[ -z "${CALLER_SECRET+x}" ] || fail "the caller's variable reached the agent"
[ ! -e /proc/self/fd/7 ] || fail "the caller's fd 7 reached the agent"
[ ! -e "$HOME/caller-file" ] && [ -d "$HOME" ] || fail "the caller's home reached the agent"
[ "$(hostname)" = sandbox ] || fail "hostname $(hostname)"
! cat /etc/shadow >/dev/null 2>&1 || fail "/etc/shadow is readable"
[ "$(grep '^CapEff' /proc/self/status | tr -d '\t')" = CapEff:0000000000000000 ] || fail "capabilities"
touch made-by-agent || fail "the worktree is not writable"
! touch .git/hook 2>/dev/null || fail "the worktree's .git is writable"
if [ -n "$login" ]; then
  if [ "$first" = first ]; then [ ! -e "$login" ] || fail "a login file before the first login"
  else [ "$(cat "$login")" = "login v1" ] || fail "login file: '$(cat "$login")'"; fi
  mkdir -p "${login%/*}" && printf 'login v2\n' > "$login.tmp" && mv "$login.tmp" "$login" || fail "renewal"
fi
[ "$(env -u NO_PROXY -u no_proxy curl -sS --max-time 10 -x "$HTTPS_PROXY" http://localhost:$port/proxy)" = agent ] ||
  fail "the local server through the proxy"
[ "$(curl -sS --max-time 10 --noproxy '*' http://localhost.:$port/transparent)" = agent ] ||
  fail "the local server through transparent egress"
for h in $hosts unlisted.example.org; do curl -s -o /dev/null --max-time 3 -x "$HTTPS_PROXY" https://$h/ & done
wait
trap 'echo got INT' INT
sh -c "sleep 300; : $0-leftover" &
echo ready
while :; do sleep 1; done
)SH";

// A word as sh reads it back.
std::string quoted(const std::string& word)
{
    std::string out = "'";
    for (char c : word)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// The sh line that starts cocoon --agent with the fake CLI as the caller would: from the worktree,
// with the egress log on fd 3, fd 7 left open, a variable of its own and HOME the given home; the
// local server (`port`) and its address allowed, and a hosts file without localhost over
// /etc/hosts, so that transparent egress is asked.
std::string agent_line(const Cli& cli, const std::string& home, const std::string& wt, const std::string& logs,
                       const std::string& marker, const std::string& port, const std::string& login)
{
    std::vector<std::string> command = {cocoon_bin()};
    if (is_root())
        command.insert(command.end(), {"--host-user", kTestUser});
    command.insert(command.end(), {"--agent",
                                   cli.profile,
                                   "--egress-allow",
                                   "localhost:" + port,
                                   "--egress-allow",
                                   "127.0.0.1:" + port,
                                   "--ro-bind",
                                   logs + "/hosts",
                                   "/etc/hosts",
                                   "--egress-log",
                                   "3",
                                   "--",
                                   "/bin/sh",
                                   "-c",
                                   kFakeCli,
                                   marker,
                                   port,
                                   login,
                                   cli.first_login ? "first" : "",
                                   spaced(cli.hosts)});
    command.insert(command.end(), cli.variables.begin(), cli.variables.end());
    std::string line = "cd " + quoted(wt) + " && exec 3>" + quoted(logs + "/egress.log") + " 7<" +
                       quoted(logs + "/fd7") + " && exec env -u XDG_CONFIG_HOME HOME=" + quoted(home) +
                       " TERM=caller-term CALLER_SECRET=token";
    for (const std::string& word : command)
        line += " " + quoted(word);
    return line;
}

// Egress as the log tells it: each of the CLI's hosts let through (whatever the network then did
// with it), an unlisted one refused.
void expect_hosts_let_through(const Cli& cli, const std::string& log)
{
    for (const std::string& host : cli.hosts) {
        EXPECT_TRUE(contains(log, "\"host\": \"" + host + "\"")) << host << " never asked for:\n" << log;
        EXPECT_FALSE(contains(log, "\"host\": \"" + host + "\", \"port\": 443, \"result\": \"refused\""))
            << host << " refused:\n"
            << log;
    }
    EXPECT_TRUE(contains(log, "\"host\": \"unlisted.example.org\", \"port\": 443, \"result\": \"refused\"")) << log;
}

class AgentRun : public ::testing::TestWithParam<Cli> {};

TEST_P(AgentRun, TheFakeCliFindsWhatItNeedsAndNothingElseAndLeavesNothing)
{
    const Cli& cli = GetParam();
    const std::optional<TestUser> user = test_user();
    if (is_root()) {
        ASSERT_TRUE(user) << kNoTestUser;
    }
    TempDir home, wt, logs;
    ASSERT_EQ(::mkdir((wt / ".git").c_str(), 0755), 0);
    if (is_root()) {
        ASSERT_EQ(::chown(wt.path().c_str(), user->uid, user->gid), 0);
    }
    write_file(home / "caller-file", "the caller's own\n", 0600);
    const std::string login = cli.login.empty() ? "" : home / cli.login;
    if (!cli.login.empty() && !cli.first_login) {
        ASSERT_EQ(::mkdir(login.substr(0, login.rfind('/')).c_str(), 0700), 0);
        write_file(login, "login v1\n", 0600);
    }
    write_file(logs / "hosts", "127.0.0.1 nothing-here\n");  // no localhost: the resolver inside answers
    write_file(logs / "fd7", "the caller's fd\n");
    HttpServer web("agent");
    const std::string port = std::to_string(web.port());
    const std::string marker = unique_marker("agent-run");

    const std::string line = agent_line(cli, home.path(), wt.path(), logs.path(), marker, port, login);
    const std::vector<std::string> mounts_before = mount_table();
    // setsid: cocoon leads a process group of its own, as an orchestrator starts it.
    const pid_t group = start_logged({"/usr/bin/setsid", "/bin/sh", "-c", line}, logs / "out");
    const std::string out_path = logs / "out";
    const bool ready = wait_until([&] { return contains(read_file(out_path), "ready\n"); }, 30000);
    EXPECT_TRUE(ready) << read_file(out_path);
    if (!login.empty()) {
        EXPECT_TRUE(wait_until([&] { return exists(login) && read_file(login) == "login v2\n"; }, 5000))
            << cli.profile << ": the renewal did not reach " << login;
    }
    ::kill(-group, SIGINT);
    EXPECT_TRUE(wait_until([&] { return contains(read_file(out_path), "got INT"); }, 5000)) << read_file(out_path);
    ::kill(-group, SIGTERM);
    const int code = wait_exit(group, 20000);
    const std::string out = read_file(out_path);
    EXPECT_EQ(code, 128 + SIGTERM) << out;
    EXPECT_FALSE(contains(out, "FAIL")) << cli.profile << ":\n" << out;
    EXPECT_FALSE(contains(out, "cocoon:")) << out;
    EXPECT_TRUE(processes_with(marker).empty())
        << "a process of the sandbox outlived it (the agent's child among them)";
    EXPECT_EQ(mount_table(), mounts_before);
    EXPECT_TRUE(exists(wt / "made-by-agent"));
    EXPECT_FALSE(exists(wt / ".git/hook"));
    if (!login.empty()) {
        EXPECT_EQ(read_file(login), "login v2\n");
        struct stat st;
        ASSERT_EQ(::stat(login.c_str(), &st), 0);
        EXPECT_EQ(st.st_uid, ::getuid()) << "SRC is the caller's";
        EXPECT_EQ(st.st_mode & 07777, 0600U);
    }
    // Egress: the stand-in reached both ways.
    EXPECT_EQ(web.requests().size(), 2U);
    expect_hosts_let_through(cli, read_file(logs / "egress.log"));
}

INSTANTIATE_TEST_SUITE_P(Profiles, AgentRun, ::testing::ValuesIn(kClis),
                         [](const ::testing::TestParamInfo<Cli>& param) { return param.param.profile; });

}  // namespace
}  // namespace cocoon::test
