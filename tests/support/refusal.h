// Checks of refused command lines: what cocoon prints, and that the host is left as it was. Used
// by the e2e tests, in the test process, as whoever runs them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace cocoon::test {

// A refused command line: exit 1, nothing on stdout, and exactly one line on stderr that starts
// with `prefix` and contains each of `named`.
void expect_refused(const Result& r, const std::vector<std::string>& named, const std::string& prefix = "cocoon: ");

// The host as a test found it: the mount table, and (for a `dir` that is not "") every file under
// dir with its contents. expect_unchanged() checks that a run left all of it so, and that no
// process carrying the marker outlived cocoon.
class HostSnapshot {
public:
    explicit HostSnapshot(const std::string& marker_prefix, const std::string& dir = "");

    // A string no other run uses; processes_with() finds every process whose command line has it.
    const std::string& marker() const { return m_marker; }
    // Options that put the marker into cocoon's command line, which the sandbox's PID 1 keeps.
    std::vector<std::string> mark() const { return {"--setenv", "COCOON_E2E_MARK", m_marker}; }

    void expect_unchanged() const;

private:
    std::string m_marker;
    std::string m_dir;
    std::vector<std::string> m_mounts;
    std::map<std::string, std::string> m_files;
};

}  // namespace cocoon::test
