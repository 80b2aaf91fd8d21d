// The start-up layout (CMakeLists.txt, COCOON_STARTUP_ORDER): the functions a start runs are
// named by tools/order/startup.order, and the linker put them together. A start is traced with
// tools/order/steptrace.cc (ptrace, single steps) and compared with the list built into this test.
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
#include "tests/support/process.h"

namespace cocoon::test {
namespace {

// tools/order/startup.order as it was at build time.
const char kOrderFile[] = {
#include "startup_order.inc"
    0};

std::string steptrace()
{
    char buf[PATH_MAX] = {};
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    std::string self(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return self.substr(0, self.rfind('/')) + "/cocoon_steptrace";
}

// Function name -> address, from nm.
std::map<std::string, unsigned long long> addresses(const std::string& binary)
{
    std::map<std::string, unsigned long long> out;
    FILE* nm = ::popen(("nm --defined-only '" + binary + "'").c_str(), "r");
    if (!nm)
        return out;
    char line[8192], name[8192];
    unsigned long long address = 0;
    char type = 0;
    while (std::fgets(line, sizeof line, nm))
        if (std::sscanf(line, "%llx %c %8191s", &address, &type, name) == 3 && (type == 't' || type == 'T'))
            out.emplace(name, address);
    ::pclose(nm);
    return out;
}

TEST(StartupOrder, TheListNamesWhatAStartRunsAndTheLinkerPutItTogether)
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
    std::set<std::string> listed;
    for (const std::string& line : lines(kOrderFile))
        if (!line.empty() && line[0] != '#')
            listed.insert(line);
    std::vector<std::string> missing;
    for (const std::string& name : ran)
        if (!listed.count(name))
            missing.push_back(name);
    std::string names;
    for (const std::string& name : missing)
        names += "  " + name + "\n";
    // Some come and go with the host: another CPU makes glibc pick other string functions (and
    // its cache probe another vendor's), about 20 of ~460. More means the list is stale: run
    // tools/order/generate.
    EXPECT_LE(missing.size(), ran.size() / 10)
        << missing.size() << " of the " << ran.size() << " functions a start runs are not in "
        << "tools/order/startup.order (run tools/order/generate):\n"
        << names;
    // Laid out together: the functions a start runs span far less than the 2.4 MB text.
    const auto where = addresses(cocoon_bin());
    unsigned long long low = ULLONG_MAX, high = 0;
    for (const std::string& name : ran)
        if (auto it = where.find(name); it != where.end() && listed.count(name)) {
            low = std::min(low, it->second);
            high = std::max(high, it->second);
        }
    ASSERT_LT(low, high);
    EXPECT_LT(high - low, 1ULL << 20) << "the listed functions span " << (high - low) / 1024 << " KiB";
}

}  // namespace
}  // namespace cocoon::test
