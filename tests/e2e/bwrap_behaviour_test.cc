// End-to-end checks of bwrap behaviours that command lines and scripts depend on: --proc without a
// PID namespace of the sandbox's own, --help's first line, --symlink onto a conflicting path, the
// warning for a repeated single-value option, and bwrap's words for bad fds and seccomp data.
// Runs real sandboxes as whoever runs the tests; compares with /usr/bin/bwrap where it can.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/support/bwrap.h"
#include "tests/support/refusal.h"

namespace cocoon::test {
namespace {

// Runs `program args...` through /bin/sh, so that `redirs` ("3</dev/null") opens the fds the
// options name.
Result run_with_fds(const std::string& program, const std::string& redirs, const std::vector<std::string>& args)
{
    std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$@\" " + redirs, "sh", program};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

// Every test starts from a snapshot of the host and checks in TearDown that the run left it as it
// was; cocoon is also run as `bwrap` (a link), so that its messages can be compared with bwrap's
// byte for byte.
class BwrapBehaviour : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_EQ(::symlink(cocoon_bin().c_str(), as_bwrap().c_str()), 0); }
    void TearDown() override { m_host.expect_unchanged(); }

    std::string as_bwrap() const { return m_bin / "bwrap"; }
    // Why bwrap cannot be compared with for a line that only parses (no sandbox needed).
    static std::string bwrap_missing()
    {
        return ::access(kBwrap, X_OK) == 0 ? "" : std::string(kBwrap) + " is not installed";
    }

    TempDir m_bin;  // the bwrap link
    TempDir m_data;  // files the tests make for the sandbox
    const HostSnapshot m_host{"cocoon-bwrap-behaviour"};
};

// The fields of a mountinfo line that describe the mount, not its ids: root, mount point,
// per-mount options, filesystem type, source, superblock options.
struct MountLine {
    std::string root, point, options, fs;
};

std::vector<MountLine> mounts_in(const std::string& mountinfo)
{
    std::vector<MountLine> out;
    for (const std::string& line : lines(mountinfo)) {
        std::istringstream in(line);
        std::vector<std::string> f;
        for (std::string word; in >> word;)
            f.push_back(word);
        size_t dash = 6;
        while (dash < f.size() && f[dash] != "-")
            ++dash;
        if (f.size() < 10 || dash + 3 >= f.size())
            continue;
        out.push_back({f[3], f[4], f[5], f[dash + 1] + " " + f[dash + 2] + " " + f[dash + 3]});
    }
    return out;
}

// The topmost mount at `point`, or an empty one.
MountLine top_mount(const std::vector<MountLine>& mounts, const std::string& point)
{
    MountLine found;
    for (const MountLine& m : mounts)
        if (m.point == point)
            found = m;
    return found;
}

bool has_option(const std::string& options, const std::string& option)
{
    return contains("," + options + ",", "," + option + ",");
}

// What the sandbox reports about its /proc: the device number, its PID namespace, then the
// mountinfo.
const std::string kProcReport = "stat -c %d /proc; readlink /proc/self/ns/pid; cat /proc/self/mountinfo";

TEST_F(BwrapBehaviour, ProcWithoutPidNamespaceIsTheHostsBound)
{
    struct stat host_proc {};
    ASSERT_EQ(::stat("/proc", &host_proc), 0);
    char host_pidns[64] = {};
    ASSERT_GT(::readlink("/proc/self/ns/pid", host_pidns, sizeof host_pidns - 1), 0);
    const std::string why_not_bwrap = bwrap_unusable({"--unshare-user", "--proc", "/proc"});
    // The line every unprivileged caller failed on, and root's with --unshare-user; root without a
    // user namespace follows the same rule. Each with a minimal root and with the host's root.
    for (const std::vector<std::string>& root : {minimal_root(), std::vector<std::string>{"--ro-bind", "/", "/"}})
        for (const std::vector<std::string>& user : {std::vector<std::string>{}, {"--unshare-user"}}) {
            const std::vector<std::string> options = args({m_host.mark(), root, user, {"--proc", "/proc"}});
            Result r = cocoon(args({options, sh(kProcReport)}));
            ASSERT_EQ(r.code, 0) << r.err;
            EXPECT_EQ(r.err, "");
            const std::vector<std::string> out = lines(r.out);
            ASSERT_GE(out.size(), 3u) << r.out;
            // The host's procfs (same device), and the sandbox is in the host's PID namespace.
            EXPECT_EQ(out[0], std::to_string(host_proc.st_dev)) << r.out;
            EXPECT_EQ(out[1], host_pidns) << r.out;
            const std::vector<MountLine> mounts = mounts_in(r.out);
            const MountLine proc = top_mount(mounts, "/proc");
            EXPECT_EQ(proc.root, "/") << r.out;
            EXPECT_EQ(proc.fs.substr(0, 5), "proc ") << r.out;
            EXPECT_TRUE(has_option(proc.options, "nosuid") && has_option(proc.options, "nodev")) << proc.options;
            // As for a new procfs: what reconfigures the kernel is read-only.
            for (const char* name : {"sys", "sysrq-trigger", "irq", "bus"}) {
                const std::string path = std::string("/proc/") + name;
                if (!exists(path))
                    continue;
                const MountLine covered = top_mount(mounts, path);
                EXPECT_EQ(covered.root, std::string("/") + name) << r.out;
                EXPECT_TRUE(has_option(covered.options, "ro")) << path << ": " << covered.options;
            }

            // bwrap: the same /proc mount, and every subdirectory it covers cocoon covers alike.
            if (!why_not_bwrap.empty())
                continue;
            Result b = run(args({{kBwrap}, root, user, {"--proc", "/proc"}, sh(kProcReport)}));
            ASSERT_EQ(b.code, 0) << b.err;
            EXPECT_EQ(lines(b.out)[0], out[0]);
            const std::vector<MountLine> bwrap_mounts = mounts_in(b.out);
            const MountLine bwrap_proc = top_mount(bwrap_mounts, "/proc");
            EXPECT_EQ(proc.options, bwrap_proc.options);
            EXPECT_EQ(proc.fs, bwrap_proc.fs);
            for (const MountLine& m : bwrap_mounts)
                if (m.point.rfind("/proc/", 0) == 0) {
                    const MountLine ours = top_mount(mounts, m.point);
                    EXPECT_EQ(ours.options, m.options) << m.point;
                    EXPECT_EQ(ours.root, m.root) << m.point;
                }
        }
    if (!why_not_bwrap.empty())
        GTEST_SKIP() << "differential part skipped: " << why_not_bwrap;
}

TEST_F(BwrapBehaviour, ProcWithItsOwnPidNamespaceIsNew)
{
    struct stat host_proc {};
    ASSERT_EQ(::stat("/proc", &host_proc), 0);
    Result r = in_sandbox(args({m_host.mark(), {"--unshare-pid", "--proc", "/proc"}}),
                          sh("stat -c %d /proc; echo $$; test -d /proc/$$ && echo listed"));
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<std::string> out = lines(r.out);
    ASSERT_EQ(out.size(), 3u) << r.out;
    EXPECT_NE(out[0], std::to_string(host_proc.st_dev));
    EXPECT_EQ(out[1], "2");  // PID 1 is cocoon's reaper
    EXPECT_EQ(out[2], "listed");
}

TEST_F(BwrapBehaviour, HelpNamesThePathItWasRunBy)
{
    const std::string tail = " [OPTIONS...] [--] COMMAND [ARGS...]";
    for (const std::string& program : {cocoon_bin(), as_bwrap()}) {
        Result r = run({program, "--help"});
        EXPECT_EQ(r.code, 0);
        EXPECT_EQ(r.err, "");
        EXPECT_EQ(lines(r.out).at(0), "usage: " + program + tail);
    }
    if (std::string why = bwrap_missing(); !why.empty())
        GTEST_SKIP() << "differential part skipped: " << why;
    Result b = run({kBwrap, "--help"});
    EXPECT_EQ(b.code, 0);
    EXPECT_EQ(lines(b.out).at(0), std::string("usage: ") + kBwrap + tail);
}

TEST_F(BwrapBehaviour, SymlinkOntoAnotherLinkNamesItsTarget)
{
    const std::vector<std::string> tmp{"--tmpfs", "/tmp"};
    // bwrap's words (0.9 on; Debian's 0.8.0 says only "File exists").
    expect_refused(
        in_sandbox(args({m_host.mark(), tmp, {"--symlink", "a", "/tmp/l", "--symlink", "b", "/tmp/l"}}), {"true"}),
        {"cocoon: Can't make symlink at /tmp/l: existing destination is a\n"});
    expect_refused(in_sandbox(args({m_host.mark(), tmp, {"--dir", "/tmp/d", "--symlink", "a", "/tmp/d"}}), {"true"}),
                   {"cocoon: Can't make symlink at /tmp/d: destination exists and is not a symlink\n"});
    write_file(m_data / "f", "x");
    expect_refused(
        in_sandbox(args({m_host.mark(), tmp, {"--ro-bind", m_data / "f", "/tmp/f", "--symlink", "a", "/tmp/f"}}),
                   {"true"}),
        {"cocoon: Can't make symlink at /tmp/f: destination exists and is not a symlink\n"});
    // The same link again is fine, and is the one there.
    Result same = in_sandbox(args({m_host.mark(), tmp, {"--symlink", "a", "/tmp/l", "--symlink", "a", "/tmp/l"}}),
                             {"readlink", "/tmp/l"});
    EXPECT_EQ(same.code, 0) << same.err;
    EXPECT_EQ(same.out, "a\n");
    EXPECT_EQ(same.err, "");
}

// A repeated single-value option: the last value counts, and bwrap's warning is the one line on
// stderr; compared byte for byte with bwrap's.
struct Repeat {
    std::vector<std::string> options;
    std::string redirs;  // opens the fds the options name
    std::string script;  // what the command prints
    std::string out;  // what it must print
};

TEST_F(BwrapBehaviour, RepeatedSingleValueOptionsWarnAndTheLastCounts)
{
    const std::string allow = m_data / "allow.bpf";
    write_file(allow, std::string("\x06\x00\x00\x00\x00\x00\xff\x7f", 8));  // BPF_RET|BPF_K, SECCOMP_RET_ALLOW
    const std::vector<Repeat> cases = {
        {{"--chdir", "/", "--chdir", "/usr"}, "", "pwd", "/usr\n"},
        {{"--unshare-uts", "--hostname", "one", "--hostname", "two"}, "", "uname -n", "two\n"},
        {{"--unshare-user", "--uid", "5", "--uid", "7"}, "", "id -u", "7\n"},
        {{"--unshare-user", "--gid", "5", "--gid", "7"}, "", "id -g", "7\n"},
        {{"--info-fd", "3", "--info-fd", "4"}, "3>/dev/null 4>/dev/null", "echo ran", "ran\n"},
        {{"--json-status-fd", "3", "--json-status-fd", "4"}, "3>/dev/null 4>/dev/null", "echo ran", "ran\n"},
        {{"--sync-fd", "3", "--sync-fd", "4"}, "3>/dev/null 4>/dev/null", "echo ran", "ran\n"},
        {{"--block-fd", "3", "--block-fd", "4"}, "3</dev/null 4</dev/null", "echo ran", "ran\n"},
        {{"--seccomp", "3", "--seccomp", "4"}, "3<" + allow + " 4<" + allow, "echo ran", "ran\n"},
    };
    const bool compare = bwrap_unusable({"--unshare-user"}).empty();
    for (const Repeat& c : cases) {
        const std::string option = c.options[c.options.size() - 2];
        const std::vector<std::string> line = args({m_host.mark(), minimal_root(), c.options, sh(c.script)});
        Result r = run_with_fds(as_bwrap(), c.redirs, line);
        EXPECT_EQ(r.code, 0) << option << ": " << r.err;
        EXPECT_EQ(r.out, c.out) << option;
        EXPECT_EQ(r.err, "bwrap: Only the last " + option + " option will take effect\n");
        // Given once (the first of the two left out): nothing said.
        const std::vector<std::string> single(c.options.begin(), c.options.end() - 4);
        Result once =
            run_with_fds(as_bwrap(), c.redirs,
                         args({m_host.mark(), minimal_root(), single, {option, c.options.back()}, sh(c.script)}));
        EXPECT_EQ(once.code, 0) << option << ": " << once.err;
        EXPECT_EQ(once.err, "") << option;
        if (compare) {
            Result b = run_with_fds(kBwrap, c.redirs, line);
            EXPECT_EQ(b.code, 0) << option << ": " << b.err;
            EXPECT_EQ(b.out, r.out) << option;
            EXPECT_EQ(b.err, r.err) << option;
        }
    }
    // --level-prefix marks the warning as one (bwrap 0.8.0 has no --level-prefix to compare with).
    Result prefixed =
        cocoon(args({m_host.mark(), minimal_root(), {"--level-prefix", "--chdir", "/", "--chdir", "/usr"}, {"pwd"}}));
    EXPECT_EQ(prefixed.code, 0) << prefixed.err;
    EXPECT_EQ(prefixed.out, "/usr\n");
    EXPECT_EQ(prefixed.err, "<4>cocoon: Only the last --chdir option will take effect\n");
    if (!compare)
        GTEST_SKIP() << "differential part skipped: " << bwrap_unusable({"--unshare-user"});
}

TEST_F(BwrapBehaviour, RepeatedNamespaceOptionsWarnBeforeTheirFdsAreChecked)
{
    // fd 9 is closed: the line is refused, but the warning comes first, as in bwrap.
    for (const char* option : {"--userns", "--userns2", "--pidns", "--userns-block-fd"}) {
        Result r = run(args({{as_bwrap()}, m_host.mark(), minimal_root(), {option, "9", option, "9", "true"}}));
        EXPECT_EQ(r.code, 1) << option;
        const std::vector<std::string> err = lines(r.err);
        ASSERT_EQ(err.size(), 2u) << r.err;
        EXPECT_EQ(err[0], std::string("bwrap: Only the last ") + option + " option will take effect");
        // Debian's bwrap 0.8.0 hangs after a failed --userns2.
        if (!bwrap_missing().empty() || std::string(option) == "--userns2")
            continue;
        Result b = run(args({{kBwrap}, minimal_root(), {option, "9", option, "9", "true"}}));
        EXPECT_EQ(lines(b.err).at(0), err[0]) << option;
    }
}

TEST_F(BwrapBehaviour, BadFdsAndSeccompDataInBwrapsWords)
{
    // Each refused line: exit 1, one line, bwrap's text (cocoon may add context after it).
    struct Bad {
        std::vector<std::string> options;
        std::string redirs;
        std::string bwrap_says;
    };
    const std::string ragged = m_data / "ragged.bpf";
    write_file(ragged, "123456789");
    const std::string empty = m_data / "empty.bpf";
    write_file(empty, "");
    std::vector<Bad> cases;
    for (const char* option :
         {"--args", "--info-fd", "--json-status-fd", "--sync-fd", "--block-fd", "--userns-block-fd", "--userns",
          "--userns2", "--pidns", "--seccomp", "--add-seccomp-fd"})
        cases.push_back({{option, "abc"}, "", "bwrap: Invalid fd: abc"});
    for (const char* option : {"--file", "--bind-data", "--ro-bind-data"})
        cases.push_back({{option, "x1", "/d"}, "", "bwrap: Invalid fd: x1"});
    cases.push_back({{"--seccomp", "-1"}, "", "bwrap: Invalid fd: -1"});
    cases.push_back({{"--uid", "abc"}, "", "bwrap: Invalid uid: abc"});
    cases.push_back({{"--gid", "-2"}, "", "bwrap: Invalid gid: -2"});
    cases.push_back({{"--seccomp", "3"}, "3<" + ragged, "bwrap: Invalid seccomp data, must be multiple of 8"});
    cases.push_back({{"--add-seccomp-fd", "3"}, "3<" + ragged, "bwrap: Invalid seccomp data, must be multiple of 8"});
    // bwrap reads and checks each program in turn: an empty first program and a one-byte second
    // are refused for the second's size; a ragged one before a later fd is read.
    const std::string one_byte = m_data / "one.bpf";
    write_file(one_byte, "x");
    cases.push_back({{"--add-seccomp-fd", "3", "--add-seccomp-fd", "4"},
                     "3<" + empty + " 4<" + one_byte,
                     "bwrap: Invalid seccomp data, must be multiple of 8"});
    cases.push_back({{"--add-seccomp-fd", "3", "--add-seccomp-fd", "9"},
                     "3<" + ragged,
                     "bwrap: Invalid seccomp data, must be multiple of 8"});
    cases.push_back({{"--seccomp", "9"}, "", "bwrap: Can't read seccomp data: Bad file descriptor"});
    cases.push_back({{"--add-seccomp-fd", "9"}, "", "bwrap: Can't read seccomp data: Bad file descriptor"});
    const bool compare = bwrap_missing().empty();
    for (const Bad& c : cases) {
        const std::vector<std::string> line = args({m_host.mark(), minimal_root(), c.options, {"true"}});
        Result r = run_with_fds(as_bwrap(), c.redirs, line);
        expect_refused(r, {}, c.bwrap_says);
        if (compare) {
            Result b = run_with_fds(kBwrap, c.redirs, line);
            EXPECT_EQ(b.code, 1) << b.err;
            EXPECT_EQ(b.err, c.bwrap_says + "\n");
        }
    }
    // An empty program is a multiple of 8: cocoon's own check refuses it (bwrap leaves it to prctl).
    expect_refused(
        run_with_fds(as_bwrap(), "3<" + empty, args({m_host.mark(), minimal_root(), {"--seccomp", "3"}, {"true"}})),
        {"--seccomp 3", "0 bytes"}, "bwrap: Invalid seccomp data from ");
    if (!compare)
        GTEST_SKIP() << "differential part skipped: " << bwrap_missing();
}

}  // namespace
}  // namespace cocoon::test
