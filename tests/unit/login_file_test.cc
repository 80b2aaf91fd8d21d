// Unit tests of the monitor's side of --login-file (ns/login_file.cc) that
// need no sandbox: a directory on the host stands in for DEST's tmpfs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "ns/login_file.h"

namespace cocoon::ns {
namespace {

struct Dir {
    std::string path;
    Dir()
    {
        char name[] = "/tmp/cocoon-login-unit.XXXXXX";
        path = ::mkdtemp(name);
    }
    ~Dir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

void write(const std::string& path, const std::string& text)
{
    std::ofstream(path) << text;
}

std::string read(const std::string& path)
{
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
}

// The command renewed its copy and exited before the monitor had DEST's
// directory (the message was still queued when PID 1 died): the renewal is
// saved all the same.
TEST(LoginFiles, ARenewalMadeBeforeTheWatchIsSavedAtTheEnd)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "");
    ASSERT_EQ(logins.seeds().at(0).content, "old");
    write(dest.path + "/.cred", "new");
    logins.add_sandbox_dir(0, UniqueFd(::open(dest.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)));
    logins.finish();
    EXPECT_EQ(read(src.path + "/cred"), "new");
}

// The same, with the seeded copy unchanged: nothing is written to SRC.
TEST(LoginFiles, AnUnchangedCopyIsNotWrittenBack)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    struct stat before;
    ASSERT_EQ(::stat((src.path + "/cred").c_str(), &before), 0);
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "");
    write(dest.path + "/.cred", "old");
    logins.add_sandbox_dir(0, UniqueFd(::open(dest.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)));
    logins.finish();
    struct stat after;
    ASSERT_EQ(::stat((src.path + "/cred").c_str(), &after), 0);
    EXPECT_EQ(before.st_ino, after.st_ino);  // not replaced by a rename
}

}  // namespace
}  // namespace cocoon::ns
