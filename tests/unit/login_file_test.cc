// Unit tests of the monitor's side of --login-file (ns/monitor/login_file.cc) that
// need no sandbox: a directory on the host stands in for DEST's tmpfs.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
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
    ~Dir() { std::filesystem::remove_all(path); }
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

// Issue 31, 1: the kernel closes a writer a stop killed as it closes any writer, so a DEST cut
// short looks whole. A version closed before the stop began is saved at the end; a change read
// after it is not, and one line says so.
TEST(LoginFiles, AChangeAfterTheStopBeganIsNotSaved)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    write(dest.path + "/.cred", "closed before");
    logins.stop_begins();
    testing::internal::CaptureStderr();
    logins.finish();
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(read(src.path + "/cred"), "closed before");

    LoginFiles stopped({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    stopped.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    UniqueFd writer(::open((dest.path + "/.cred").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
    ASSERT_TRUE(writer);
    ASSERT_EQ(::write(writer.get(), "cut", 3), 3);
    stopped.stop_begins();
    writer.reset();  // the killed writer's close
    settle(stopped);
    EXPECT_EQ(read(src.path + "/cred"), "closed before") << "saved in the loop after the stop";
    testing::internal::CaptureStderr();
    stopped.finish();
    const std::string said = testing::internal::GetCapturedStderr();
    EXPECT_EQ(read(src.path + "/cred"), "closed before");
    EXPECT_EQ(said, "cocoon: login sync: --login-file " + src.path +
                        "/cred /home/agent/.cred: DEST changed after the run was stopped, maybe cut short: not saved, "
                        "and SRC keeps its last saved version\n");
}

// A command a signal killed without a stop the monitor sent: a change read in the quiet period
// before its end was seen is not saved; one read earlier is.
TEST(LoginFiles, AChangeJustBeforeTheCommandWasKilledIsNotSaved)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    for (bool quiet_before : {false, true}) {
        LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
        logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
        const std::string renewal = quiet_before ? "quiet" : "cut";
        write(dest.path + "/.cred", renewal);
        logins.on_events();
        if (quiet_before)
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        testing::internal::CaptureStderr();
        logins.finish(std::chrono::steady_clock::now());
        const std::string said = testing::internal::GetCapturedStderr();
        EXPECT_EQ(read(src.path + "/cred"), quiet_before ? "quiet" : "old");
        EXPECT_EQ(said.empty(), quiet_before) << said;
    }
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

// Issue 24, 2: what the sync cannot do is a warning built from a SysError that names the step,
// the errno and the path. Here another cocoon holds SRC's directory's lock past the second the
// end waits for it.
TEST(LoginFiles, ALockedSrcDirectoryIsAWarningThatNamesIt)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    UniqueFd other(::open(src.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_EQ(::flock(other.get(), LOCK_EX), 0);
    write(dest.path + "/.cred", "new");
    logins.finish();
    const std::optional<SysError>& said = logins.warnings().last();
    ASSERT_TRUE(said);
    EXPECT_EQ(said->step(), "login sync");
    EXPECT_EQ(said->code(), EWOULDBLOCK);
    EXPECT_EQ(said->path(), src.path);
    EXPECT_EQ(std::string(said->what()), "--login-file " + src.path +
                                             "/cred /home/agent/.cred: can't lock SRC's directory " + src.path + ": " +
                                             std::strerror(EWOULDBLOCK));
    EXPECT_EQ(read(src.path + "/cred"), "old");
}

// A directory put at SRC's name: the write-back's rename fails (EISDIR), the warning names the
// temp file, and no temp file is left.
TEST(LoginFiles, ADirectoryAtSrcFailsTheRenameAndNamesTheTempFile)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    ASSERT_EQ(::unlink((src.path + "/cred").c_str()), 0);
    ASSERT_EQ(::mkdir((src.path + "/cred").c_str(), 0700), 0);
    write(src.path + "/cred/inside", "x");
    write(dest.path + "/.cred", "new");
    logins.finish();
    const std::optional<SysError>& said = logins.warnings().last();
    ASSERT_TRUE(said);
    EXPECT_EQ(said->step(), "login sync");
    EXPECT_EQ(said->code(), EISDIR);
    EXPECT_EQ(said->path().rfind(src.path + "/.cred.cocoon-", 0), 0U) << said->path();
    EXPECT_NE(std::string(said->what()).find("can't rename over SRC " + said->path() + ": "), std::string::npos)
        << said->what();
    for (const auto& entry : std::filesystem::directory_iterator(src.path))
        EXPECT_EQ(entry.path().filename(), "cred") << "left behind";
}

// A renewal saved to SRC by another sandbox, passed to this one's DEST: a directory the agent
// put at the temp name makes the create fail (EEXIST), and the warning names it as the sandbox
// sees it.
TEST(LoginFiles, APlantedTempNameInDestsDirectoryIsAWarningThatNamesIt)
{
    Dir src, dest;
    write(src.path + "/cred", "old");
    write(dest.path + "/.cred", "old");  // the seed
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred"}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    ASSERT_EQ(::mkdir((dest.path + "/..cred.cocoon-in").c_str(), 0700), 0);
    write(dest.path + "/..cred.cocoon-in/inside", "x");
    write(src.path + "/cred", "renewed");
    settle(logins);
    const std::optional<SysError>& said = logins.warnings().last();
    ASSERT_TRUE(said);
    EXPECT_EQ(said->step(), "login sync");
    EXPECT_EQ(said->code(), EEXIST);
    EXPECT_EQ(said->path(), "/home/agent/..cred.cocoon-in");
    EXPECT_EQ(read(dest.path + "/.cred"), "old");
}

// --login-file-try: a missing SRC in missing directories is an absent seed; nothing is made until
// the first version, which makes the directories (0700) and SRC (0600), even an empty one.
TEST(LoginFiles, AMissingSrcAndItsDirectoriesAreMadeByTheFirstVersion)
{
    Dir src, dest;
    const std::string cred = src.path + "/a/b/cred";
    LoginFiles logins({{cred, "/home/agent/.cred", true}}, "", false);
    ASSERT_TRUE(logins.seeds().at(0).absent);
    EXPECT_EQ(logins.seeds().at(0).content, "");
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    settle(logins);
    EXPECT_FALSE(std::filesystem::exists(src.path + "/a"));
    write(dest.path + "/.cred", "");
    logins.finish();
    ASSERT_TRUE(std::filesystem::exists(cred));
    EXPECT_EQ(read(cred), "");
    struct stat st;
    for (const std::string& dir : {src.path + "/a", src.path + "/a/b"}) {
        ASSERT_EQ(::stat(dir.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 07777, 0700u) << dir;
    }
    ASSERT_EQ(::stat(cred.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_FALSE(logins.warnings().last());
}

// With SRC's directory there and SRC missing, a SRC another sandbox (or the host's user) makes
// reaches a DEST still absent; a DEST the sandbox wrote meanwhile would win instead.
TEST(LoginFiles, ASrcMadeOnTheHostReachesAnAbsentDest)
{
    Dir src, dest;
    LoginFiles logins({{src.path + "/cred", "/home/agent/.cred", true}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    write(src.path + "/.new", "from-host");
    ::chmod((src.path + "/.new").c_str(), 0600);
    ASSERT_EQ(::rename((src.path + "/.new").c_str(), (src.path + "/cred").c_str()), 0);
    settle(logins);
    EXPECT_EQ(read(dest.path + "/.cred"), "from-host");
    // From here on it is an ordinary login file: the sandbox's renewal is saved.
    write(dest.path + "/.cred", "renewed");
    logins.finish();
    EXPECT_EQ(read(src.path + "/cred"), "renewed");
}

// Under --no-follow-sources a directory the sandbox put where a missing one goes, as a link, is
// refused at the save: a warning, nothing written through it.
TEST(LoginFiles, ALinkPutWhereAMissingDirectoryGoesIsNotFollowed)
{
    Dir src, dest, elsewhere;
    LoginFiles logins({{src.path + "/a/cred", "/home/agent/.cred", true}}, "", true);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    ASSERT_EQ(::symlink(elsewhere.path.c_str(), (src.path + "/a").c_str()), 0);
    write(dest.path + "/.cred", "new");
    logins.finish();
    EXPECT_FALSE(std::filesystem::exists(elsewhere.path + "/cred"));
    const std::optional<SysError>& said = logins.warnings().last();
    ASSERT_TRUE(said);
    EXPECT_EQ(said->code(), ENOTDIR);
    EXPECT_EQ(said->path(), src.path + "/a");
}

// A missing directory someone else made before the first save (the agent, under --host-user, in
// an ancestor it may write) is not the caller's: refused, nothing saved in it. Needs root.
TEST(LoginFiles, AMissingDirectoryAnotherUserMadeIsRefused)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "needs root to make a directory of another user's";
    Dir src, dest;
    LoginFiles logins({{src.path + "/a/cred", "/home/agent/.cred", true}}, "", false);
    logins.add_sandbox_dir(0, UniqueFd(open_dir(dest.path)));
    ASSERT_EQ(::mkdir((src.path + "/a").c_str(), 0777), 0);
    ASSERT_EQ(::chown((src.path + "/a").c_str(), 4321, 4321), 0);
    write(dest.path + "/.cred", "new");
    logins.finish();
    EXPECT_FALSE(std::filesystem::exists(src.path + "/a/cred"));
    const std::optional<SysError>& said = logins.warnings().last();
    ASSERT_TRUE(said);
    EXPECT_EQ(said->code(), EPERM);
    EXPECT_EQ(said->path(), src.path + "/a");
}

}  // namespace
}  // namespace cocoon::ns
