// Checks of refused command lines; see refusal.h.
#include "tests/support/refusal.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace cocoon::test {

void expect_refused(const Result& r, const std::vector<std::string>& named, const std::string& prefix)
{
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(!r.err.empty() && r.err.back() == '\n') << r.err;
    for (const std::string& needle : named)
        EXPECT_NE(r.err.find(needle), std::string::npos) << "expected " << needle << " in: " << r.err;
}

HostSnapshot::HostSnapshot(const std::string& marker_prefix, const std::string& dir)
    : m_marker(unique_marker(marker_prefix)), m_dir(dir), m_mounts(mount_table())
{
    if (!m_dir.empty())
        m_files = files_under(m_dir);
}

void HostSnapshot::expect_unchanged() const
{
    EXPECT_EQ(mount_table(), m_mounts) << "the host's mount table changed";
    EXPECT_EQ(processes_with(m_marker), std::vector<pid_t>{}) << "a process outlived cocoon";
    if (!m_dir.empty()) {
        EXPECT_EQ(files_under(m_dir), m_files) << "files under " << m_dir << " changed on the host";
    }
}

}  // namespace cocoon::test
