// Test support: run a program (usually the cocoon binary) with captured output.
// Used by the e2e and ns tests; runs as whoever runs the tests.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace cocoon::test {

struct Result {
    int code = -1;  // exit code, or 128+N if signal N killed it
    std::string out, err;
};

// The cocoon binary: $COCOON_BIN, else the one this build made.
std::string cocoon_bin();

// Runs argv[0] (no PATH lookup) with argv, stdin from /dev/null (or `input`),
// and returns its code and output. Fails the test (and kills the process) if it
// runs longer than timeout_ms.
Result run(const std::vector<std::string>& argv, const std::string& input = "", int timeout_ms = 20000);

// Starts argv[0] (no PATH lookup) on its own, stdin from /dev/null, stdout
// and stderr into out_path; its pid (see wait_exit).
pid_t start_logged(const std::vector<std::string>& argv, const std::string& out_path);

// Waits for pid (at most timeout_ms, then SIGKILL and a test failure); its
// exit code or 128+signal.
int wait_exit(pid_t pid, int timeout_ms = 20000);

// run({cocoon_bin(), args...}).
Result cocoon(const std::vector<std::string>& args, const std::string& input = "");

// A fresh directory under /tmp, removed with its contents at destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return m_path; }
    std::string operator/(const std::string& name) const { return m_path + "/" + name; }

private:
    std::string m_path;
};

void write_file(const std::string& path, const std::string& data, mode_t mode = 0644);
std::string read_file(const std::string& path);
bool exists(const std::string& path);

// Lines of /proc/self/mountinfo (host side), to check that nothing leaked.
std::vector<std::string> mount_table();
// Every file under dir with its contents (directories as "/", anything else as "(special)"), so
// that any change a sandbox makes there shows. Directories the caller cannot read are passed over.
std::map<std::string, std::string> files_under(const std::string& dir);
// PIDs of this process's live children and descendants' stragglers that
// still carry `marker` in their command line.
std::vector<pid_t> processes_with(const std::string& marker);

// The bind options for a minimal root: host /usr read-only plus the usual
// merged-/usr symlinks, so sh and coreutils work.
std::vector<std::string> minimal_root();

bool is_root();

// A string no other test run uses, for file names and process markers.
std::string unique_marker(const std::string& prefix);

}  // namespace cocoon::test
