// Whether Debian's bwrap can run here; see bwrap.h.
#include "tests/support/bwrap.h"

#include <unistd.h>

#include "tests/support/process.h"

namespace cocoon::test {

std::string bwrap_unusable(const std::vector<std::string>& options)
{
    if (::access(kBwrap, X_OK) != 0)
        return std::string(kBwrap) + " is not installed (tools/test installs bubblewrap)";
    std::vector<std::string> argv = minimal_root();
    argv.insert(argv.begin(), kBwrap);
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back("true");
    Result r = run(argv);
    if (r.code != 0)
        return std::string(kBwrap) + " cannot make a sandbox for this user here: " + r.err;
    return "";
}

}  // namespace cocoon::test
