// The differential suite: every row of rows.cc under Debian's bwrap and under cocoon-as-bwrap, for
// the caller running the tests (tools/test: root, then an unprivileged user). A missing or unusable
// /usr/bin/bwrap fails every row: CI installs bubblewrap, and this suite never skips.
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>

#include "tests/diff/rows.h"
#include "tests/support/bwrap.h"
#include "tests/support/process.h"

namespace cocoon::test::diff {
namespace {

// docs/bwrap-differences.md as it was when the suite was built (tests/CMakeLists.txt embeds it).
const std::string kDifferences = [] {
    static const unsigned char bytes[] = {
#include "diff_differences.inc"
    };
    return std::string(reinterpret_cast<const char*>(bytes), sizeof bytes);
}();

std::string dir_of_self()
{
    char buf[PATH_MAX] = {};
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    std::string self(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return self.substr(0, self.rfind('/'));
}

// The cocoon binary behind a symlink named bwrap, so that its messages read "bwrap: ...".
class CocoonAsBwrap {
public:
    CocoonAsBwrap()
    {
        if (::symlink(cocoon_bin().c_str(), (m_dir / "bwrap").c_str()) != 0)
            throw std::runtime_error("symlink failed");
    }
    std::string path() const { return m_dir / "bwrap"; }

private:
    TempDir m_dir;
};

// Every row that is not left out, for either caller: tools/test lists the tests as root and runs
// them as another user, so the list must not depend on who makes it.
std::vector<Row> rows_to_run()
{
    std::vector<Row> out;
    for (const Row& row : rows())
        if (!row.left_out)
            out.push_back(row);
    return out;
}

std::string quoted(const std::vector<std::string>& lines)
{
    std::string out;
    for (const std::string& l : lines)
        out += "    \"" + std::regex_replace(l, std::regex(R"(["\\])"), "\\$&") + "\",\n";
    return out.empty() ? "    (none)\n" : out;
}

std::string joined(const std::vector<std::string>& lines)
{
    std::string out;
    for (const std::string& l : lines)
        out += "    " + l + "\n";
    return out;
}

class Diff : public ::testing::TestWithParam<Row> {};

TEST_P(Diff, SameAsBwrapOrTheStatedDifference)
{
    std::string unusable = bwrap_unusable();
    ASSERT_EQ(unusable, "") << "the differential suite needs Debian's bwrap and fails without it";
    const Row& row = GetParam();
    if (row.who != Who::Both && (row.who == Who::Root) != is_root())
        GTEST_SKIP() << "a row for " << (row.who == Who::Root ? "root" : "an unprivileged caller") << " only";
    const std::string probe = dir_of_self() + "/cocoon_diff_probe";
    ASSERT_EQ(::access(probe.c_str(), R_OK), 0) << probe << " is missing (it is built beside this binary)";

    static const CocoonAsBwrap cocoon;
    Report theirs = run_row(row, kBwrap, probe);
    Report ours = run_row(row, cocoon.path(), probe);
    take_out_common_differences(theirs, ours);

    std::vector<std::string> expected = row.differs;
    const auto& more = is_root() ? row.differs_root : row.differs_user;
    expected.insert(expected.end(), more.begin(), more.end());
    std::sort(expected.begin(), expected.end());
    std::vector<std::string> actual = diff(theirs.lines, ours.lines);
    EXPECT_EQ(actual, expected) << "bwrap's report (-) and cocoon's (+) differ otherwise than the row states, for "
                                << (is_root() ? "root" : "an unprivileged caller") << ".\ncommand line: " << ours.argv
                                << "\nactual difference:\n"
                                << quoted(actual) << "stated difference:\n"
                                << quoted(expected) << "bwrap's report:\n"
                                << joined(theirs.lines) << "cocoon's report:\n"
                                << joined(ours.lines);
}

INSTANTIATE_TEST_SUITE_P(Rows, Diff, ::testing::ValuesIn(rows_to_run()),
                         [](const ::testing::TestParamInfo<Row>& row) { return row.param.name; });

// Names in "(row `NAME`)" and "(rows `A`, `B`)" in docs/bwrap-differences.md's table of intended
// differences.
std::set<std::string> documented_rows()
{
    size_t start = kDifferences.find("## Intended differences the differential suite asserts");
    size_t end = kDifferences.find("\n#", start + 4);
    std::string table = kDifferences.substr(start == std::string::npos ? kDifferences.size() : start, end - start);
    std::set<std::string> names;
    static const std::regex kRows(R"(\(rows? ([^)]*)\))"), kName("`([a-z0-9_]+)`");
    for (auto it = std::sregex_iterator(table.begin(), table.end(), kRows); it != std::sregex_iterator(); ++it) {
        const std::string list = (*it)[1];
        for (auto n = std::sregex_iterator(list.begin(), list.end(), kName); n != std::sregex_iterator(); ++n)
            names.insert((*n)[1]);
    }
    return names;
}

// Every row that states a difference has its line in docs/bwrap-differences.md's table, and every
// line there names such a row: an intended difference is documented with its reason, and nothing
// else is.
TEST(DiffDocs, TableListsExactlyTheRowsThatDiffer)
{
    std::set<std::string> differing{"all_rows"};
    for (const Row& row : rows())
        if (!row.left_out && (!row.differs.empty() || !row.differs_root.empty() || !row.differs_user.empty()))
            differing.insert(row.name);
    EXPECT_EQ(documented_rows(), differing);
}

TEST(DiffDocs, AtLeastEightyRowsCoveringEveryBwrapOption)
{
    std::set<std::string> used;
    size_t run = 0;
    for (const Row& row : rows()) {
        if (row.left_out)
            continue;
        ++run;
        for (const std::string& a : row.options)
            if (a.rfind("--", 0) == 0)
                used.insert(a);
    }
    EXPECT_GE(run, 80u);
    // bwrap 0.8.0's --help, less --help itself (its first line is issue 9, item 2).
    for (const char* option : {"--version",
                               "--args",
                               "--unshare-all",
                               "--share-net",
                               "--unshare-user",
                               "--unshare-user-try",
                               "--unshare-ipc",
                               "--unshare-pid",
                               "--unshare-net",
                               "--unshare-uts",
                               "--unshare-cgroup",
                               "--unshare-cgroup-try",
                               "--userns",
                               "--userns2",
                               "--disable-userns",
                               "--assert-userns-disabled",
                               "--pidns",
                               "--uid",
                               "--gid",
                               "--hostname",
                               "--chdir",
                               "--clearenv",
                               "--setenv",
                               "--unsetenv",
                               "--lock-file",
                               "--sync-fd",
                               "--bind",
                               "--bind-try",
                               "--dev-bind",
                               "--dev-bind-try",
                               "--ro-bind",
                               "--ro-bind-try",
                               "--bind-fd",
                               "--ro-bind-fd",
                               "--remount-ro",
                               "--exec-label",
                               "--file-label",
                               "--proc",
                               "--dev",
                               "--tmpfs",
                               "--mqueue",
                               "--dir",
                               "--file",
                               "--bind-data",
                               "--ro-bind-data",
                               "--symlink",
                               "--seccomp",
                               "--add-seccomp-fd",
                               "--block-fd",
                               "--userns-block-fd",
                               "--info-fd",
                               "--json-status-fd",
                               "--new-session",
                               "--die-with-parent",
                               "--as-pid-1",
                               "--cap-add",
                               "--cap-drop",
                               "--perms",
                               "--size",
                               "--chmod"})
        EXPECT_TRUE(used.count(option)) << option << " is in no row";
}

}  // namespace
}  // namespace cocoon::test::diff
