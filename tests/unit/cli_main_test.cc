// Unit tests of cocoon_main (tools/entry.cc): exit status, messages and --help.
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
    ASSERT_EXIT(std::exit(run_main({"bwrap", "--level-prefix", "--unshare-net"})), testing::ExitedWithCode(1),
                "^<3>bwrap: No command specified");
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
