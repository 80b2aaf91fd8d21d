// --agent PROFILE: a profile (the hardened agent layout, one option per line) read, its includes
// followed, $HOME and $WORKTREE put in, and its options spliced into the command line where
// --agent stands; --dry-run's printing of the result. Reads the caller's files with the caller's
// rights, before anything else happens.
// Runs in: caller.
#pragma once

#include <string>
#include <vector>

namespace cocoon::tools {

// The two paths a profile may name, and where a profile's name is looked up.
struct AgentPaths {
    std::string home;  // $HOME: the caller's home
    std::string worktree;  // $WORKTREE: canonical, a directory, neither / nor the home nor above it
    std::vector<std::string> dirs;  // the user's profiles, then the installed ones
};

// The option words before the command, --args files spliced in (cli.cc). If they hold --agent
// PROFILE, it and any --worktree DIR give way to the profile's options, each line's words at
// --agent's place; with --relay given, the profile's own egress (--egress, --egress-allow,
// --proxy-env) is left out, and --proxy-env names the first --relay's port unless an option of
// the caller's sets one. Returns PROFILE, or "" without --agent; origins gets one entry per option
// of `words` after the call: "FILE:LINE" for a profile's, "" for the caller's. Throws UsageError
// naming the option, or the file and line.
std::string expand_agent(std::vector<std::string>& words, std::vector<std::string>& origins);

// The same, with the paths given (tests): `paths.worktree` is taken as it is.
std::string expand_agent(std::vector<std::string>& words, std::vector<std::string>& origins, const AgentPaths& paths);

// The profile's words alone (name or path), one entry of `origins` per option.
std::vector<std::string> read_profile(const std::string& name, const AgentPaths& paths,
                                      std::vector<std::string>& origins);

// --dry-run: the command line that runs, one option per line (--dry-run left out), each word
// shell-quoted, ready to paste into sh (lines end in " \").
std::string dry_run_text(const std::vector<std::string>& option_words, const std::vector<std::string>& command);

// A word as sh reads it back: bare when only safe characters, else in single quotes.
std::string shell_quote(const std::string& word);

}  // namespace cocoon::tools
