// Unit tests of cocoon_main (tools/cocoon/entry.cc): exit status, messages and --help.
#include <fcntl.h>
#include <sched.h>

#include <algorithm>

#include "tests/unit/cli_support.h"

using namespace cocoon;
using namespace cocoon::cli_test;
using namespace std::string_literals;

TEST(CocoonMain, BadInputExitsOneWithOneLine)
{
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--frobnicate"})), testing::ExitedWithCode(1),
                "^cocoon: Unknown option --frobnicate\n$");
    ASSERT_EXIT(std::exit(run_main({"/usr/local/bin/bwrap", "--frobnicate"})), testing::ExitedWithCode(1),
                "^bwrap: Unknown option --frobnicate\n$");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--unshare-net"})), testing::ExitedWithCode(1),
                "^cocoon: No command specified");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--bind", "/a", "/b/../c", "true"})), testing::ExitedWithCode(1),
                "^cocoon: Invalid destination /b/../c");
}

// Invoked as bwrap, a mistake bwrap has a message for gets bwrap's text alone (scripts match it);
// as cocoon, the same text and then what cocoon adds. No command: bwrap's usage on stderr.
TEST(CocoonMain, AsBwrapAMessageIsBwrapsTextAlone)
{
    auto ragged_seccomp = [](const char* prog) {
        int fds[2];
        if (::pipe(fds) != 0 || ::write(fds[1], "x", 1) != 1)
            std::exit(99);
        ::close(fds[1]);
        std::exit(run_main({prog, "--seccomp", std::to_string(fds[0]), "true"}));
    };
    ASSERT_EXIT(ragged_seccomp("/usr/bin/bwrap"), testing::ExitedWithCode(1),
                "^bwrap: Invalid seccomp data, must be multiple of 8\n$");
    ASSERT_EXIT(ragged_seccomp("cocoon"), testing::ExitedWithCode(1),
                "^cocoon: Invalid seccomp data, must be multiple of 8 \\(--seccomp [0-9]+: 1 bytes\\)\n$");
    ASSERT_EXIT(std::exit(run_main({"bwrap", "--exec-label", "x", "true"})), testing::ExitedWithCode(1),
                "^bwrap: labeling not supported on this system\n$");
    ASSERT_EXIT(std::exit(run_main({"bwrap", "--bind", "/a"})), testing::ExitedWithCode(1),
                "^bwrap: --bind takes two arguments\n$");
    ASSERT_EXIT(std::exit(run_main({"/usr/bin/bwrap", "--unshare-net"})), testing::ExitedWithCode(1),
                "^usage: /usr/bin/bwrap \\[OPTIONS...\\] \\[--\\] COMMAND \\[ARGS...\\]\n\n    --help");
    ASSERT_EXIT(std::exit(run_main({"bwrap"})), testing::ExitedWithCode(1), "^usage: bwrap ");
}

TEST(CocoonMain, HelpListsEveryOption)
{
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_main({"cocoon", "--help"}), 0);
    std::string help = testing::internal::GetCapturedStdout();
    for (const char* opt :
         {"--bind SRC DEST", "--ro-bind-try SRC DEST", "--unshare-all", "--cap-drop CAP", "--proc DEST"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(CocoonMain, HelpNamesThePathItWasRunBy)
{
    // bwrap's first line, with argv[0] as given (scripts match it).
    for (const char* argv0 : {"cocoon", "/usr/local/bin/bwrap", "./build/tools/cocoon"}) {
        testing::internal::CaptureStdout();
        EXPECT_EQ(run_main({argv0, "--help"}), 0);
        std::string help = testing::internal::GetCapturedStdout();
        EXPECT_EQ(help.substr(0, help.find('\n')),
                  std::string("usage: ") + argv0 + " [OPTIONS...] [--] COMMAND [ARGS...]");
    }
}

TEST(CocoonMain, ClosedFdIsRefusedNamingOptionAndFd)
{
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--file", "987", "/f", "true"})), testing::ExitedWithCode(1),
                "^cocoon: Invalid --file 987: Bad file descriptor\n$");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--ro-bind-fd", "987", "/f", "true"})), testing::ExitedWithCode(1),
                "^cocoon: Invalid --ro-bind-fd 987: Bad file descriptor\n$");
}

TEST(CocoonMain, HelpListsTheFilesystemOptions)
{
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_main({"cocoon", "--help"}), 0);
    std::string help = testing::internal::GetCapturedStdout();
    for (const char* opt :
         {"--perms OCTAL", "--size BYTES", "--chmod OCTAL PATH", "--file FD DEST", "--bind-data FD DEST",
          "--ro-bind-data FD DEST", "--bind-fd FD DEST", "--ro-bind-fd FD DEST", "--mqueue DEST"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(CocoonMain, HelpListsTheUsernsAndLabelOptions)
{
    testing::internal::CaptureStdout();
    EXPECT_EQ(run_main({"cocoon", "--help"}), 0);
    std::string help = testing::internal::GetCapturedStdout();
    for (const char* opt :
         {"--disable-userns ", "--assert-userns-disabled ", "--exec-label LABEL", "--file-label LABEL"})
        EXPECT_NE(help.find(opt), std::string::npos) << opt;
}

TEST(CocoonMain, LevelPrefixMarksErrorsAndWarnings)
{
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--level-prefix", "--frobnicate"})), testing::ExitedWithCode(1),
                "^<3>cocoon: Unknown option --frobnicate\n$");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--level-prefix", "--unshare-net"})), testing::ExitedWithCode(1),
                "^<3>cocoon: No command specified");
    // A warning, then an error from after parsing (an empty program): both marked.
    auto warn_then_fail = [] {
        const std::string fd = std::to_string(::open("/dev/null", O_RDONLY));
        std::exit(run_main({"cocoon", "--seccomp", fd, "--level-prefix", "--seccomp", fd, "true"}));
    };
    ASSERT_EXIT(warn_then_fail(), testing::ExitedWithCode(1),
                "^<4>cocoon: Only the last --seccomp option will take effect\n<3>cocoon: Invalid seccomp data");
    ASSERT_EXIT(std::exit(run_main({"cocoon", "--frobnicate", "--level-prefix"})), testing::ExitedWithCode(1),
                "^cocoon: Unknown option");
}
