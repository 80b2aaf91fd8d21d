// Compares two reports of a row: takes out of both the differences any row may show (as
// harness.h states them), then diffs what is left; see harness.h. Runs in the test process.
#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "mount/plan.h"
#include "tests/diff/harness.h"

namespace cocoon::test::diff {

// Mounts stacked on one point of the host (seen: /dev/pts and /dev/shm mounted twice) under a
// recursive bind: bwrap remounts only one of each stack read-only, cocoon every one
// (docs/bwrap-differences.md, row `all_rows`). Points stacked in both reports are left out of the
// comparison.
static void take_out_stacked_mounts(Report& bwrap, Report& cocoon)
{
    std::map<std::string, int> theirs, ours;
    auto point = [](const std::string& l) { return l.substr(6, l.find(' ', 6) - 6); };
    for (auto [r, seen] : {std::pair{&bwrap, &theirs}, {&cocoon, &ours}})
        for (const std::string& l : r->lines)
            if (l.rfind("mount ", 0) == 0)
                ++(*seen)[point(l)];
    auto stacked = [&](const std::string& l) {
        return l.rfind("mount ", 0) == 0 && theirs[point(l)] > 1 && ours[point(l)] > 1;
    };
    for (Report* r : {&bwrap, &cocoon})
        r->lines.erase(std::remove_if(r->lines.begin(), r->lines.end(), stacked), r->lines.end());
}

// cocoon's default seccomp policy: one filter under the caller's (docs/bwrap-differences.md, row
// `all_rows`).
static void take_out_default_filter(Report& cocoon)
{
    static const std::regex kFilters("^status Seccomp_filters:\\s+(\\d+)$");
    bool only_ours = false;
    for (std::string& line : cocoon.lines) {
        std::smatch m;
        if (std::regex_match(line, m, kFilters) && std::stoi(m[1]) >= 1) {
            const int theirs = std::stoi(m[1]) - 1;
            only_ours = theirs == 0;
            line = "status Seccomp_filters: " + std::to_string(theirs);
        }
    }
    if (only_ours)
        for (std::string& line : cocoon.lines)
            if (std::regex_match(line, std::regex("^status Seccomp:\\s+2$")))
                line = "status Seccomp: 0";
}

// The mount table by mount point; the mounts stacked on one point stay in their order.
static void sort_mounts(Report& r)
{
    auto is_mount = [](const std::string& l) { return l.rfind("mount ", 0) == 0; };
    auto first = std::find_if(r.lines.begin(), r.lines.end(), is_mount);
    auto last = std::find_if_not(first, r.lines.end(), is_mount);
    std::stable_sort(first, last, [](const std::string& a, const std::string& b) {
        return a.substr(6, a.find(' ', 6) - 6) < b.substr(6, b.find(' ', 6) - 6);
    });
}

// The root tmpfs, and the tmpfs files behind --bind-data and --ro-bind-data.
// (A tmpfs mounted in a user namespace names its owner: the same on both sides.)
static void name_tmpfs_mounts(Report& bwrap, Report& cocoon)
{
    static const std::regex kTheirRoot(
        "^mount / root=/newroot tmpfs src=tmpfs ([a-z,]+) super=rw(,uid=\\d+,gid=\\d+)?$");
    static const std::regex kOurRoot(
        "^mount / root=/ tmpfs src=tmpfs ([a-z,]+) super=rw,size=\\d+k,nr_inodes=\\d+,mode=755(,uid=\\d+,gid=\\d+)?$");
    static const std::regex kTheirData(
        "^(mount \\S+) root=/bindfile[A-Za-z0-9]{6}//deleted tmpfs src=tmpfs ([a-z,]+) super=rw(,uid=\\d+,gid=\\d+)?$");
    static const std::regex kOurData("^(mount \\S+) root=/data-[0-9]+//deleted tmpfs src=tmpfs ([a-z,]+) "
                                     "super=rw,size=\\d+k,nr_inodes=\\d+,mode=700(,uid=\\d+,gid=\\d+)?$");
    auto first_root = [](Report& r) {
        return std::find_if(r.lines.begin(), r.lines.end(),
                            [](const std::string& l) { return l.rfind("mount / ", 0) == 0; });
    };
    auto theirs = first_root(bwrap), ours = first_root(cocoon);
    if (theirs != bwrap.lines.end() && ours != cocoon.lines.end() && std::regex_match(*theirs, kTheirRoot) &&
        std::regex_match(*ours, kOurRoot)) {
        *theirs = std::regex_replace(*theirs, kTheirRoot, "mount / (the sandbox's root tmpfs) $1$2");
        *ours = std::regex_replace(*ours, kOurRoot, "mount / (the sandbox's root tmpfs) $1$2");
    }
    for (std::string& l : bwrap.lines)
        l = std::regex_replace(l, kTheirData, "$1 (a data file's tmpfs) $2$3");
    for (std::string& l : cocoon.lines)
        l = std::regex_replace(l, kOurData, "$1 (a data file's tmpfs) $2$3");
}

// cocoon's covers of /proc/keys and /proc/key-users (the host's /dev/null, read-only), and the
// nr_inodes a --size tmpfs gets from its size (docs/bwrap-differences.md, row `all_rows`).
static void take_out_keys_covers_and_inodes(Report& cocoon)
{
    static const std::regex kKeysCover("^mount /proc/(keys|key-users) root=/null .*$");
    std::erase_if(cocoon.lines, [](const std::string& l) { return std::regex_match(l, kKeysCover); });
    static const std::regex kInodes("^(mount .* super=rw)(,size=([0-9]+)k),nr_inodes=([0-9]+)(.*)$");
    for (std::string& l : cocoon.lines) {
        std::smatch m;
        if (std::regex_match(l, m, kInodes) && std::stoull(m[4]) == mount::tmpfs_inodes(std::stoull(m[3]) * 1024))
            l = m[1].str() + m[2].str() + m[5].str();
        else if (std::regex_match(l, m, kInodes) && l.find(" tmpfs src=tmpfs ") != std::string::npos)
            l = m[1].str() + m[5].str();  // --dev's tmpfs, sized to what it holds (the same row)
    }
}

// --dev's shm: a tmpfs of its own in cocoon, a directory of /dev's in bwrap
// (docs/bwrap-differences.md, row `all_rows`).
static void take_out_dev_shm(const Report& bwrap, Report& cocoon)
{
    static const std::regex kShm("^mount (\\S+)/shm root=/ tmpfs src=tmpfs [a-z,]+ super=rw,size=[0-9]+k,mode=755.*$");
    std::erase_if(cocoon.lines, [&](const std::string& l) {
        std::smatch m;
        return std::regex_match(l, m, kShm) &&
               std::none_of(bwrap.lines.begin(), bwrap.lines.end(), [&](const std::string& line) {
                   return line.rfind("mount " + m[1].str() + "/shm ", 0) == 0;
               });
    });
}

// Left out until issue 9, item 6 lands: cocoon's PID 1 is not dumpable, so a command without
// capabilities cannot read its /proc/1/ns (bwrap's is readable, and the same as the command's).
static void take_out_pid1_ns(Report& bwrap, Report& cocoon)
{
    auto theirs = std::find(bwrap.lines.begin(), bwrap.lines.end(), "pid1-ns same");
    auto ours = std::find(cocoon.lines.begin(), cocoon.lines.end(), "pid1-ns unreadable (Permission denied)");
    if (theirs != bwrap.lines.end() && ours != cocoon.lines.end())
        *theirs = *ours = "pid1-ns (left out until issue 9, item 6)";
}

// A refusal on one side only: that side's exit code and messages against "(probe ran)".
static void take_out_one_sided_refusal(Report& bwrap, Report& cocoon)
{
    auto probe_ran = [](const Report& r) {
        return std::any_of(r.lines.begin(), r.lines.end(),
                           [](const std::string& l) { return l.rfind("argv0 ", 0) == 0; });
    };
    if (probe_ran(bwrap) == probe_ran(cocoon))
        return;
    Report& ran = probe_ran(bwrap) ? bwrap : cocoon;
    std::erase_if(ran.lines, [](const std::string& l) {
        return l.rfind("exit ", 0) != 0 && l.rfind("err ", 0) != 0 && l.rfind("after ", 0) != 0;
    });
    ran.lines.push_back("(probe ran)");
}

// cocoon always covers /proc/sys, irq and bus read-only; bwrap only where access(W_OK) allows
// writing. Where bwrap mounted a /proc and left one uncovered, cocoon's cover is left out.
static void take_out_proc_covers(const Report& bwrap, Report& cocoon)
{
    auto has = [](const std::vector<std::string>& lines, const std::string& line) {
        return std::find(lines.begin(), lines.end(), line) != lines.end();
    };
    if (!has(bwrap.lines, "mount /proc root=/ proc src=proc rw,nosuid,nodev,noexec,relatime super=rw"))
        return;
    for (const char* name : {"sys", "irq", "bus"}) {
        std::string cover = std::string("mount /proc/") + name + " root=/" + name +
                            " proc src=proc ro,nosuid,nodev,noexec,relatime super=rw";
        if (!has(bwrap.lines, cover))
            std::erase(cocoon.lines, cover);
    }
}

static void take_out_known_differences(Report& bwrap, Report& cocoon)
{
    take_out_default_filter(cocoon);
    sort_mounts(bwrap);
    sort_mounts(cocoon);
    name_tmpfs_mounts(bwrap, cocoon);
    take_out_keys_covers_and_inodes(cocoon);
    take_out_dev_shm(bwrap, cocoon);
    take_out_pid1_ns(bwrap, cocoon);
    take_out_one_sided_refusal(bwrap, cocoon);
    take_out_proc_covers(bwrap, cocoon);
}

void take_out_common_differences(Report& bwrap, Report& cocoon)
{
    take_out_known_differences(bwrap, cocoon);
    take_out_stacked_mounts(bwrap, cocoon);
}

std::vector<std::string> diff(const std::vector<std::string>& a, const std::vector<std::string>& b)
{
    // Longest common subsequence, then what is left of each side.
    std::vector<std::vector<int>> lcs(a.size() + 1, std::vector<int>(b.size() + 1, 0));
    for (size_t i = a.size(); i-- > 0;)
        for (size_t j = b.size(); j-- > 0;)
            lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    std::vector<std::string> out;
    size_t i = 0, j = 0;
    while (i < a.size() || j < b.size()) {
        if (i < a.size() && j < b.size() && a[i] == b[j]) {
            ++i;
            ++j;
        } else if (j == b.size() || (i < a.size() && lcs[i + 1][j] >= lcs[i][j + 1])) {
            out.push_back("-" + a[i++]);
        } else {
            out.push_back("+" + b[j++]);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace cocoon::test::diff
