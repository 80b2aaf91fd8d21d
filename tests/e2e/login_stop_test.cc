// End-to-end checks of --login-file when the run is stopped (issue 31, 1): a DEST that a writer
// the stop killed left cut short never reaches SRC, which keeps its last whole version; a version
// closed before the stop, or written by a command that then exits on its own, is saved. Runs the
// binary as whoever runs the tests.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "tests/e2e/stop_support.h"

namespace cocoon::test {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr int kChunks = 8;  // 512 KiB a version

// Version n of the agent's login file: eight copies of the first 64 KiB of "n\n" repeated, then
// the trailer "END n", which the writer puts last.
std::string version(int n)
{
    std::string chunk;
    while (chunk.size() < kChunk)
        chunk += std::to_string(n) + "\n";
    chunk.resize(kChunk);
    std::string all;
    for (int i = 0; i < kChunks; ++i)
        all += chunk;
    return all + "END " + std::to_string(n) + "\n";
}

// The n of a whole version(n), or -1 for anything else (a version cut short).
int whole_version(const std::string& text)
{
    const size_t end = text.rfind("END ");
    if (end == std::string::npos)
        return -1;
    const int n = std::atoi(text.c_str() + end + 4);
    return text == version(n) ? n : -1;
}

// sh: writes version $n over DEST in place, as an agent renewing its token does: one open
// (O_TRUNC), eight writes of 64 KiB 20 ms apart, the trailer, one close.
const std::string kWrite = "{ i=0; while [ $i -lt 8 ]; do yes $n | head -c 65536; sleep 0.02; i=$((i+1)); done; "
                           "echo END $n; } > /home/agent/.cred; ";
// sh: renews DEST in place forever, each version left alone for longer than the quiet period.
const std::string kRenewForever = "n=1; while :; do " + kWrite + "n=$((n+1)); sleep 0.25; done";

std::vector<std::string> options(const TempDir& dir, const std::vector<std::string>& stop)
{
    return args({minimal_root(), {"--unshare-pid", "--login-file", dir / "cred", kLoginDest}, stop});
}

// What cocoon may say on stderr about a stop: nothing, or one line that DEST was not saved.
void expect_at_most_one_refusal(const TempDir& dir, const std::string& err, int round, int& refused)
{
    const std::vector<std::string> said = lines(err);
    EXPECT_LE(said.size(), 1U) << "round " << round << ":\n" << err;
    for (const std::string& line : said)
        EXPECT_EQ(line.rfind("cocoon: login sync: --login-file " + (dir / "cred") + " " + kLoginDest +
                                 ": DEST changed after the run was stopped",
                             0),
                  0U)
            << "round " << round << ": " << line;
    refused += !said.empty();
}

enum class StopBy { Term, KillAfter, KillCommand, ParentExit, CommandExits };

// cocoon started by a shell that exits after_ms later, so that --die-with-parent ends the sandbox;
// what cocoon wrote to stdout and stderr, read until it and its sandbox are gone.
std::string run_until_the_parent_exits(const std::vector<std::string>& cocoon_args, int after_ms)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) < 0)
        return "pipe2 failed";
    UniqueFd from(fds[0]), to(fds[1]);
    std::vector<std::string> argv = {"/bin/sh", "-c",         "\"$@\" & sleep " + std::to_string(after_ms / 1000.0),
                                     "sh",      cocoon_bin(), "--die-with-parent"};
    argv.insert(argv.end(), cocoon_args.begin(), cocoon_args.end());
    const pid_t parent = spawn(argv, {{to.get(), 1}, {to.get(), 2}});
    to.reset();
    std::string out;
    char buf[4096];
    for (pollfd pfd{from.get(), POLLIN, 0}; ::poll(&pfd, 1, 10000) > 0;) {
        const ssize_t n = ::read(from.get(), buf, sizeof buf);
        if (n <= 0)
            break;
        out.append(buf, static_cast<size_t>(n));
    }
    ::waitpid(parent, nullptr, 0);
    return out;
}

// One run of the renewing agent, stopped after_ms after its start as `by` says; cocoon's stderr.
std::string run_stopped(const TempDir& dir, const TempDir& logs, StopBy by, int after_ms)
{
    if (by == StopBy::ParentExit)
        return run_until_the_parent_exits(args({options(dir, {}), sh(kRenewForever)}), after_ms);
    if (by == StopBy::CommandExits) {
        // The command starts the renewing agent in the background and exits on its own: PID 1
        // kills the agent it left, maybe in the middle of a rewrite.
        const std::string script = "( " + kRenewForever + " ) & sleep " + std::to_string(after_ms / 1000.0);
        // --dev: sh gives a job in the background /dev/null as its stdin.
        Result r = cocoon(args({options(dir, {"--dev", "/dev"}), sh(script)}));
        EXPECT_EQ(r.code, 0) << r.err;
        return r.err;
    }
    std::vector<std::string> stop = {"--forward-signals", "--kill-after", "2"};
    if (by == StopBy::KillAfter)
        stop = {"--kill-after", "0.3"};  // SIGTERM not forwarded: the agent goes on until the SIGKILL
    Sandbox sandbox(args({options(dir, stop), sh(kRenewForever)}), logs / "out");
    const auto started = Clock::now();
    EXPECT_TRUE(sandbox.wait_started()) << sandbox.output();
    sleep_ms(after_ms - static_cast<int>(seconds_since(started) * 1000));
    if (by == StopBy::KillCommand) {
        // A signal from outside kills the command (the shell holding DEST open): no stop the
        // monitor sent.
        EXPECT_TRUE(wait_until([&] { return sandbox.locate_pid_ns(); }, 5000));
        const std::optional<pid_t> command = sandbox.find_child_of_pid1("head -c");
        EXPECT_TRUE(command) << "no command under PID 1";
        if (command)
            ::kill(*command, SIGKILL);
    } else {
        ::kill(sandbox.pid(), SIGTERM);
    }
    const std::optional<int> status = sandbox.wait_status(10000);
    EXPECT_TRUE(status && WIFEXITED(*status)) << sandbox.output();
    return sandbox.output();
}

// `rounds` runs of the agent that renews a 512 KiB DEST in place over and over, each stopped at a
// random moment (often in the middle of a rewrite) as `by` says. SRC must always end as one whole
// version: the one it had, or one the agent finished; never one cut short.
void stops_leave_src_whole(StopBy by, int rounds)
{
    TempDir dir, logs;
    std::mt19937 rng(31);
    int partial = 0, refused = 0, renewed = 0;
    for (int round = 0; round < rounds; ++round) {
        write_file(dir / "cred", version(0), 0600);
        const int after_ms = 150 + static_cast<int>(rng() % 950);
        const std::string err = run_stopped(dir, logs, by, after_ms);
        const std::string src = read_file(dir / "cred");
        const int n = whole_version(src);
        EXPECT_GE(n, 0) << "round " << round << " (stopped after " << after_ms << " ms): SRC is " << src.size()
                        << " bytes, not a whole version; it ends with '"
                        << src.substr(src.size() > 20 ? src.size() - 20 : 0) << "'";
        partial += n < 0;
        renewed += n > 0;
        expect_at_most_one_refusal(dir, err, round, refused);
        EXPECT_EQ(files_under(dir.path()).size(), 1U) << "round " << round << ": a temp file left beside SRC";
    }
    std::printf("%d rounds: SRC cut short in %d, a renewal saved in %d, a changed DEST refused in %d\n", rounds,
                partial, renewed, refused);
}

TEST(LoginFileStop, ATermDuringAnInPlaceRewriteNeverSavesItHalfWay)
{
    stops_leave_src_whole(StopBy::Term, 20);
}

TEST(LoginFileStop, KillAfterNeverSavesAHalfWrittenDest)
{
    stops_leave_src_whole(StopBy::KillAfter, 6);
}

TEST(LoginFileStop, ASignalThatKillsTheCommandNeverSavesAHalfWrittenDest)
{
    stops_leave_src_whole(StopBy::KillCommand, 6);
}

TEST(LoginFileStop, DieWithParentNeverSavesAHalfWrittenDest)
{
    stops_leave_src_whole(StopBy::ParentExit, 6);
}

// The command exits on its own and leaves a writer of DEST behind, which PID 1 then kills.
TEST(LoginFileStop, AWriterTheCommandLeftBehindIsNeverSavedHalfWay)
{
    stops_leave_src_whole(StopBy::CommandExits, 10);
}

// Controls: a version closed before the stop is saved, a second before it (saved while the
// sandbox runs) or 0.3 s before it (held back by the one-save-a-second rule, so saved only at the
// end), whether the stop is a SIGTERM cocoon forwards or a SIGKILL of the command from outside
// (past the quiet period cocoon then takes for the stop). The agent writes version 1, then
// version 2 0.2 s later, then waits to be stopped.
TEST(LoginFileStop, AVersionClosedBeforeTheStopIsSaved)
{
    TempDir dir, logs, out;
    const std::string script = "n=1; " + kWrite + "sleep 0.2; n=2; " + kWrite + ": > /out/ready; sleep 60";
    for (auto [before_ms, by] : {std::pair{1000, StopBy::Term}, {300, StopBy::Term}, {300, StopBy::KillCommand}}) {
        write_file(dir / "cred", version(0), 0600);
        ::unlink((out / "ready").c_str());
        Sandbox sandbox(
            args({options(dir, {"--forward-signals", "--kill-after", "2", "--bind", out.path(), "/out"}), sh(script)}),
            logs / "out");
        ASSERT_TRUE(wait_until([&] { return exists(out / "ready"); }, 5000)) << sandbox.output();
        ASSERT_TRUE(sandbox.wait_started() && sandbox.locate_pid_ns());
        sleep_ms(before_ms);
        const std::optional<pid_t> command = sandbox.find_child_of_pid1("/out/ready");
        ASSERT_TRUE(command) << "no command under PID 1";
        ::kill(by == StopBy::Term ? sandbox.pid() : *command, by == StopBy::Term ? SIGTERM : SIGKILL);
        const std::optional<int> status = sandbox.wait_status(10000);
        const int code = 128 + (by == StopBy::Term ? SIGTERM : SIGKILL);
        EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == code) << sandbox.output();
        EXPECT_EQ(whole_version(read_file(dir / "cred")), 2) << "closed " << before_ms << " ms before the stop";
        EXPECT_EQ(sandbox.output(), "");
    }
}

// `claude login` writes its login and exits at once: that is no stop, and the version is saved.
TEST(LoginFileStop, AVersionWrittenByACommandThatExitsAtOnceIsSaved)
{
    TempDir dir;
    write_file(dir / "cred", version(0), 0600);
    Result r = cocoon(args({options(dir, {"--forward-signals", "--kill-after", "2"}), sh("n=1; " + kWrite)}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(whole_version(read_file(dir / "cred")), 1);
}

}  // namespace
}  // namespace cocoon::test
