// --host-user (issue 20, item 5): a root caller's sandbox acts on the host as an unprivileged
// user, never as root. Each attack is tried with a control run without the option, as root with
// --cap-drop ALL, where it works (so these tests can fail), then with it, where it must not:
// reading /etc/shadow, writing the host's cgroup files from a nested user namespace. Then what
// must keep working: files in the worktree and the fresh home are the user's, every process of
// the sandbox has the user's ids seen from the host, the README's recipe runs (login file, egress,
// relay, report). The static probe (tests/e2e/probe/host_user_probe.cc) makes the attempts.
// Root only, but for the refusal to a non-root caller, which the unprivileged pass tries.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <thread>

#include "base/unique_fd.h"
#include "ns/monitor/cgroup.h"
#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/support/refusal.h"
#include "tests/support/socket.h"

namespace cocoon::test {
namespace {

constexpr const char* kUser = kTestUser;
constexpr const char* kNeedsRoot =
    "needs a root caller: --host-user is refused to any other (HostUserRefusal.RefusedToANonRootCaller, "
    "which the unprivileged pass runs, tries that)";

std::string host_user_probe()
{
    return sibling_binary("cocoon_host_user_probe");
}

// cocoon run as root with supplementary groups as well, gid 0 and shadow's (which may read
// /etc/shadow): what an orchestrator's root often has, and what must not follow the command in.
std::vector<std::string> with_root_groups()
{
    group* shadow = ::getgrnam("shadow");
    return {"/usr/bin/setpriv", "--groups", "0," + std::to_string(shadow ? shadow->gr_gid : 0), "--", cocoon_bin()};
}

// An agent's sandbox: every namespace, the system read-only (/etc too, where /etc/shadow is),
// the probe at /probe.
std::vector<std::string> layout()
{
    return args({minimal_root(),
                 {"--unshare-all", "--die-with-parent", "--ro-bind", "/etc", "/etc", "--proc", "/proc", "--dev", "/dev",
                  "--tmpfs", "/tmp", "--ro-bind", host_user_probe(), "/probe"}});
}

class HostUser : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (!is_root())
            GTEST_SKIP() << kNeedsRoot;
        ASSERT_EQ(::access(host_user_probe().c_str(), X_OK), 0) << host_user_probe() << " is missing";
        std::optional<TestUser> user = test_user();
        ASSERT_TRUE(user) << kNoTestUser;
        m_user = *user;
    }

    Result as_user(const std::vector<std::string>& options, const std::vector<std::string>& command) const
    {
        return run(args({with_root_groups(), layout(), {"--host-user", kUser}, options, command}));
    }

    TestUser m_user;
};

// The class: with --cap-drop ALL, root's sandbox still reads /etc/shadow through the read-only
// /etc (its uid 0 owns it). As the user, not even with every capability in its namespace.
TEST_F(HostUser, RootsFilesAreOutOfReach)
{
    Result control = cocoon(args({layout(), {"--cap-drop", "ALL", "/probe", "read", "/etc/shadow"}}));
    ASSERT_EQ(control.code, 0) << control.err;
    EXPECT_EQ(control.out, "/etc/shadow ok\n") << "the control run could not read /etc/shadow as root";
    // And the group: the user itself may not read it, but with root's supplementary groups (shadow
    // among them) it could: so they must not follow the command in.
    group* shadow = ::getgrnam("shadow");
    if (shadow) {
        const std::string u = std::to_string(m_user.uid), g = std::to_string(m_user.gid);
        control = run({"/usr/bin/setpriv", "--reuid", u, "--regid", g, "--groups", std::to_string(shadow->gr_gid), "--",
                       host_user_probe(), "read", "/etc/shadow"});
        EXPECT_EQ(control.out, "/etc/shadow ok\n") << "shadow's group cannot read /etc/shadow here";
    }
    for (const std::vector<std::string>& caps :
         {std::vector<std::string>{}, {"--cap-drop", "ALL"}, {"--cap-add", "ALL"}}) {
        Result r = as_user(caps, {"/probe", "read", "/etc/shadow"});
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "/etc/shadow EACCES\n") << testing::PrintToString(caps);
    }
}

// The class: a nested user namespace needs no id map to hold capabilities until its exec, and
// its uid stays the one it was made by. For root's sandbox that is the host's uid 0, which owns
// the cgroup files of the caller's cgroup: the control mounts cgroup2 (and the v1 pids
// hierarchy, where there is one) and writes them (each write puts back what the file held). As
// the user, every write is refused, with capabilities too, and in a cgroup cocoon made.
TEST_F(HostUser, NoHostCgroupFileIsWritableThroughANestedUserNamespace)
{
    const std::vector<std::string> attempt{"/probe", "cgroup", "/tmp"};
    Result control = cocoon(args({layout(), {"--cap-drop", "ALL"}, attempt}));
    ASSERT_EQ(control.code, 0) << control.err;
    const auto open = results(control.out);
    ASSERT_EQ(open.count("v2-mount"), 1u) << control.out;
    if (open.at("v2-mount") != "ok")
        GTEST_SKIP() << "cgroup2 cannot be mounted here (" << open.at("v2-mount") << "), not even by root's "
                     << "sandbox: there is no cgroup file to try";
    // The attack works without --host-user. (A write of cgroup.procs may also meet EBUSY, where
    // the caller's cgroup has controllers enabled for children: no process may join it then.)
    EXPECT_EQ(open.count("v2-max-descendants") ? open.at("v2-max-descendants") : "", "ok") << control.out;
    std::vector<std::string> tried;
    for (const auto& [name, outcome] : open)
        if (name.find("-mount") == std::string::npos)
            tried.push_back(name);
    ASSERT_GE(tried.size(), 3u) << control.out;

    const ns::OwnCgroup own = ns::own_cgroup();
    ASSERT_FALSE(own.mount.empty());
    static std::atomic<int> serial;
    const std::string parent =
        own.mount + "/cocoon-e2e-hostuser-" + std::to_string(::getpid()) + "-" + std::to_string(serial++);
    ASSERT_EQ(::mkdir(parent.c_str(), 0755), 0) << parent << ": " << std::strerror(errno);
    for (const std::vector<std::string>& more :
         {std::vector<std::string>{"--cap-drop", "ALL"}, {"--cap-add", "ALL"}, {"--cgroup-parent", parent}}) {
        Result r = as_user(more, attempt);
        EXPECT_EQ(r.code, 0) << r.err;
        const auto got = results(r.out);
        EXPECT_EQ(got.count("v2-mount") ? got.at("v2-mount") : "", "ok") << r.out;
        for (const std::string& name : tried) {
            const std::string outcome = got.count(name) ? got.at(name) : "(not tried)";
            if (open.at(name) == "ok")
                EXPECT_EQ(outcome, "EACCES") << name << " with " << testing::PrintToString(more) << ":\n" << r.out;
            else
                EXPECT_NE(outcome, "ok") << name << " with " << testing::PrintToString(more) << ":\n" << r.out;
        }
    }
    EXPECT_EQ(::rmdir(parent.c_str()), 0) << parent << " is left: " << std::strerror(errno);
}

// The host's uid 0 is exempt from RLIMIT_NPROC in any user namespace, so root's fork bomb runs
// unbounded under the caller's limit (the control). USER is not: the limit counts USER's
// processes and stops it.
TEST_F(HostUser, TheProcessLimitBindsIt)
{
    const std::string bomb = sibling_binary("cocoon_escape_probe");
    ASSERT_EQ(::access(bomb.c_str(), X_OK), 0) << bomb << " is missing";
    auto run_bomb = [&](const std::vector<std::string>& options) {
        return run(args({{"/usr/bin/prlimit", "--nproc=64", cocoon_bin()},
                         minimal_root(),
                         {"--unshare-all", "--ro-bind", bomb, "/bomb"},
                         options,
                         {"/bomb", "forkbomb", "300"}}));
    };
    Result control = run_bomb({"--cap-drop", "ALL"});
    EXPECT_EQ(control.out, "forked 300 then unbounded\n") << control.err;
    Result r = run_bomb({"--host-user", kUser});
    EXPECT_TRUE(std::regex_match(r.out, std::regex("forked [0-9] then EAGAIN\n|forked [1-5][0-9] then EAGAIN\n|"
                                                   "forked 6[0-4] then EAGAIN\n")))
        << r.out << r.err;
}

// Files the command makes in the worktree (given to the user, as the README says) belong to the
// user on the host, whatever --uid the sandbox has; inside, its ids are the sandbox's, mapped
// to the user and nothing else, with no supplementary group (root's gid 0 is one).
TEST_F(HostUser, WhatTheCommandMakesIsTheUsers)
{
    TempDir wt;
    ASSERT_EQ(::chown(wt.path().c_str(), m_user.uid, m_user.gid), 0);
    const std::string script = "echo x > file; mkdir -p dir/sub; touch dir/sub/f ~/home-file; "
                               "stat -c 'home %u:%g %a' ~; cat /proc/self/status /proc/self/uid_map /proc/self/gid_map";
    const std::string u = std::to_string(m_user.uid), g = std::to_string(m_user.gid);
    for (const auto& [options, inside] :
         {std::pair{std::vector<std::string>{"--cap-drop", "ALL"}, std::string("0")},
          std::pair{std::vector<std::string>{"--unshare-user", "--uid", "1000", "--gid", "1001"},
                    std::string("1000")}}) {
        Result r = as_user(
            args({options, {"--bind", wt.path(), wt.path(), "--chdir", wt.path(), "--fresh-home", "/home/agent"}}),
            sh(script + "; rm -r file dir"));
        ASSERT_EQ(r.code, 0) << r.err;
        const std::string gid_inside = inside == "0" ? "0" : "1001";
        EXPECT_EQ(status_field(r.out, "Uid"), inside + "\t" + inside + "\t" + inside + "\t" + inside);
        EXPECT_EQ(status_field(r.out, "Gid"), gid_inside + "\t" + gid_inside + "\t" + gid_inside + "\t" + gid_inside);
        EXPECT_EQ(status_field(r.out, "Groups"), "") << "root's supplementary groups followed the command in";
        EXPECT_TRUE(std::regex_search(r.out, std::regex("\n +" + inside + " +" + u + " +1\n"))) << r.out;
        EXPECT_TRUE(std::regex_search(r.out, std::regex("\n +" + gid_inside + " +" + g + " +1\n"))) << r.out;
        EXPECT_TRUE(contains(r.out, "home " + inside + ":" + gid_inside + " 700\n")) << r.out;
    }
    // Made again, kept this time, and looked at from the host.
    Result r = as_user({"--bind", wt.path(), wt.path(), "--chdir", wt.path()}, sh(script));
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* name : {"file", "dir", "dir/sub", "dir/sub/f"}) {
        struct stat st;
        ASSERT_EQ(::lstat((wt / name).c_str(), &st), 0) << name;
        EXPECT_EQ(st.st_uid, m_user.uid) << name;
        EXPECT_EQ(st.st_gid, m_user.gid) << name;
    }
}

// A sandbox left running: --info-fd on a pipe, the command saying "ready" on stdout once it
// runs, then waiting for EOF on its stdin, which the destructor closes.
class HostUserSandbox {
public:
    explicit HostUserSandbox(const std::vector<std::string>& options)
    {
        int info[2], in[2], out[2];
        // stdout is a socket: its reads time out instead of hanging the suite.
        if (::pipe2(info, O_CLOEXEC) < 0 || ::pipe2(in, O_CLOEXEC) < 0 ||
            ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out) < 0)
            throw std::runtime_error("pipe2");
        std::vector<std::string> argv =
            args({with_root_groups(), options, {"--info-fd", "3", "sh", "-c", "echo ready; read x; true"}});
        m_pid = ::fork();
        if (m_pid == 0) {
            ::dup2(in[0], 0);
            ::dup2(out[1], 1);
            ::dup2(info[1], 3);
            std::vector<char*> raw;
            for (auto& a : argv)
                raw.push_back(a.data());
            raw.push_back(nullptr);
            ::execv(raw[0], raw.data());
            ::_exit(127);
        }
        for (int fd : {info[1], in[0], out[1]})
            ::close(fd);
        m_stdin.reset(in[1]);
        UniqueFd info_read(info[0]), out_read(out[0]);
        set_timeouts(out_read.get(), std::chrono::seconds(10));
        std::string text;
        char buf[512];
        for (ssize_t n; text.find('}') == std::string::npos && (n = ::read(info_read.get(), buf, sizeof buf)) > 0;)
            text.append(buf, static_cast<size_t>(n));
        std::smatch m;
        if (std::regex_search(text, m, std::regex("\"child-pid\": ([0-9]+)")))
            m_child = static_cast<pid_t>(std::stol(m[1]));
        m_ready = read_line(out_read.get()) == "ready";
    }
    ~HostUserSandbox()
    {
        m_stdin.reset();
        int status;
        ::waitpid(m_pid, &status, 0);
    }
    pid_t child_pid() const { return m_child; }
    bool ready() const { return m_ready; }

private:
    pid_t m_pid = -1;
    pid_t m_child = -1;
    bool m_ready = false;
    UniqueFd m_stdin;
};

// pid and its descendants, from the host's /proc.
std::vector<pid_t> process_tree(pid_t pid)
{
    std::vector<pid_t> out{pid};
    for (size_t i = 0; i < out.size(); ++i) {
        const std::string tasks = "/proc/" + std::to_string(out[i]) + "/task";
        std::error_code ec;
        for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
            std::istringstream children(read_file(task.path().string() + "/children"));
            for (pid_t child; children >> child;)
                out.push_back(child);
        }
    }
    return out;
}

// Seen from the host, every process of the sandbox, PID 1 (in each of its forms: the reaper
// forked by vfork, re-executed for --info-fd, the command itself) and the command, has the
// user's ids as real, effective, saved and fs ids, and no supplementary group.
TEST_F(HostUser, NoProcessOfTheSandboxHasRootsIds)
{
    const std::string u = std::to_string(m_user.uid), g = std::to_string(m_user.gid);
    const std::vector<std::vector<std::string>> variants{
        {"--unshare-all", "--cap-drop", "ALL"},  // PID 1 re-executed (--info-fd)
        {"--unshare-all"},  // root's capabilities, in the sandbox's namespace: PID 2 by vfork
        {"--unshare-all", "--as-pid-1"},
        {"--unshare-user", "--unshare-net"},  // no PID namespace: the first process is the command
        {"--unshare-all", "--unshare-user", "--disable-userns"},  // the command in a nested namespace
    };
    for (const std::vector<std::string>& options : variants) {
        SCOPED_TRACE(testing::PrintToString(options));
        HostUserSandbox box(args({minimal_root(), {"--proc", "/proc", "--host-user", kUser}, options}));
        ASSERT_TRUE(box.ready()) << "the command did not start";
        ASSERT_GT(box.child_pid(), 0);
        const std::vector<pid_t> tree = process_tree(box.child_pid());
        const bool reaper = options[0] == "--unshare-all" && options.back() != "--as-pid-1";
        EXPECT_EQ(tree.size(), reaper ? 2u : 1u);
        for (pid_t pid : tree) {
            const std::string status = read_file("/proc/" + std::to_string(pid) + "/status");
            EXPECT_EQ(status_field(status, "Uid"), u + "\t" + u + "\t" + u + "\t" + u) << "pid " << pid;
            EXPECT_EQ(status_field(status, "Gid"), g + "\t" + g + "\t" + g + "\t" + g) << "pid " << pid;
            EXPECT_EQ(status_field(status, "Groups"), "") << "pid " << pid;
        }
    }
}

// The README's recipe as root: every option of it works under --host-user. The login file
// starts as root's SRC and is the command's to read and renew; a renewal made on the host
// meanwhile reaches DEST (the monitor, root, writes it as the command's own file); the relay
// and --egress (a refusal: no network needed) and the report work; what the command leaves in the worktree is the
// user's.
TEST_F(HostUser, TheRecipeRunsAsTheUser)
{
    TempDir wt, state, sockets;
    ASSERT_EQ(::chown(wt.path().c_str(), m_user.uid, m_user.gid), 0);
    ASSERT_EQ(::mkdir((wt / ".git").c_str(), 0755), 0);
    ASSERT_EQ(::chmod(state.path().c_str(), 0700), 0);  // root's: the user cannot reach SRC
    write_file(state / "login.json", "v1\n", 0600);

    // The proxy behind --relay: echoes one line back.
    const std::string socket_path = sockets / "proxy.sock";
    UniqueFd listener = listen_on(unix_address(socket_path));
    std::thread proxy([&] {
        UniqueFd client(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
        if (!client)
            return;
        set_timeouts(client.get(), std::chrono::seconds(10));
        if (std::optional<std::string> line = read_line(client.get()))
            send_all(client.get(), "echo " + *line + "\n");
    });
    // The host renews the login while the command waits for it.
    std::thread renewer([&] {
        for (int i = 0; i < 1000 && !exists(wt / "ready"); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        write_file(state / "login.new", "v2 from the host\n", 0600);
        std::rename((state / "login.new").c_str(), (state / "login.json").c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        write_file(wt / "go", "");
    });

    const std::string home = "/home/agent", dest = home + "/.agent/login.json";
    // (--egress's socat keeps its side open: a client that half-closes right after its request
    // may get no answer, --egress and --host-user or not.)
    const std::string script = "cat " + dest + "; : > ready; while [ ! -e go ]; do sleep 0.05; done; cat " + dest +
                               "; echo hello | socat -t 5 - TCP:127.0.0.1:3128"
                               "; printf 'CONNECT unlisted.invalid:443 HTTP/1.1\\r\\n\\r\\n' | timeout 5 socat "
                               "-,ignoreeof TCP:127.0.0.1:3129 | "
                               "head -n 1"
                               "; echo made > made; echo v3 > " +
                               dest + ".tmp; mv " + dest + ".tmp " + dest;
    const std::vector<std::string> recipe{"--no-follow-sources", "--unshare-all",
                                          "--die-with-parent",   "--new-session",
                                          "--close-fds",         "--forward-signals",
                                          "--kill-after",        "10",
                                          "--json-status-fd",    "3",
                                          "--host-user",         kUser,
                                          "--cap-drop",          "ALL"};
    const std::vector<std::string> mounts{"--ro-bind", "/etc",    "/etc", "--proc",       "/proc", "--dev",
                                          "/dev",      "--tmpfs", "/tmp", "--fresh-home", home};
    const std::vector<std::string> agent{"--login-file", state / "login.json", dest,        "--bind",    wt.path(),
                                         wt.path(),      "--ro-bind",          wt / ".git", wt / ".git", "--chdir",
                                         wt.path()};
    const std::vector<std::string> network{"--relay",  "3128", socket_path,      "--proxy-env", "3128",
                                           "--egress", "3129", "--egress-allow", "example.com"};
    // Through sh, for the report's fd 3; each word single-quoted.
    std::string line = "exec";
    for (const std::string& word :
         args({{cocoon_bin()}, recipe, minimal_root(), mounts, agent, network, {"sh", "-c", script}}))
        line += " '" + std::regex_replace(word, std::regex("'"), "'\\''") + "'";
    Result r = run({"/bin/sh", "-c", line + " 3>'" + (state / "status.json") + "'"});
    renewer.join();
    ::shutdown(listener.get(), SHUT_RDWR);
    proxy.join();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "v1\nv2 from the host\necho hello\nHTTP/1.1 403 Forbidden\r\n");
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(read_file(state / "login.json"), "v3\n");
    struct stat st;
    ASSERT_EQ(::stat((state / "login.json").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << "SRC keeps its owner";
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    ASSERT_EQ(::stat((wt / "made").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, m_user.uid);
    EXPECT_EQ(st.st_gid, m_user.gid);
    const std::string status = read_file(state / "status.json");
    EXPECT_TRUE(contains(status, "\"exit-code\": 0")) << status;
}

// Refused before anything exists: an unknown user or group, root's ids, a joined or
// caller-mapped user namespace. One line naming --host-user, exit 1, the host as it was.
TEST_F(HostUser, UnknownUsersAndRootAreRefused)
{
    TempDir dir;
    HostSnapshot host("host-user-refused", dir.path());
    for (const auto& [spec, words] : std::vector<std::pair<std::string, std::string>>{
             {"no-such-user-cocoon", "no user no-such-user-cocoon in /etc/passwd"},
             {std::string(kUser) + ":no-such-group-cocoon", "no group no-such-group-cocoon in /etc/group"},
             {"root", "that is uid 0 (root)"},
             {"0", "that is uid 0 (root)"},
             {std::string(kUser) + ":0", "gid 0"},
             {"4000000", "has no entry in /etc/passwd"},
             {"", "give USER or USER:GROUP"}}) {
        Result r = cocoon(args(
            {minimal_root(), {"--bind", dir.path(), "/wt", "--host-user", spec}, host.mark(), {"touch", "/wt/made"}}));
        expect_refused(r, {"--host-user", words});
    }
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    UniqueFd a(fds[0]), b(fds[1]);
    expect_refused(
        cocoon(args(
            {minimal_root(), {"--host-user", kUser, "--userns", std::to_string(a.get())}, {"touch", dir / "made"}})),
        {"--host-user cannot be combined with --userns"});
    host.expect_unchanged();
}

}  // namespace

// The unprivileged pass: a caller that is not root already acts on the host as itself, and may
// not map its sandbox to anyone else: refused in one line, nothing made.
TEST(HostUserRefusal, RefusedToANonRootCaller)
{
    if (is_root())
        GTEST_SKIP() << "needs a non-root caller (the unprivileged pass of tools/test runs it)";
    TempDir dir;
    HostSnapshot host("host-user-non-root", dir.path());
    for (const char* spec : {"cocoon-test", "root", "nobody"}) {
        Result r = cocoon(args(
            {minimal_root(), {"--bind", dir.path(), "/wt", "--host-user", spec}, host.mark(), {"touch", "/wt/made"}}));
        expect_refused(r, {"--host-user needs a root caller: this is uid " + std::to_string(::getuid())});
    }
    host.expect_unchanged();
}

}  // namespace cocoon::test
