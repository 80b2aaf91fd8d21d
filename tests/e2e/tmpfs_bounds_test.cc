// The tmpfs mounts cocoon makes on its own are bounded (the root, /dev, /dev/shm, the login file's
// directory, the hidden data tmpfs), --size bounds the ones it names, and the report's
// tmpfs-peak-bytes sees what they hold. Runs the binary as whoever runs the tests.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"

namespace cocoon::test {
namespace {

constexpr const char* kCred = "/home/agent/.claude/.credentials.json";

// sh: writes MIB MiB of zeros to PATH and prints "PATH fits" or "PATH full".
std::string write_mib(const std::string& path, unsigned mib)
{
    return "if head -c " + std::to_string(mib << 20) + " /dev/zero > " + path + " 2>/dev/null; then echo " + path +
           " fits; else echo " + path + " full; fi; ";
}

// The agent recipe's mounts (README): a new /dev, a fresh home, the login file in ~/.claude.
std::vector<std::string> recipe(const TempDir& dir)
{
    write_file(dir / "cred", "{}");
    return {"--dev", "/dev", "--fresh-home", "/home/agent", "--login-file", dir / "cred", kCred};
}

TEST(TmpfsBounds, RootDevAndTheLoginDirRefuse20MiB)
{
    TempDir dir;
    // As the caller runs it, and (for root) without capabilities: a bound holds for root too.
    for (const auto& caps : {std::vector<std::string>{}, no_caps()}) {
        Result r = in_sandbox(args({recipe(dir), caps}), sh(write_mib("/big", 20) + write_mib("/dev/big", 20) +
                                                            write_mib("/home/agent/.claude/big", 20) +
                                                            // Control: the fresh home, without --size, takes it.
                                                            write_mib("/home/agent/big", 20)));
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_EQ(r.out, "/big full\n/dev/big full\n/home/agent/.claude/big full\n/home/agent/big fits\n");
    }
}

TEST(TmpfsBounds, DevShmIsBoundedAndSizeBeforeDevSetsIt)
{
    const std::string describe = "stat -c '%a' /dev/shm; grep -c ' /dev/shm .* - tmpfs ' /proc/self/mountinfo; ";
    Result r = in_sandbox({"--proc", "/proc", "--dev", "/dev"},
                          sh(describe + write_mib("/dev/shm/a", 80) + "rm /dev/shm/a; " + write_mib("/dev/shm/b", 60)));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "755\n1\n/dev/shm/a full\n/dev/shm/b fits\n");
    Result sized = in_sandbox({"--size", std::to_string(100 << 20), "--dev", "/dev"}, sh(write_mib("/dev/shm/a", 80)));
    ASSERT_EQ(sized.code, 0) << sized.err;
    EXPECT_EQ(sized.out, "/dev/shm/a fits\n");
    Result small = in_sandbox({"--size", std::to_string(1 << 20), "--dev", "/dev"}, sh(write_mib("/dev/shm/a", 2)));
    ASSERT_EQ(small.code, 0) << small.err;
    EXPECT_EQ(small.out, "/dev/shm/a full\n");
}

TEST(TmpfsBounds, SizeBeforeLoginFileBoundsItsDirectory)
{
    TempDir dir;
    write_file(dir / "cred", "{}");
    const std::string script = write_mib("/home/agent/.claude/a", 6) + write_mib("/home/agent/.claude/b", 4);
    Result r = in_sandbox({"--dev", "/dev", "--size", std::to_string(8 << 20), "--login-file", dir / "cred", kCred},
                          sh("cd /; " + script));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "/home/agent/.claude/a fits\n/home/agent/.claude/b full\n");
    // Control: the default (4 MiB) refuses the first write already.
    Result control =
        in_sandbox({"--dev", "/dev", "--login-file", dir / "cred", kCred}, sh(write_mib("/home/agent/.claude/a", 6)));
    ASSERT_EQ(control.code, 0) << control.err;
    EXPECT_EQ(control.out, "/home/agent/.claude/a full\n");
    // A directory that an earlier option made a tmpfs keeps that one's size: --size is refused.
    Result refused = in_sandbox(
        {"--fresh-home", "/home/agent", "--size", "1048576", "--login-file", dir / "cred", "/home/agent/.cred"},
        {"true"});
    EXPECT_EQ(refused.code, 1);
    EXPECT_TRUE(contains(refused.err, "--size before --login-file")) << refused.err;
    EXPECT_TRUE(contains(refused.err, "keeps its own size")) << refused.err;
}

TEST(TmpfsBounds, TheRootHoldsItsFileDataAndLittleMore)
{
    const std::string data((3 << 20) + 5, 'x');
    Result r = cocoon(args({minimal_root(),
                            {"--dev", "/dev", "--file", "0", "/big"},
                            sh("wc -c < /big; " + write_mib("/more", 20) +
                               "rm -f /more; "
                               "head -c 524288 /dev/zero > /half && echo half fits")}),
                      data);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, std::to_string(data.size()) + "\n/more full\nhalf fits\n");
}

TEST(TmpfsBounds, EmptyFilesOnTheRootStopAtTheInodeBound)
{
    // printf, not ':': a failed redirection of a special built-in ends dash.
    const std::string script = "i=0; while [ $i -lt 5000 ] && printf '' > DIR/f$i 2>/dev/null; do i=$((i+1)); done; "
                               "echo $i";
    auto count = [&](const std::string& dir, const std::vector<std::string>& options) {
        std::string s = script;
        s.replace(s.find("DIR"), 3, dir);
        Result r = in_sandbox(options, sh(s));
        EXPECT_EQ(r.code, 0) << r.err;
        return std::stoul(r.out.empty() ? "0" : r.out);
    };
    const unsigned long on_root = count("", {"--dev", "/dev"});
    EXPECT_GE(on_root, 100u);
    EXPECT_LE(on_root, 300u);
    // Control: a --tmpfs without --size takes them all.
    EXPECT_EQ(count("/t", {"--dev", "/dev", "--tmpfs", "/t"}), 5000u);
}

TEST(TmpfsBounds, TheReportCountsWhatEveryTmpfsHolds)
{
    TempDir dir;
    ASSERT_EQ(::mkdir((dir / "lower").c_str(), 0755), 0);
    const std::vector<std::string> before = mount_table();
    const std::vector<std::string> options = args({minimal_root(),
                                                   recipe(dir),
                                                   {"--tmpfs", "/t", "--overlay-src", dir / "lower", "--tmp-overlay",
                                                    "/o", "--bind-data", "0", "/bd", "--json-status-fd", "1"}});
    const std::string writes = "head -c 10485760 /dev/zero > /t/ten && "
                               "for f in / /dev/ /dev/shm/ /home/agent/ /home/agent/.claude/ /o/; do "
                               "head -c 524288 /dev/zero > ${f}half || exit 1; done && "
                               "head -c 524288 /dev/zero >> /bd && sleep 0.35";
    Result r = cocoon(args({options, sh(writes)}), "data");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string exit_line = lines(r.out).back();
    const uint64_t bytes = json_number(exit_line, "tmpfs-peak-bytes");
    // Ten MiB in the --tmpfs, and half a MiB in each of seven others: the root, /dev, /dev/shm,
    // the fresh home, the login file's directory, the overlay's upper layer, the data tmpfs. The
    // last goes with the sandbox (the file is unlinked, held by its mount only): the sleep lets
    // a sample (every 100 ms) see it.
    EXPECT_GE(bytes, (10u << 20) + 7 * (512u << 10)) << exit_line;
    EXPECT_LE(bytes, (10u << 20) + 7 * (512u << 10) + (256u << 10)) << exit_line;
    // Control: without the writes, next to nothing.
    Result idle = cocoon(args({options, {"true"}}), "data");
    ASSERT_EQ(idle.code, 0) << idle.err;
    EXPECT_LE(json_number(lines(idle.out).back(), "tmpfs-peak-bytes"), 64u << 10) << idle.out;
    // Nothing of any of them is left on the host.
    EXPECT_EQ(mount_table(), before);
    EXPECT_EQ(files_under(dir.path()),
              (std::map<std::string, std::string>{{dir / "cred", "{}"}, {dir / "lower", "/"}}));
}

}  // namespace
}  // namespace cocoon::test
