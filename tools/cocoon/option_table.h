// The option table's vocabulary, shared by the command line's two files: tools/cocoon/option_table.cc
// (each option: its name, arguments, help, and what it does to Options) and tools/cocoon/cli.cc (the
// machinery that reads argv with the table, and the parsers of option arguments). Pure.
// Runs in: caller.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tools/cocoon/options.h"

namespace cocoon::tools {

using OptionArgs = std::vector<std::string>;
// A plain function: the tables are constant data, laid out by the linker, with nothing to build
// or allocate when cocoon starts.
using OptionHandler = void (*)(Options&, const OptionArgs&);

struct OptionSpec {
    const char* name;  // without its "--"
    const char* args;  // argument names for --help; their count is the token count
    const char* help;
    OptionHandler handle;
};

// The table (tools/cocoon/option_table.cc): bwrap's options, then cocoon's own, which --help lists apart.
std::span<const OptionSpec> bwrap_options();
std::span<const OptionSpec> extension_options();

// The OptionSpec of option `arg` ("--name"), or nullptr (tools/cocoon/cli.cc).
const OptionSpec* find_option(const std::string& arg);

// How many arguments an OptionSpec's `args` names.
unsigned count_args(const char* args);

// bwrap's rule: a pending --perms or --size must be used by the very next
// option (the other modifier may come between). Throws if `name` is not one.
void check_modifiers(const Options& o, const std::string& name);
// After the last option: refuses --overlay-src layers no overlay took, and drops a --perms or
// --size no option came after (it does nothing, as in bwrap).
void finish_modifiers(Options& o);

// Option arguments, in bwrap's words where bwrap has the option (tools/cocoon/cli.cc). Each throws
// UsageError naming the option and the text.
unsigned long parse_ugid(const char* what, const std::string& text);
int parse_fd(const std::string& text);
uint16_t parse_port(const std::string& option, const std::string& text);
double parse_seconds(const std::string& option, const std::string& text);
uint64_t parse_memory(const std::string& text);
uint64_t parse_pids(const std::string& text);
mode_t parse_mode(const std::string& option, const std::string& text);
unsigned long long parse_size(const std::string& text);

}  // namespace cocoon::tools
