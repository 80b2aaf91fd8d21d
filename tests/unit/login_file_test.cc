// Unit tests of the monitor's side of --login-file (ns/monitor/login_file.cc) that
// need no sandbox: a directory on the host stands in for DEST's tmpfs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ns/monitor/login_file.h"

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

int open_dir(const std::string& path)
{
    return ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

// What the monitor's loop does: the events, then the timer once the quiet period (150 ms) and
// the events' rest (100 ms) are over.
void settle(LoginFiles& logins)
{
    logins.on_events();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    logins.on_timer();
}

// The message of the exception f throws, or "" if it throws none.
template <typename F> std::string thrown(F f)
{
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

// A renewal closed after the watch began is saved at the end.
TEST(LoginFiles, ARenewalIsSavedAtTheEnd)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    ASSERT_EQ(logins.seeds().at(0).content, "old");
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    write(dest.path + "/.cred", "new");
    logins.finish();
    EXPECT_EQ(read(src.path + "/cred"), "new");
}

// Issue 20, 1b: a new DEST renamed into place, then at once truncated by an
// in-place writer that has not written yet. The rename's close mark must not
// make the empty file a version: only the writer's close after its write does.
TEST(LoginFiles, ATruncatedDestAfterARenameIsNotAVersion)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    write(dest.path + "/.tmp", "renamed");
    ASSERT_EQ(::rename((dest.path + "/.tmp").c_str(), (dest.path + "/.cred").c_str()), 0);
    UniqueFd writer(::open((dest.path + "/.cred").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    ASSERT_TRUE(writer);
    settle(logins);
    EXPECT_EQ(read(src.path + "/cred"), "old");
    ASSERT_EQ(::write(writer.get(), "rewritten", 9), 9);
    settle(logins);
    EXPECT_EQ(read(src.path + "/cred"), "old") << "saved while its writer still had it open";
    writer.reset();
    settle(logins);
    EXPECT_EQ(read(src.path + "/cred"), "rewritten");
}

// A close mark with DEST still open for writing elsewhere (a second writer
// opened it without writing yet): no version until no one has it open for
// writing (the kernel refuses a read lease then).
TEST(LoginFiles, ADestOpenForWritingIsNotSaved)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    write(dest.path + "/.cred", "new");
    UniqueFd writer(::open((dest.path + "/.cred").c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(writer);
    settle(logins);
    logins.finish();
    EXPECT_EQ(read(src.path + "/cred"), "old");
    writer.reset();
    settle(logins);
    EXPECT_EQ(read(src.path + "/cred"), "new");
}

// Issue 20, 1: SRC is never followed: a link at SRC, a hard link, a link in
// SRC's directory under --no-follow-sources are refused with a line that
// says what to pass instead.
TEST(LoginFiles, ALinkAtSrcIsRefused)
{
    Dir src, other;
    write(other.path + "/authorized_keys", "keys");
    ASSERT_EQ(::symlink((other.path + "/authorized_keys").c_str(), (src.path + "/cred").c_str()), 0);
    EXPECT_NE(thrown([&] {
                  LoginFiles({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
              }).find("is a symbolic link; pass the real path of the file it names"),
              std::string::npos);
    ASSERT_EQ(::link((other.path + "/authorized_keys").c_str(), (src.path + "/hard").c_str()), 0);
    EXPECT_NE(thrown([&] {
                  LoginFiles({{src.path + "/hard", "/home/agent/.cred"}}, "", false);
              }).find("is a file with 2 hard links"),
              std::string::npos);
    // A link higher up: followed without --no-follow-sources, refused with it.
    write(other.path + "/cred", "old");
    ASSERT_EQ(::symlink(other.path.c_str(), (src.path + "/dir").c_str()), 0);
    EXPECT_EQ(thrown([&] { LoginFiles({{src.path + "/dir/cred", "/home/agent/.cred"}}, "", false); }), "");
    EXPECT_NE(thrown([&] {
                  LoginFiles({{src.path + "/dir/cred", "/home/agent/.cred"}}, "", true);
              }).find("is a symbolic link (refused by --no-follow-sources); pass the real path"),
              std::string::npos);
    EXPECT_EQ(read(other.path + "/authorized_keys"), "keys");
}

// A link swapped in at SRC after the start is replaced by the write-back,
// never followed: the file it names keeps its bytes.
TEST(LoginFiles, ALinkSwappedInAtSrcIsReplacedNotFollowed)
{
    Dir src, dest, other;
    write(src.path + "/cred", "old");
    write(other.path + "/authorized_keys", "keys");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", true);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    ASSERT_EQ(::unlink((src.path + "/cred").c_str()), 0);
    ASSERT_EQ(::symlink((other.path + "/authorized_keys").c_str(), (src.path + "/cred").c_str()), 0);
    write(dest.path + "/.cred", "renewed");
    logins.finish();
    EXPECT_EQ(read(other.path + "/authorized_keys"), "keys");
    struct stat st;
    ASSERT_EQ(::lstat((src.path + "/cred").c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(read(src.path + "/cred"), "renewed");
}

// The same, with the seeded copy unchanged: nothing is written to SRC.
TEST(LoginFiles, AnUnchangedCopyIsNotWrittenBack)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    struct stat before;
    ASSERT_EQ(::stat((src.path + "/cred").c_str(), &before), 0);
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    write(dest.path + "/.cred", "old");
    logins.finish();
    struct stat after;
    ASSERT_EQ(::stat((src.path + "/cred").c_str(), &after), 0);
    EXPECT_EQ(before.st_ino, after.st_ino);  // not replaced by a rename
}

}  // namespace
}  // namespace cocoon::ns
