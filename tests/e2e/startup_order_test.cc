// The start-up layout (CMakeLists.txt, COCOON_STARTUP_ORDER): the linker put the functions a start
// runs together, as tools/order/startup.order asks. A start is traced with tools/order/steptrace.cc
// (ptrace, single steps) and where those functions are in cocoon's text is read with nm.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/e2e.h"
#include "tests/e2e/helper_binary.h"
#include "tests/support/process.h"

namespace cocoon::test {
namespace {

// tools/order/startup.order as it was at build time.
const char kOrderFile[] = {
#include "startup_order.inc"
    0};

std::string steptrace()
{
    return sibling_binary("cocoon_steptrace");
}

struct Function {
    unsigned long long address = 0, size = 0;
};

// Function name -> address and size, from nm.
std::map<std::string, Function> functions(const std::string& binary)
{
    std::map<std::string, Function> out;
    FILE* nm = ::popen(("nm -S --defined-only '" + binary + "'").c_str(), "r");
    if (!nm)
        return out;
    char line[8192], name[8192];
    Function f;
    char type = 0;
    while (std::fgets(line, sizeof line, nm)) {
        // "ADDRESS SIZE TYPE NAME", or "ADDRESS TYPE NAME" for a symbol without a size.
        f.size = 0;
        if (std::sscanf(line, "%llx %llx %c %8191s", &f.address, &f.size, &type, name) != 4 &&
            std::sscanf(line, "%llx %c %8191s", &f.address, &type, name) != 3)
            continue;
        if (type == 't' || type == 'T' || type == 'w' || type == 'W')
            out.emplace(name, f);
    }
    ::pclose(nm);
    return out;
}

// What the layout is for: the code a start runs is together, so a start faults in few pages of
// the text. Checked on the functions a traced start ran, wherever the linker put each: nine in
// ten of them lie within a stretch of the text at most twice the size of the code they all hold.
// Here (x86-64, ~560 functions, ~340 KiB of code) that stretch is ~540 KiB; an unordered link
// spreads them over the whole text (~2,300 KiB, 6.8 times their size). The tenth left out is
// slack for what no list can hold still: glibc picks string functions by CPU, and a function a
// change renamed or added since tools/order/generate ran sits outside the ordered block (a few
// such cost a page each, no more). So a function moving elsewhere in the binary fails nothing;
// the start's own code scattered does.
TEST(StartupOrder, TheCodeAStartRunsLiesTogether)
{
#if !COCOON_STARTUP_ORDERED
    GTEST_SKIP() << "this build links cocoon without tools/order/startup.order (no lld, "
                    "COCOON_STARTUP_ORDER=OFF, or a sanitizer build, which is not static)";
#endif
    ASSERT_EQ(::access(steptrace().c_str(), X_OK), 0) << steptrace() << " is missing";
    Result r = run(
        {steptrace(), cocoon_bin(), "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"},
        "", 120'000);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<std::string> ran = lines(r.out);
    ASSERT_GT(ran.size(), 100u) << r.out;
    const auto where = functions(cocoon_bin());
    struct Ran {
        unsigned long long address, end;
        std::string name;
    };
    std::vector<Ran> code;
    unsigned long long bytes = 0;
    for (const std::string& name : ran)
        if (auto it = where.find(name); it != where.end()) {
            code.push_back({it->second.address, it->second.address + it->second.size, name});
            bytes += it->second.size;
        }
    ASSERT_EQ(code.size(), ran.size()) << "the tracer named functions nm does not know";
    std::sort(code.begin(), code.end(), [](const Ran& a, const Ran& b) { return a.address < b.address; });
    // The narrowest stretch holding nine in ten of them (by count): sorted by address, the best
    // of every run of `within` consecutive functions.
    const size_t within = (code.size() * 9 + 9) / 10;
    size_t first = 0;
    unsigned long long narrowest = ULLONG_MAX;
    for (size_t i = 0; i + within <= code.size(); ++i) {
        unsigned long long end = 0;
        for (size_t j = i; j < i + within; ++j)
            end = std::max(end, code[j].end);
        if (end - code[i].address < narrowest) {
            narrowest = end - code[i].address;
            first = i;
        }
    }
    // For the message: the functions outside that stretch, and which the list does not name.
    std::set<std::string> listed;
    for (const std::string& line : lines(kOrderFile))
        if (!line.empty() && line[0] != '#')
            listed.insert(line);
    std::string outside;
    for (size_t i = 0; i < code.size(); ++i)
        if (i < first || i >= first + within)
            outside += "  " + code[i].name + (listed.count(code[i].name) ? "\n" : " (not in the list)\n");
    size_t unlisted = 0;
    for (const std::string& name : ran)
        unlisted += listed.count(name) == 0;
    std::printf("startup order: %zu functions, %llu KiB of code; nine in ten within %llu KiB; %zu not in the list\n",
                code.size(), bytes / 1024, narrowest / 1024, unlisted);
    EXPECT_LE(narrowest, 2 * bytes) << "nine in ten of the " << code.size() << " functions a start runs ("
                                    << bytes / 1024 << " KiB of code) span " << narrowest / 1024
                                    << " KiB of cocoon's text: the start-up layout is lost (a stale "
                                       "tools/order/startup.order? run tools/order/generate). Outside that stretch:\n"
                                    << outside;
}

}  // namespace
}  // namespace cocoon::test
