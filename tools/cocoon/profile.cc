// --agent PROFILE: profiles read and spliced into the command line (tools/cocoon/profile.h). The
// syntax is the command line's: Boost.Program_options' split_unix splits each line into words as a
// shell does (quotes, backslash escapes), and each line must be one option of the option table with
// exactly its arguments, so a profile means what the same words typed out mean.
// Runs in: caller.
#include "tools/cocoon/profile.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options/parsers.hpp>

#include <climits>
#include <cstdlib>
#include <utility>

#include "base/sys.h"
#include "base/sys_error.h"
#include "base/unique_fd.h"
#include "tools/cocoon/option_table.h"

namespace cocoon::tools {
namespace {

constexpr size_t kProfileMax = size_t{64} << 10;  // the largest profile file read
constexpr size_t kIncludeDepth = 8;  // includes within includes
constexpr const char* kSuffix = ".profile";

// Options a profile may not hold: another profile is an include, and the rest act on cocoon's own
// run (an fd to read, a report to print), not on the sandbox.
bool refused_in_profile(const std::string& option)
{
    for (const char* name : {"--agent", "--worktree", "--args", "--dry-run", "--help", "--version", "--check"})
        if (option == name)
            return true;
    return false;
}

// A profile's name: letters, digits, '.', '_' and '-', not starting with '.'. Anything else (a '/'
// above all) is a path.
bool is_name(const std::string& text)
{
    if (text.empty() || text[0] == '.')
        return false;
    for (char c : text)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
            return false;
    return true;
}

// A path as realpath(3) gives it, or "" (errno set).
std::string canonical(const std::string& path)
{
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

// `word` with $HOME and $WORKTREE put in; any other $NAME is refused (a profile means the same in
// every environment). `where` names the file and line.
std::string substitute(const std::string& word, const AgentPaths& paths, const std::string& where)
{
    std::string out;
    for (size_t i = 0; i < word.size(); ++i) {
        if (word[i] != '$') {
            out += word[i];
            continue;
        }
        size_t end = i + 1;
        while (end < word.size() && (std::isalnum(static_cast<unsigned char>(word[end])) || word[end] == '_'))
            ++end;
        const std::string name = word.substr(i + 1, end - i - 1);
        if (name == "HOME")
            out += paths.home;
        else if (name == "WORKTREE")
            out += paths.worktree;
        else
            throw UsageError(where + ": $" + name + ": a profile knows $HOME and $WORKTREE, nothing else");
        i = end - 1;
    }
    return out;
}

// Whether every quote of a line is closed, as split_unix reads quotes (either ' or " opens and
// either closes; a backslash escapes the next character). split_unix runs a quote left open to
// the line's end; a profile refuses it.
bool quotes_closed(const std::string& line)
{
    bool open = false;
    for (size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\')
            ++i;
        else if (line[i] == '\'' || line[i] == '"')
            open = !open;
    }
    return !open;
}

// Reads a profile and the profiles it includes, depth first, in order.
class ProfileReader {
public:
    explicit ProfileReader(const AgentPaths& paths) : m_paths(paths) {}

    // The profile `name` names (what: the option or include line that names it, for errors).
    void read_named(const std::string& name, const std::string& base_dir, const std::string& what)
    {
        read_file(locate(name, base_dir, what), what);
    }

    std::vector<std::string> words;
    std::vector<std::string> origins;

private:
    std::string locate(const std::string& name, const std::string& base_dir, const std::string& what) const
    {
        if (!is_name(name))
            return name[0] == '/' || base_dir.empty() ? name : base_dir + "/" + name;
        std::string looked;
        for (const std::string& dir : m_paths.dirs) {
            std::string path = dir + "/" + name + kSuffix;
            struct stat st;
            if (::stat(path.c_str(), &st) == 0 || errno != ENOENT)
                return path;
            looked += (looked.empty() ? "" : ", ") + dir;
        }
        throw UsageError(what + ": no profile " + name + " (looked for " + name + kSuffix + " in " + looked + ")");
    }

    void read_file(const std::string& path, const std::string& what)
    {
        // Security: a profile is the caller's own configuration, read with its rights; opened
        // without blocking (a FIFO) or taking a terminal, and only a regular file is read.
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
        if (!fd)
            throw SysError(errno, what + ": " + path);
        struct stat st;
        check(::fstat(fd.get(), &st), what + ": " + path);
        if (!S_ISREG(st.st_mode))
            throw UsageError(what + ": " + path +
                             " is not a profile: " + (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file"));
        // Security: the agent writes the worktree; a profile there would let one run choose the
        // sandbox of the next.
        const std::string real = canonical("/proc/self/fd/" + std::to_string(fd.get()));
        if (real.empty() || real.rfind(m_paths.worktree + "/", 0) == 0)
            throw UsageError(what + ": " + path + " is in the worktree " + m_paths.worktree +
                             ", which the agent may write: keep profiles outside it");
        for (const auto& [dev, ino] : m_chain)
            if (dev == st.st_dev && ino == st.st_ino)
                throw UsageError(what + ": " + path + " includes itself (an include loop)");
        if (m_chain.size() >= kIncludeDepth)
            throw UsageError(what + ": includes nested deeper than " + std::to_string(kIncludeDepth));
        std::string text;
        if (!sys::read_up_to(fd.get(), kProfileMax + 1, text))
            throw SysError(errno, what + ": " + path);
        if (text.size() > kProfileMax)
            throw UsageError(what + ": " + path + " is larger than 64 KiB");
        m_chain.emplace_back(st.st_dev, st.st_ino);
        size_t number = 0;
        for (size_t pos = 0; pos < text.size(); ++number) {
            size_t end = text.find('\n', pos);
            if (end == std::string::npos)
                end = text.size();
            read_line(path, number + 1, text.substr(pos, end - pos));
            pos = end + 1;
        }
        m_chain.pop_back();
    }

    // One line: blank, a comment, `include OTHER`, or one option with exactly its arguments.
    void read_line(const std::string& path, size_t number, const std::string& line)
    {
        const std::string where = path + ":" + std::to_string(number);
        const size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#')
            return;
        if (!quotes_closed(line))
            throw UsageError(where + ": a quote is not closed");
        std::vector<std::string> split;
        try {
            split = boost::program_options::split_unix(line);
        } catch (const std::exception& e) {
            throw UsageError(where + ": " + e.what());
        }
        if (split.empty())
            return;
        if (split[0] == "include") {
            if (split.size() != 2)
                throw UsageError(where + ": include takes one profile, a name or a path");
            read_named(split[1], sys::split_parent(path).first, where + ": include " + split[1]);
            return;
        }
        const OptionSpec* spec = find_option(split[0]);
        if (!spec)
            throw UsageError(where + ": Unknown option " + split[0]);
        if (refused_in_profile(split[0]))
            throw UsageError(where + ": " + split[0] + " cannot be used in a profile");
        const unsigned n = count_args(spec->args);
        if (split.size() != 1 + n)
            throw UsageError(where + ": " + split[0] + " takes " + std::to_string(n) + " argument" +
                             (n == 1 ? "" : "s") + ", the line has " + std::to_string(split.size() - 1));
        words.push_back(split[0]);
        for (size_t i = 1; i < split.size(); ++i)
            words.push_back(substitute(split[i], m_paths, where));
        origins.push_back(where);
    }

    const AgentPaths& m_paths;
    std::vector<std::pair<dev_t, ino_t>> m_chain;  // the files being read, outermost first
};

// The caller's home: $HOME when it is an absolute path, else the passwd entry's.
std::string caller_home()
{
    if (const char* home = std::getenv("HOME"); home && home[0] == '/')
        return home;
    struct passwd pw;
    struct passwd* found = nullptr;
    char buf[4096];
    if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_dir[0] == '/')
        return found->pw_dir;
    throw UsageError("--agent: the caller has no home (set HOME to an absolute path)");
}

// The paths of a run: the caller's home, the worktree (`given`, or the current directory)
// canonical and checked, the user's profiles, then those installed beside cocoon's binary.
AgentPaths host_paths(const std::string& given)
{
    AgentPaths paths;
    paths.home = caller_home();
    const std::string what = given.empty() ? "--agent: the current directory" : "--worktree " + given;
    paths.worktree = canonical(given.empty() ? "." : given);
    if (paths.worktree.empty())
        throw SysError(errno, what);
    struct stat st;
    if (::stat(paths.worktree.c_str(), &st) < 0 || !S_ISDIR(st.st_mode))
        throw UsageError(what + ": not a directory");
    // Security: the worktree is bound read-write over the fresh home; a worktree that is the home
    // or holds it would hand the agent every file of the caller's (~/.ssh among them).
    std::string home = canonical(paths.home);
    if (home.empty())
        home = paths.home;
    if (paths.worktree == "/" || home == paths.worktree || home.rfind(paths.worktree + "/", 0) == 0)
        throw UsageError(what + " (" + paths.worktree + ") is or holds the home " + home +
                         ": the agent would get all of it; cd into a project, or pass --worktree DIR");
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    paths.dirs.push_back((xdg && xdg[0] == '/' ? std::string(xdg) : paths.home + "/.config") + "/cocoon/profiles");
    // Installed: PREFIX/bin/cocoon beside PREFIX/share/cocoon/profiles (the build tree has the same
    // layout: build/tools/cocoon and build/share/cocoon/profiles).
    const std::string exe = canonical("/proc/self/exe");
    if (!exe.empty())
        paths.dirs.push_back(sys::split_parent(sys::split_parent(exe).first).first + "/share/cocoon/profiles");
    return paths;
}

// The index of each option in `words` (an option's arguments follow it).
std::vector<size_t> option_starts(const std::vector<std::string>& words)
{
    std::vector<size_t> starts;
    for (size_t i = 0; i < words.size();) {
        starts.push_back(i);
        const OptionSpec* spec = find_option(words[i]);
        i += 1 + (spec ? count_args(spec->args) : 0);
    }
    return starts;
}

// The words of option `k` of `words` (as option_starts found them).
std::vector<std::string> option_at(const std::vector<std::string>& words, const std::vector<size_t>& starts, size_t k)
{
    const size_t end = k + 1 < starts.size() ? starts[k + 1] : words.size();
    return {words.begin() + static_cast<long>(starts[k]), words.begin() + static_cast<long>(end)};
}

bool is_egress(const std::string& option)
{
    return option == "--egress" || option == "--egress-allow" || option == "--proxy-env";
}

}  // namespace

std::vector<std::string> read_profile(const std::string& name, const AgentPaths& paths,
                                      std::vector<std::string>& origins)
{
    if (name.empty())
        throw UsageError("--agent: the profile's name is empty");
    ProfileReader reader(paths);
    reader.read_named(name, "", "--agent " + name);
    origins = std::move(reader.origins);
    return std::move(reader.words);
}

std::string expand_agent(std::vector<std::string>& words, std::vector<std::string>& origins)
{
    // The worktree is looked for first: the paths are made only when --agent is there.
    const std::vector<size_t> starts = option_starts(words);
    std::string worktree;
    bool agent = false;
    for (size_t start : starts) {
        agent = agent || words[start] == "--agent";
        if (words[start] == "--worktree")
            worktree = words[start + 1];
    }
    if (!agent) {
        origins.assign(starts.size(), "");
        for (size_t start : starts)
            if (words[start] == "--worktree")
                throw UsageError("--worktree " + words[start + 1] + ": only with --agent");
        return "";
    }
    return expand_agent(words, origins, host_paths(worktree));
}

std::string expand_agent(std::vector<std::string>& words, std::vector<std::string>& origins, const AgentPaths& paths)
{
    const std::vector<size_t> starts = option_starts(words);
    std::string name, relay_port;
    bool worktree = false, proxy_env = false;
    for (size_t start : starts) {
        const std::string& option = words[start];
        if (option == "--agent" && !name.empty())
            throw UsageError("--agent given twice: one profile a run (a profile may include another)");
        if (option == "--agent")
            name = words[start + 1];
        if (option == "--worktree" && std::exchange(worktree, true))
            throw UsageError("--worktree given twice");
        if (option == "--relay" && relay_port.empty())
            relay_port = words[start + 1];
        proxy_env = proxy_env || option == "--proxy-env";
    }
    std::vector<std::string> profile_origins;
    const std::vector<std::string> profile = read_profile(name, paths, profile_origins);
    const std::vector<size_t> profile_starts = option_starts(profile);
    std::vector<std::string> out;
    origins.clear();
    for (size_t k = 0; k < starts.size(); ++k) {
        std::vector<std::string> option = option_at(words, starts, k);
        if (option[0] == "--worktree")
            continue;
        if (option[0] != "--agent") {
            out.insert(out.end(), option.begin(), option.end());
            origins.emplace_back();
            continue;
        }
        for (size_t p = 0; p < profile_starts.size(); ++p) {
            std::vector<std::string> line = option_at(profile, profile_starts, p);
            // The caller's own proxy through --relay replaces the profile's egress.
            if (!relay_port.empty() && is_egress(line[0]))
                continue;
            out.insert(out.end(), line.begin(), line.end());
            origins.push_back(profile_origins[p]);
        }
        if (!relay_port.empty() && !proxy_env) {
            out.insert(out.end(), {"--proxy-env", relay_port});
            origins.push_back("--agent " + name + " with --relay " + relay_port);
        }
    }
    words = std::move(out);
    return name;
}

std::string shell_quote(const std::string& word)
{
    bool bare = !word.empty();
    for (char c : word)
        bare = bare && (std::isalnum(static_cast<unsigned char>(c)) ||
                        std::string_view("_@%+=:,./-").find(c) != std::string_view::npos);
    if (bare)
        return word;
    std::string out = "'";
    for (char c : word)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string dry_run_text(const std::vector<std::string>& option_words, const std::vector<std::string>& command)
{
    std::string out = "cocoon";
    const std::vector<size_t> starts = option_starts(option_words);
    for (size_t k = 0; k < starts.size(); ++k) {
        if (option_words[starts[k]] == "--dry-run")
            continue;
        out += " \\\n ";
        for (const std::string& word : option_at(option_words, starts, k))
            out += " " + shell_quote(word);
    }
    if (!command.empty()) {
        out += " \\\n  --";
        for (const std::string& word : command)
            out += " " + shell_quote(word);
    }
    return out + "\n";
}

}  // namespace cocoon::tools
