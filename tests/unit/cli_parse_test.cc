// Unit tests of the command line (tools/cocoon/cli.cc, tools/cocoon/option_table.cc): what parse_args makes of an argv.
#include <fcntl.h>
#include <sched.h>

#include <algorithm>

#include "tests/unit/cli_support.h"

using namespace cocoon;
using namespace cocoon::cli_test;
using namespace std::string_literals;

TEST(ParseArgs, SplitsAtDoubleDash)
{
    Options o = parse_args({"--unshare-net", "--", "--not-an-option", "x"});
    EXPECT_TRUE(o.unshare_net);
    EXPECT_EQ(o.command, (std::vector<std::string>{"--not-an-option", "x"}));
}

TEST(ParseArgs, SplitsAtFirstNonOption)
{
    Options o = parse_args({"--chdir", "/tmp", "sh", "-c", "--bind"});
    EXPECT_EQ(o.process.chdir, "/tmp");
    EXPECT_EQ(o.command, (std::vector<std::string>{"sh", "-c", "--bind"}));
}

TEST(ParseArgs, OptionArgumentsAreNotTheCommand)
{
    Options o = parse_args({"--setenv", "A", "value", "--hostname", "h", "true"});
    ASSERT_EQ(o.env.size(), 1u);
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[0]).value, "value");
    EXPECT_EQ(o.process.hostname, "h");
    EXPECT_EQ(o.command, (std::vector<std::string>{"true"}));
}

TEST(ParseArgs, KeepsMountOrderAndRepeats)
{
    Options o = parse_args({"--tmpfs", "/a",     "--ro-bind", "/s",         "/a/b", "--bind-try",   "/t",  "/c",
                            "--dev",   "/dev",   "--symlink", "usr/lib",    "/lib", "--remount-ro", "/a",  "--dir",
                            "/d",      "--proc", "/proc",     "--dev-bind", "/x",   "/y",           "true"});
    ASSERT_EQ(o.mounts.size(), 9u);
    EXPECT_TRUE(std::holds_alternative<mount::Tmpfs>(o.mounts[0]));
    EXPECT_EQ(std::get<mount::Bind>(o.mounts[1]).kind, mount::BindKind::ReadOnly);
    EXPECT_TRUE(std::get<mount::Bind>(o.mounts[2]).optional);
    EXPECT_TRUE(std::holds_alternative<mount::Dev>(o.mounts[3]));
    EXPECT_EQ(std::get<mount::Symlink>(o.mounts[4]).target, "usr/lib");
    EXPECT_TRUE(std::holds_alternative<mount::RemountRo>(o.mounts[5]));
    EXPECT_TRUE(std::holds_alternative<mount::Dir>(o.mounts[6]));
    EXPECT_TRUE(std::holds_alternative<mount::Proc>(o.mounts[7]));
    EXPECT_EQ(std::get<mount::Bind>(o.mounts[8]).kind, mount::BindKind::Dev);
}

// The limits' values reach the plan as bytes and tasks; the cgroup writes them as they are.
TEST(ParseArgs, CgroupLimits)
{
    Options o = parse_args({"--cgroup-parent", "/sys/fs/cgroup/x", "--memory-max", "3G", "--pids-max", "64", "true"});
    EXPECT_EQ(o.process.cgroup.parent, "/sys/fs/cgroup/x");
    EXPECT_EQ(o.process.cgroup.memory_max, 3ULL << 30);
    EXPECT_EQ(o.process.cgroup.pids_max, 64U);
    for (auto [text, bytes] : {std::pair{"4096", 4096ULL}, std::pair{"8K", 8ULL << 10}, std::pair{"512M", 512ULL << 20},
                               std::pair{"2T", 2ULL << 40}})
        EXPECT_EQ(parse_args({"--memory-max", text, "true"}).process.cgroup.memory_max, bytes) << text;
    for (const char* bad : {"", "0", "1k", "1MB", "M", "-1", "0x10", "99999999999T"})
        EXPECT_THROW(parse_args({"--memory-max", bad, "true"}), UsageError) << bad;
    for (const char* bad : {"", "0", "-1", "1.5", "3000000000"})
        EXPECT_THROW(parse_args({"--pids-max", bad, "true"}), UsageError) << bad;
    EXPECT_FALSE(parse_args({"true"}).process.cgroup.has_limit());
}

TEST(ParseArgs, UnshareAllThenShareNet)
{
    Options o = parse_args({"--unshare-all", "--share-net", "true"});
    EXPECT_TRUE(o.unshare_pid && o.unshare_ipc && o.unshare_uts && o.unshare_user_try && o.unshare_cgroup_try);
    EXPECT_FALSE(o.unshare_net);
    EXPECT_TRUE(parse_args({"--share-net", "--unshare-all", "true"}).unshare_net);
}

TEST(ParseArgs, Errors)
{
    EXPECT_THROW(parse_args({"--no-such-option", "true"}), UsageError);
    EXPECT_THROW(parse_args({"-x", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--bind", "/only-one"}), UsageError);
    EXPECT_THROW(parse_args({"--uid", "12x", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--uid", "-1", "true"}), UsageError);
    // No abbreviations: bwrap has none.
    EXPECT_THROW(parse_args({"--unshare-ne", "true"}), UsageError);
    try {
        parse_args({"--ro-bind", "/a"});
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--ro-bind takes two arguments");
    }
}

TEST(ParseArgs, RelayAndProxyEnv)
{
    Options o = parse_args({"--unshare-net", "--relay", "3128", "/run/proxy.sock", "--proxy-env", "3128", "true"});
    ASSERT_EQ(o.process.relays.size(), 1u);
    EXPECT_EQ(o.process.relays[0].port, 3128);
    EXPECT_EQ(o.process.relays[0].socket, "/run/proxy.sock");
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    for (const char* entry :
         {"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128", "http_proxy=http://127.0.0.1:3128",
          "https_proxy=http://127.0.0.1:3128", "ALL_PROXY=http://127.0.0.1:3128", "NO_PROXY=127.0.0.1,localhost,::1",
          "no_proxy=127.0.0.1,localhost,::1", "NODE_USE_ENV_PROXY=1"})
        EXPECT_NE(std::find(p.env.begin(), p.env.end(), entry), p.env.end()) << entry;
    // Order with other environment edits holds: a later --unsetenv wins.
    EXPECT_EQ(std::count(p.env.begin(), p.env.end(), "NODE_USE_ENV_PROXY=1"), 1);
    ns::LaunchPlan q =
        tools::make_launch_plan(parse_args({"--proxy-env", "8080", "--unsetenv", "ALL_PROXY", "true"}), user_host());
    for (const std::string& e : q.env)
        EXPECT_NE(e.rfind("ALL_PROXY=", 0), 0u) << e;
}

TEST(ParseArgs, RelayErrors)
{
    EXPECT_THROW(parse_args({"--relay", "0", "/s", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--relay", "65536", "/s", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--proxy-env", "http", "true"}), UsageError);
    auto plan = [](std::vector<std::string> args) { return tools::make_launch_plan(parse_args(args), user_host()); };
    EXPECT_THROW(plan({"--relay", "80", "/s", "true"}), UsageError);  // no --unshare-net
    EXPECT_THROW(plan({"--unshare-net", "--relay", "80", "s.sock", "true"}), UsageError);
    EXPECT_THROW(plan({"--unshare-net", "--relay", "80", "/a", "--relay", "80", "/b", "true"}), UsageError);
    EXPECT_NO_THROW(plan({"--unshare-all", "--relay", "80", "/a", "--relay", "81", "/a", "true"}));
    EXPECT_THROW(plan({"--unshare-all", "--share-net", "--relay", "80", "/a", "true"}), UsageError);
}

TEST(ParseArgs, StopOptions)
{
    Options o = parse_args({"--unshare-pid", "--forward-signals", "--kill-after", "2.5", "true"});
    EXPECT_TRUE(o.process.forward_signals);
    EXPECT_EQ(o.process.kill_after, 2.5);
    ns::LaunchPlan p = tools::make_launch_plan(o, user_host());
    EXPECT_TRUE(p.process.forward_signals);
    EXPECT_EQ(p.process.kill_after, 2.5);
    EXPECT_THROW(parse_args({"--kill-after", "-1", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--kill-after", "soon", "true"}), UsageError);
    EXPECT_THROW(parse_args({"--kill-after", "nan", "true"}), UsageError);
    auto plan = [](std::vector<std::string> args) { return tools::make_launch_plan(parse_args(args), user_host()); };
    EXPECT_THROW(plan({"--forward-signals", "true"}), UsageError);
    EXPECT_THROW(plan({"--kill-after", "1", "true"}), UsageError);
    EXPECT_EQ(parse_args({"--json-status-fd", "3", "--info-fd", "4", "true"}).fds.json_status, 3);
    EXPECT_THROW(parse_args({"--info-fd", "x", "true"}), UsageError);
}

TEST(ParseArgs, DataOptionsHaveBwrapsDefaultModes)
{
    Options o = parse_args({"--file", "3", "/f", "--bind-data", "4", "/bd", "--ro-bind-data", "5", "/rbd", "--dir",
                            "/d", "--tmpfs", "/t", "true"});
    ASSERT_EQ(o.mounts.size(), 5u);
    EXPECT_EQ(op<mount::Data>(o, 0).kind, mount::DataKind::File);
    EXPECT_EQ(op<mount::Data>(o, 0).fd, 3);
    EXPECT_EQ(op<mount::Data>(o, 0).dest, "/f");
    EXPECT_EQ(op<mount::Data>(o, 0).mode, 0666u);
    EXPECT_EQ(op<mount::Data>(o, 1).kind, mount::DataKind::Bind);
    EXPECT_EQ(op<mount::Data>(o, 1).mode, 0600u);
    EXPECT_EQ(op<mount::Data>(o, 2).kind, mount::DataKind::RoBind);
    EXPECT_EQ(op<mount::Data>(o, 2).mode, 0600u);
    EXPECT_EQ(op<mount::Dir>(o, 3).mode, 0755u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).mode, 0755u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).size, 0u);
    for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(op<mount::Data>(o, i).parent_mode, 0755u);
}

// cocoon's tmpfs bounds (SECURITY.md, "memory the bound does not cover"): --size also sizes
// --dev's shm, the login file's directory and --tmp-overlay's upper layer; each has a default.
TEST(ParseArgs, SizeBoundsShmTheLoginDirAndTheTmpOverlay)
{
    Options defaults = parse_args(
        {"--dev", "/dev", "--login-file", "/c", "/h/c", "--overlay-src", "/l", "--tmp-overlay", "/o", "true"});
    ASSERT_EQ(defaults.mounts.size(), 3u);
    EXPECT_EQ(op<mount::Dev>(defaults, 0).shm_size, mount::kShmSize);
    EXPECT_EQ(op<mount::Tmpfs>(defaults, 1).dest, "/h");
    EXPECT_EQ(op<mount::Tmpfs>(defaults, 1).size, mount::kLoginDirSize);
    EXPECT_EQ(op<mount::Overlay>(defaults, 2).size, 0u);
    Options sized =
        parse_args({"--size", "100", "--dev", "/dev", "--size", "200", "--login-file", "/c", "/h/c", "--size", "300",
                    "--overlay-src", "/l", "--tmp-overlay", "/o", "--tmpfs", "/t", "true"});
    ASSERT_EQ(sized.mounts.size(), 4u);
    EXPECT_EQ(op<mount::Dev>(sized, 0).shm_size, 100u);
    EXPECT_EQ(op<mount::Tmpfs>(sized, 1).size, 200u);
    EXPECT_EQ(op<mount::Overlay>(sized, 2).size, 300u);
    EXPECT_EQ(op<mount::Tmpfs>(sized, 3).size, 0u);
    // An earlier tmpfs at the login file's directory keeps its size; a --size for it is refused.
    EXPECT_EQ(parse_error({"--fresh-home", "/h", "--size", "1", "--login-file", "/c", "/h/c", "true"}),
              "--size before --login-file /c /h/c: /h is a tmpfs given earlier, which keeps its own size");
    Options shared = parse_args({"--size", "5", "--tmpfs", "/h", "--login-file", "/c", "/h/c", "true"});
    ASSERT_EQ(shared.mounts.size(), 1u);
    EXPECT_EQ(op<mount::Tmpfs>(shared, 0).size, 5u);
    // The other overlays have no tmpfs to size: bwrap's words, as for any other option.
    EXPECT_EQ(parse_error({"--size", "1", "--overlay-src", "/l", "--overlay-src", "/m", "--ro-overlay", "/o", "true"}),
              "--size must be followed by --tmpfs");
    EXPECT_EQ(parse_error({"--size", "1", "--proc", "/proc", "true"}), "--size must be followed by --tmpfs");
}

// --login-file-try takes the options --login-file takes, in the same way, and is marked as such.
TEST(ParseArgs, LoginFileTryIsParsedAsLoginFile)
{
    Options o = parse_args({"--login-file", "/a", "/h/a", "--size", "200", "--login-file-try", "/b", "/g/b",
                            "--login-file-try", "/c", "/h/c", "true"});
    ASSERT_EQ(o.process.login_files.size(), 3u);
    EXPECT_FALSE(o.process.login_files[0].may_be_missing);
    EXPECT_TRUE(o.process.login_files[1].may_be_missing);
    EXPECT_EQ(o.process.login_files[1].source, "/b");
    EXPECT_EQ(o.process.login_files[1].dest, "/g/b");
    EXPECT_EQ(o.process.login_files[1].option(), "--login-file-try /b /g/b");
    EXPECT_TRUE(o.process.login_files[2].may_be_missing);
    // /h's tmpfs (the first --login-file's) serves the third; --size sized the second's.
    ASSERT_EQ(o.mounts.size(), 2u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 0).dest, "/h");
    EXPECT_EQ(op<mount::Tmpfs>(o, 0).size, mount::kLoginDirSize);
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).dest, "/g");
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).size, 200u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).mode, 0700u);
    EXPECT_EQ(parse_error({"--fresh-home", "/h", "--size", "1", "--login-file-try", "/c", "/h/c", "true"}),
              "--size before --login-file-try /c /h/c: /h is a tmpfs given earlier, which keeps its own size");
    EXPECT_EQ(parse_error({"--login-file", "/c", "/h/c", "--login-file-try", "/d", "/h/c", "true"}),
              "--login-file-try /d /h/c: DEST given twice");
    EXPECT_EQ(parse_error({"--login-file-try", "", "/h/c", "true"}), "--login-file-try  /h/c: SRC is empty");
    EXPECT_EQ(parse_error({"--login-file-try", "/c", "/c", "true"}),
              "--login-file-try /c /c: DEST must be below a directory other than /, which becomes a tmpfs of its own");
    EXPECT_EQ(parse_error({"--login-file-try", "/c"}), "--login-file-try takes two arguments");
}

TEST(ParseArgs, PermsAndSizeModifyOnlyTheNextOption)
{
    Options o = parse_args({"--perms", "0700",   "--tmpfs", "/a",      "--tmpfs", "/b",    "--perms", "640", "--file",
                            "3",       "/c/f",   "--size",  "0x10",    "--perms", "0750",  "--tmpfs", "/s",  "--perms",
                            "0711",    "--size", "010",     "--tmpfs", "/u",      "--dir", "/d",      "true"});
    ASSERT_EQ(o.mounts.size(), 6u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 0).mode, 0700u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 0).parent_mode, 0700u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).mode, 0755u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 1).parent_mode, 0755u);
    EXPECT_EQ(op<mount::Data>(o, 2).mode, 0640u);
    EXPECT_EQ(op<mount::Data>(o, 2).parent_mode, 0750u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 3).mode, 0750u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 3).size, 16u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).mode, 0711u);
    EXPECT_EQ(op<mount::Tmpfs>(o, 4).size, 8u);
    EXPECT_EQ(op<mount::Dir>(o, 5).mode, 0755u);
    EXPECT_FALSE(o.next_perms);
    EXPECT_FALSE(o.next_size);
    // Nothing after them: they do nothing, as in bwrap.
    Options trailing = parse_args({"--perms", "0700", "--size", "5", "--", "true"});
    EXPECT_TRUE(trailing.mounts.empty());
    EXPECT_FALSE(trailing.next_perms);
    EXPECT_EQ(parse_args({"--size", "9223372036854775807", "--tmpfs", "/t", "true"}).mounts.size(), 1u);
}

TEST(ParseArgs, PermsAndSizeMisuseUsesBwrapsMessages)
{
    const std::string not_creating = "--perms must be followed by an option that creates a file";
    EXPECT_EQ(parse_error({"--perms", "0700", "--bind", "/a", "/b", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--symlink", "a", "/b", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--setenv", "A", "B", "--dir", "/d", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--chmod", "0700", "/d", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--mqueue", "/m", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--bind-fd", "3", "/m", "true"}), not_creating);
    EXPECT_EQ(parse_error({"--perms", "0700", "--perms", "0600", "--dir", "/d", "true"}),
              "--perms given twice for the same action");
    EXPECT_EQ(parse_error({"--size", "1", "--size", "2", "--tmpfs", "/t", "true"}),
              "--size given twice for the same action");
    EXPECT_EQ(parse_error({"--size", "100", "--dir", "/d", "true"}), "--size must be followed by --tmpfs");
    EXPECT_EQ(parse_error({"--size", "100", "--perms", "0700", "--dir", "/d", "true"}),
              "--size must be followed by --tmpfs");
    EXPECT_EQ(parse_error({"--perms", "0700", "--size", "100", "--file", "3", "/f", "true"}),
              "--size must be followed by --tmpfs");
    for (const char* bad : {"999", "10000", "0o700", "0x1", "", "-1", "+7", "7 "})
        EXPECT_EQ(parse_error({"--perms", bad, "--dir", "/d", "true"}), "--perms takes an octal argument <= 07777")
            << bad;
    EXPECT_EQ(parse_error({"--chmod", "8", "/d", "true"}), "--chmod takes an octal argument <= 07777");
    for (const char* bad : {"0", "-1", "abc", "1k", "", "0x", "18446744073709551616"})
        EXPECT_EQ(parse_error({"--size", bad, "--tmpfs", "/t", "true"}), "--size takes a non-zero number of bytes")
            << bad;
    EXPECT_EQ(parse_error({"--size", "9223372036854775808", "--tmpfs", "/t", "true"}),
              "--size (for tmpfs) is limited to 9223372036854775807");
}

TEST(ParseArgs, ChmodMqueueAndBindFdKeepTheirPlace)
{
    Options o = parse_args({"--dir", "/d", "--chmod", "0711", "/d", "--mqueue", "/dev/mqueue", "--bind-fd", "3", "/w",
                            "--ro-bind-fd", "4", "/r", "true"});
    ASSERT_EQ(o.mounts.size(), 5u);
    EXPECT_EQ(op<mount::Chmod>(o, 1).dest, "/d");
    EXPECT_EQ(op<mount::Chmod>(o, 1).mode, 0711u);
    EXPECT_EQ(op<mount::Mqueue>(o, 2).dest, "/dev/mqueue");
    EXPECT_EQ(op<mount::Bind>(o, 3).fd, 3);
    EXPECT_EQ(op<mount::Bind>(o, 3).kind, mount::BindKind::ReadWrite);
    EXPECT_FALSE(op<mount::Bind>(o, 3).optional);
    EXPECT_EQ(op<mount::Bind>(o, 4).fd, 4);
    EXPECT_EQ(op<mount::Bind>(o, 4).kind, mount::BindKind::ReadOnly);
    EXPECT_EQ(parse_error({"--file", "abc", "/f", "true"}), "Invalid fd: abc");
    EXPECT_EQ(parse_error({"--ro-bind-fd", "-1", "/f", "true"}), "Invalid fd: -1");
    EXPECT_EQ(parse_error({"--bind-data", "3"}), "--bind-data takes two arguments");
}

// An option without its arguments: bwrap 0.11's words (bubblewrap.c), where Debian's bwrap 0.8.0,
// which the differential suite runs, has no such option or no such row.
TEST(ParseArgs, AMissingArgumentIsSaidInBwrapsWords)
{
    EXPECT_EQ(parse_error({"--overlay-src", "/a", "--overlay", "/u"}), "--overlay takes three arguments");
    EXPECT_EQ(parse_error({"--overlay-src", "/a", "--tmp-overlay"}), "--tmp-overlay takes an argument");
    EXPECT_EQ(parse_error({"--argv0"}), "--argv0 takes one argument");
    EXPECT_EQ(parse_error({"--remount-ro"}), "--remount-ro takes one argument");
    EXPECT_EQ(parse_error({"--chmod", "0755"}), "--chmod takes two arguments");
    EXPECT_EQ(parse_error({"--ro-bind-fd", "3"}), "--bind-fd takes two arguments");  // both fd binds
    EXPECT_EQ(parse_error({"--size"}), "--size takes an argument");
}

TEST(ParseArgs, ArgsFileIsSplicedWhereItStands)
{
    FakeFds fds{{{3, "--setenv\0A\0from-file\0--chdir\0/usr\0"s}, {4, "--unshare-net"s}}, {}};
    Options o = parse_args(
        {"--setenv", "A", "before", "--args", "3", "--args", "4", "--setenv", "B", "after", "sh", "--args", "5"},
        fds.reader());
    EXPECT_EQ(fds.read, (std::vector<int>{3, 4}));
    ASSERT_EQ(o.env.size(), 3u);
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[0]).value, "before");
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[1]).value, "from-file");  // a later option wins over it
    EXPECT_EQ(std::get<ns::SetEnv>(o.env[2]).name, "B");
    EXPECT_EQ(o.process.chdir, "/usr");
    EXPECT_TRUE(o.unshare_net);  // the last word had no NUL after it
    EXPECT_EQ(o.command, (std::vector<std::string>{"sh", "--args", "5"}));
    // An empty file adds nothing; an --args after "--" is the command's.
    FakeFds empty{{{3, ""}}, {}};
    EXPECT_EQ(parse_args({"--args", "3", "--", "--args", "3"}, empty.reader()).command,
              (std::vector<std::string>{"--args", "3"}));
    EXPECT_EQ(empty.read, std::vector<int>{3});
}

TEST(ParseArgs, ArgsFileErrors)
{
    auto message = [](std::map<int, std::string> contents, std::vector<std::string> args) {
        FakeFds fds{std::move(contents), {}};
        try {
            parse_args(args, fds.reader());
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_EQ(message({{3, "--args\0004\0"s}, {4, "--unshare-net"s}}, {"--args", "3", "true"}),
              "--args not supported in arguments file");
    EXPECT_EQ(message({{3, "--unshare-net\0sh\0"s}}, {"--args", "3", "true"}),
              "--args 3: only options may come from an arguments file, not 'sh'");
    EXPECT_EQ(message({{3, "--\0--unshare-net\0"s}}, {"--args", "3", "true"}),
              "--args 3: only options may come from an arguments file, not '--'");
    EXPECT_EQ(message({{3, "--unshare-net\0\0"s}}, {"--args", "3", "true"}),
              "--args 3: only options may come from an arguments file, not ''");
    // An option's arguments must be in the same file.
    EXPECT_EQ(message({{3, "--setenv\0A\0"s}}, {"--args", "3", "B", "true"}), "--setenv takes two arguments");
    EXPECT_EQ(message({{3, "--frob\0"s}}, {"--args", "3", "true"}), "Unknown option --frob");
    EXPECT_EQ(message({}, {"--args", "9", "true"}), "Can't read --args data from fd 9: Bad file descriptor");
    EXPECT_EQ(message({}, {"--args", "x", "true"}), "Invalid fd: x");
    EXPECT_EQ(message({}, {"--args"}), "--args takes an argument");
}

TEST(ParseArgs, FdOptions)
{
    Options o = parse_args({"--sync-fd", "5", "--block-fd", "6", "--userns-block-fd", "7", "--lock-file", "/a",
                            "--lock-file", "b", "true"});
    EXPECT_EQ(o.fds.sync, 5);
    EXPECT_EQ(o.fds.block, 6);
    EXPECT_EQ(o.fds.userns_block, 7);
    EXPECT_EQ(o.process.lock_files, (std::vector<std::string>{"/a", "b"}));
    // bwrap's words for every option that takes an fd, whatever is wrong with it.
    for (const char* option : {"--args", "--file", "--bind-data", "--ro-bind-data", "--bind-fd", "--ro-bind-fd",
                               "--info-fd", "--json-status-fd", "--sync-fd", "--block-fd", "--userns-block-fd",
                               "--userns", "--userns2", "--pidns", "--seccomp", "--add-seccomp-fd"}) {
        const bool two = std::string(option).find("bind") != std::string::npos || std::string(option) == "--file";
        for (const char* bad : {"-1", "3x", "", "2147483648"}) {
            std::vector<std::string> args{option, bad};
            if (two)
                args.push_back("/d");
            args.push_back("true");
            EXPECT_EQ(parse_error(args), std::string("Invalid fd: ") + bad) << option;
        }
    }
    EXPECT_EQ(parse_error({"--uid", "abc", "true"}), "Invalid uid: abc");
    EXPECT_EQ(parse_error({"--gid", "-1", "true"}), "Invalid gid: -1");
}

TEST(ParseArgs, RepeatedSingleValueOptionsWarnAndTheLastCounts)
{
    // bwrap's list of options that hold one value, each given twice.
    const std::vector<std::pair<std::string, std::string>> single = {
        {"--chdir", "/a"},           {"--hostname", "h"},       {"--uid", "5"},      {"--gid", "6"},
        {"--info-fd", "7"},          {"--json-status-fd", "8"}, {"--sync-fd", "9"},  {"--block-fd", "10"},
        {"--userns-block-fd", "11"}, {"--userns", "12"},        {"--userns2", "13"}, {"--pidns", "14"}};
    for (const auto& [option, value] : single) {
        Options o = parse_args({option, "1", option, value, "true"});
        EXPECT_EQ(o.warnings, std::vector<std::string>{"Only the last " + option + " option will take effect"})
            << option;
        Options once = parse_args({option, value, "true"});
        EXPECT_TRUE(once.warnings.empty()) << option;
    }
    Options o = parse_args({"--chdir", "/a", "--uid", "1", "--chdir", "/b", "--uid", "2", "--chdir", "/c", "true"});
    EXPECT_EQ(o.process.chdir, "/c");
    EXPECT_EQ(o.uid, 2u);
    EXPECT_EQ(o.warnings, (std::vector<std::string>{"Only the last --chdir option will take effect",
                                                    "Only the last --uid option will take effect",
                                                    "Only the last --chdir option will take effect"}));
    // Repeatable options say nothing.
    EXPECT_TRUE(
        parse_args({"--lock-file", "/a", "--lock-file", "/b", "--setenv", "A", "1", "--setenv", "A", "2", "true"})
            .warnings.empty());
}

TEST(ParseArgs, SeccompRules)
{
    const std::string one = std::string(8, '\0');
    FakeFds fds{{{5, one}, {6, one + one}, {7, one}}, {}};
    Options o = parse_args({"--seccomp", "5", "--seccomp", "6", "true"}, fds.reader());
    // bwrap's rule: the last --seccomp wins, with a warning; the others are not read.
    ASSERT_EQ(o.seccomp.size(), 1u);
    EXPECT_EQ(o.seccomp[0].option, "--seccomp 6");
    EXPECT_EQ(o.seccomp[0].bytes.size(), 16u);
    EXPECT_EQ(fds.read, std::vector<int>{6});
    EXPECT_EQ(o.warnings, std::vector<std::string>{"Only the last --seccomp option will take effect"});

    fds.read.clear();
    Options added = parse_args({"--add-seccomp-fd", "7", "--add-seccomp-fd", "5", "true"}, fds.reader());
    ASSERT_EQ(added.seccomp.size(), 2u);
    EXPECT_EQ(added.seccomp[0].option, "--add-seccomp-fd 7");
    EXPECT_EQ(fds.read, (std::vector<int>{7, 5}));
    EXPECT_TRUE(added.warnings.empty());
    EXPECT_EQ(tools::make_launch_plan(added, user_host()).seccomp.size(), 2u);

    try {
        parse_args({"--seccomp", "5", "--add-seccomp-fd", "6", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--add-seccomp-fd cannot be combined with --seccomp");
    }
    try {
        parse_args({"--add-seccomp-fd", "5", "--seccomp", "6", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "--seccomp cannot be combined with --add-seccomp-fd");
    }
    // bwrap's words; which option named the fd is the detail.
    try {
        parse_args({"--seccomp", "9", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "Can't read seccomp data: Bad file descriptor");
        EXPECT_EQ(e.detail(), "--seccomp 9");
    }
    try {
        parse_args({"--add-seccomp-fd", "5", "--add-seccomp-fd", "9", "true"}, fds.reader());
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_STREQ(e.what(), "Can't read seccomp data: Bad file descriptor");
        EXPECT_EQ(e.detail(), "--add-seccomp-fd 9");
    }
}

// bwrap's order: each program is read and checked for whole instructions before the next is read,
// and all of them before cocoon's own check for an empty one.
TEST(ParseArgs, SeccompDataIsCheckedInBwrapsOrder)
{
    FakeFds fds{{{5, ""}, {6, "x"}, {7, std::string(9, 'x')}}, {}};
    auto refusal = [&](const std::vector<std::string>& args) {
        fds.read.clear();
        try {
            tools::make_launch_plan(parse_args(args, fds.reader()), user_host());
        } catch (const UsageError& e) {
            return std::string(e.what()) + (e.detail().empty() ? "" : " (" + e.detail() + ")");  // bwrap's, cocoon's
        }
        return std::string("no error");
    };
    // The first empty, the second one byte long: refused for the second's size.
    EXPECT_EQ(refusal({"--add-seccomp-fd", "5", "--add-seccomp-fd", "6", "true"}),
              "Invalid seccomp data, must be multiple of 8 (--add-seccomp-fd 6: 1 bytes)");
    // A ragged program is refused before a later fd is read.
    EXPECT_EQ(refusal({"--add-seccomp-fd", "7", "--add-seccomp-fd", "9", "true"}),
              "Invalid seccomp data, must be multiple of 8 (--add-seccomp-fd 7: 9 bytes)");
    EXPECT_EQ(fds.read, std::vector<int>{7});
    // Empty alone: cocoon's own check, at planning.
    EXPECT_EQ(
        refusal({"--add-seccomp-fd", "5", "true"}).rfind("Invalid seccomp data from --add-seccomp-fd 5: 0 bytes", 0),
        0u);
}

TEST(ParseArgs, UsernsOptions)
{
    Options none = parse_args({"true"});
    EXPECT_FALSE(none.process.disable_userns);
    EXPECT_FALSE(none.process.assert_userns_disabled);
    Options o = parse_args({"--disable-userns", "--assert-userns-disabled", "true"});
    EXPECT_TRUE(o.process.disable_userns);
    EXPECT_TRUE(o.process.assert_userns_disabled);
    EXPECT_EQ(o.command, std::vector<std::string>{"true"});

    ns::LaunchPlan p = plan_for({"--unshare-user", "--disable-userns", "true"}, user_host());
    EXPECT_TRUE(p.process.disable_userns);
    EXPECT_FALSE(p.process.assert_userns_disabled);
    p = plan_for({"--assert-userns-disabled", "true"}, root_host());
    EXPECT_FALSE(p.process.disable_userns);
    EXPECT_TRUE(p.process.assert_userns_disabled);
}

TEST(ParseArgs, SelinuxLabelsAreRefused)
{
    for (const char* option : {"--exec-label", "--file-label"}) {
        SCOPED_TRACE(option);
        try {
            parse_args({option, "system_u:object_r:container_file_t:s0", "true"});
            FAIL();
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()), "labeling not supported on this system");  // bwrap's text
            EXPECT_EQ(e.detail(), option);
        }
        try {
            parse_args({option});
            FAIL();
        } catch (const UsageError& e) {
            EXPECT_EQ(std::string(e.what()), std::string(option) + " takes an argument");
        }
    }
}

TEST(ParseArgs, Argv0ReplacesOnlyWhatTheCommandSees)
{
    ns::LaunchPlan plan = plan_for({"--argv0", "shown", "--", "prog", "a"}, user_host());
    EXPECT_EQ(plan.argv, (std::vector<std::string>{"prog", "a"}));
    EXPECT_EQ(plan.process.argv0, "shown");
    EXPECT_FALSE(plan_for({"prog"}, user_host()).process.argv0);
    EXPECT_EQ(parse_error({"--argv0", "a", "--argv0", "b", "true"}), "--argv0 used multiple times");
}

TEST(ParseArgs, LevelPrefixIsFoundBeforeTheCommandOnly)
{
    EXPECT_TRUE(parse_args({"--level-prefix", "true"}).level_prefix);
    EXPECT_FALSE(parse_args({"true"}).level_prefix);
    EXPECT_TRUE(tools::level_prefix_requested({"--bind", "/a", "/b", "--level-prefix", "--frobnicate"}));
    // An option's argument, the command's own arguments, and anything past an
    // unknown option are not --level-prefix.
    EXPECT_FALSE(tools::level_prefix_requested({"--setenv", "--level-prefix", "x", "true"}));
    EXPECT_FALSE(tools::level_prefix_requested({"true", "--level-prefix"}));
    EXPECT_FALSE(tools::level_prefix_requested({"--", "--level-prefix"}));
    EXPECT_FALSE(tools::level_prefix_requested({"--frobnicate", "--level-prefix"}));
}

TEST(ParseArgs, OverlaysTakeThePendingSources)
{
    Options o = parse_args({"--overlay-src", "/l1", "--overlay-src", "l2", "--overlay", "/up", "/work", "/a",
                            "--overlay-src", "/l3", "--tmp-overlay", "/b", "--overlay-src", "/l4", "--overlay-src",
                            "/l5", "--ro-overlay", "c", "true"});
    ASSERT_EQ(o.mounts.size(), 3u);
    const auto& rw = op<mount::Overlay>(o, 0);
    EXPECT_EQ(rw.kind, mount::OverlayKind::ReadWrite);
    EXPECT_EQ(rw.sources, (std::vector<std::string>{"/l1", "l2"}));
    EXPECT_EQ(rw.upper, "/up");
    EXPECT_EQ(rw.work, "/work");
    EXPECT_EQ(rw.dest, "/a");
    const auto& tmp = op<mount::Overlay>(o, 1);
    EXPECT_EQ(tmp.kind, mount::OverlayKind::Tmp);
    EXPECT_EQ(tmp.sources, (std::vector<std::string>{"/l3"}));
    EXPECT_EQ(tmp.upper, "");
    EXPECT_EQ(tmp.dest, "/b");
    const auto& ro = op<mount::Overlay>(o, 2);
    EXPECT_EQ(ro.kind, mount::OverlayKind::ReadOnly);
    EXPECT_EQ(ro.sources, (std::vector<std::string>{"/l4", "/l5"}));
    EXPECT_TRUE(o.next_overlay_srcs.empty());
    // The destination is normalised like any other.
    EXPECT_EQ(std::get<mount::Overlay>(
                  plan_for({"--overlay-src", "/l", "--tmp-overlay", "b//c/", "true"}, user_host()).mounts.ops.at(0))
                  .dest,
              "/b/c");
}

TEST(ParseArgs, OverlayMisuseUsesBwrapsMessages)
{
    const std::string dangling =
        "--overlay-src must be followed by another --overlay-src or one of --overlay, --tmp-overlay, or --ro-overlay";
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "true"}), dangling);
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "--chdir", "/", "true"}), dangling);
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "--perms", "0700", "--tmp-overlay", "/t", "true"}), dangling);
    EXPECT_EQ(parse_error({"--overlay-src", "/l", "--", "true"}), dangling);
    auto plan_error = [](std::vector<std::string> args) {
        try {
            plan_for(args, user_host());
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(plan_error({"--tmp-overlay", "/t", "true"}), "--tmp-overlay requires at least one --overlay-src");
    EXPECT_EQ(plan_error({"--overlay", "/u", "/w", "/t", "true"}), "--overlay requires at least one --overlay-src");
    EXPECT_EQ(plan_error({"--ro-overlay", "/t", "true"}), "--ro-overlay requires at least two --overlay-src");
    EXPECT_EQ(plan_error({"--overlay-src", "/l", "--ro-overlay", "/t", "true"}),
              "--ro-overlay requires at least two --overlay-src");
    EXPECT_EQ(plan_error({"--overlay-src", "/l", "--tmp-overlay", "/t", "true"}), "");
}
