// Debian's bwrap, against which the e2e tests run the same command lines as cocoon's (the
// differential tests). Used in the test process, as whoever runs the tests.
#pragma once

#include <string>
#include <vector>

namespace cocoon::test {

inline constexpr const char* kBwrap = "/usr/bin/bwrap";

// Why kBwrap cannot be compared with here, or "" if it can: it is not installed, or it cannot
// make a sandbox of minimal_root() plus `options` for this user (e.g. an unprivileged caller on a
// kernel without user namespaces for it).
std::string bwrap_unusable(const std::vector<std::string>& options = {});

}  // namespace cocoon::test
