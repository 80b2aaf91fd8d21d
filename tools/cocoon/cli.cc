// The command line's machinery: argv split at the command, --args files spliced in where they
// stand, and Boost.Program_options reading the option table (tools/cocoon/option_table.cc) into Options
// in command-line order; then the parsers of option arguments. Pure.
// Runs in: caller.
#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <span>
#include <utility>

#include "base/sys.h"
#include "base/sys_error.h"
#include "tools/cocoon/option_table.h"
#include "tools/cocoon/options.h"
#include "tools/cocoon/plan.h"
#include "tools/cocoon/profile.h"

namespace po = boost::program_options;

namespace cocoon::tools {
namespace {

// An option that takes exactly n arguments, kept as strings. Program_options
// has no such built-in, so the token counts are overridden here.
class Args : public po::typed_value<std::vector<std::string>> {
public:
    explicit Args(unsigned n) : typed_value(nullptr), m_n(n) {}
    unsigned min_tokens() const override { return m_n; }
    unsigned max_tokens() const override { return m_n; }
    bool is_composing() const override { return true; }

private:
    unsigned m_n;
};

// A decimal number below `limit`, nothing else (no sign, no spaces).
std::optional<unsigned long> parse_number(const std::string& text, unsigned long limit)
{
    unsigned long value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || err != std::errc() || end != text.data() + text.size() || value >= limit)
        return std::nullopt;
    return value;
}

// The OptionSpec named `name` (without its "--"), or nullptr. A scan of ~80 names,
// most of them told apart by their first letter: cheaper than building an
// index at each start.
const OptionSpec* find_named(std::string_view name)
{
    for (std::span<const OptionSpec> list : {bwrap_options(), extension_options()})
        for (const OptionSpec& s : list)
            if (name == s.name)
                return &s;
    return nullptr;
}

}  // namespace

const OptionSpec* find_option(const std::string& arg)
{
    return arg.rfind("--", 0) == 0 ? find_named(std::string_view(arg).substr(2)) : nullptr;
}

namespace {

// How many arguments option `arg` takes; throws for an unknown option.
unsigned arity(const std::string& arg)
{
    const OptionSpec* spec = find_option(arg);
    if (!spec)
        throw UsageError("Unknown option " + arg);
    return count_args(spec->args);
}

// Boost's descriptions of just the options on this command line. Start-up
// speed: describing all ~80 of them took ~280,000 instructions per sandbox
// (callgrind), most of it in option_description::set_names.
po::options_description describe(const std::vector<std::string>& option_args)
{
    po::options_description desc;
    std::set<std::string_view> described;
    for (size_t i = 0; i < option_args.size();) {
        const OptionSpec* spec = find_option(option_args[i]);
        if (described.insert(spec->name).second)
            desc.add_options()(spec->name, new Args(count_args(spec->args)), spec->help);
        i += 1 + count_args(spec->args);
    }
    return desc;
}

// bwrap's words for an option without its arguments, which scripts match: "an argument", but "one
// argument" for three options, and both fd binds named --bind-fd.
void check_has_arguments(const std::string& arg, unsigned n, size_t at, size_t size)
{
    if (at + n < size)
        return;
    static const std::set<std::string_view> kOne = {"--chdir", "--remount-ro", "--argv0"};
    const char* count = n == 1   ? (kOne.contains(arg) ? "one argument" : "an argument")
                        : n == 2 ? "two arguments"
                                 : "three arguments";
    throw UsageError((arg == "--ro-bind-fd" ? "--bind-fd" : arg) + " takes " + count);
}

// The NUL-separated arguments of an --args file; a last one without its NUL
// counts too (bwrap's reading).
std::vector<std::string> split_nul(const std::string& data)
{
    std::vector<std::string> out;
    for (size_t pos = 0; pos < data.size();) {
        size_t end = data.find('\0', pos);
        if (end == std::string::npos)
            end = data.size();
        out.push_back(data.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

// --args FD: the file's options, checked to be complete options only. As in
// bwrap, a file may not hold another --args (so there is no recursion to
// bound). Unlike bwrap, which silently drops whatever follows a "--" or a
// non-option in the file, that is refused: dropped words could be options
// the caller believes apply.
std::vector<std::string> read_args_file(const std::string& fd_text, const FdReader& read)
{
    int fd = parse_fd(fd_text);
    std::vector<std::string> words = split_nul(read(fd, "Can't read --args data from fd " + std::to_string(fd)));
    for (size_t i = 0; i < words.size();) {
        const std::string& arg = words[i];
        if (arg == "--args")
            throw UsageError("--args not supported in arguments file");
        if (arg == "--" || arg.empty() || arg[0] != '-')
            throw UsageError("--args " + std::to_string(fd) + ": only options may come from an arguments file, not '" +
                             arg + "'");
        unsigned n = arity(arg);
        check_has_arguments(arg, n, i, words.size());
        i += 1 + n;
    }
    return words;
}

}  // namespace

// --uid, --gid: bwrap's words ("Invalid uid: abc").
unsigned long parse_ugid(const char* what, const std::string& text)
{
    if (auto value = parse_number(text, 0xffffffffUL))
        return *value;
    throw UsageError(std::string("Invalid ") + what + ": " + text);
}

// Every option that takes an fd: bwrap's words ("Invalid fd: abc"), which
// scripts match.
int parse_fd(const std::string& text)
{
    if (auto fd = parse_number(text, 0x80000000UL))
        return static_cast<int>(*fd);
    throw UsageError("Invalid fd: " + text);
}

uint16_t parse_port(const std::string& option, const std::string& text)
{
    std::optional<unsigned long> port = parse_number(text, 65536);
    if (!port || *port < 1)
        throw UsageError("Invalid " + option + " port: " + text + " (1-65535)");
    return static_cast<uint16_t>(*port);
}

double parse_seconds(const std::string& option, const std::string& text)
{
    double value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (err != std::errc() || end != text.data() + text.size() || !(value >= 0) || value > 1e9)
        throw UsageError("Invalid " + option + " argument: " + text + " (seconds, e.g. 10 or 2.5)");
    return value;
}

// --memory-max: bytes, with an optional K, M, G or T suffix (powers of 1024).
uint64_t parse_memory(const std::string& text)
{
    uint64_t value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    const std::string suffix(end, text.data() + text.size());
    int shift = suffix.empty()  ? 0
                : suffix == "K" ? 10
                : suffix == "M" ? 20
                : suffix == "G" ? 30
                : suffix == "T" ? 40
                                : -1;
    if (err != std::errc() || end == text.data() || shift < 0 || value == 0 || value > (uint64_t{INT64_MAX} >> shift))
        throw UsageError("--memory-max takes a non-zero number of bytes, with an optional K, M, G or T suffix: " +
                         text);
    return value << shift;
}

// --pids-max: a positive number of tasks.
uint64_t parse_pids(const std::string& text)
{
    uint64_t value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (err != std::errc() || end != text.data() + text.size() || value == 0 || value > INT32_MAX)
        throw UsageError("--pids-max takes a positive number of tasks: " + text);
    return value;
}

// bwrap's --perms and --chmod argument: octal, at most 07777.
mode_t parse_mode(const std::string& option, const std::string& text)
{
    unsigned value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value, 8);
    if (text.empty() || err != std::errc() || end != text.data() + text.size() || value > 07777)
        throw UsageError(option + " takes an octal argument <= 07777");
    return static_cast<mode_t>(value);
}

// bwrap's --size argument: bytes, decimal, 0x hex or 0 octal (strtoull's
// base 0), not zero, at most what the kernel's loff_t holds.
unsigned long long parse_size(const std::string& text)
{
    int base = 10;
    size_t skip = 0;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
        base = 16, skip = 2;
    else if (text.size() > 1 && text[0] == '0')
        base = 8, skip = 1;
    unsigned long long value = 0;
    const char* first = text.data() + skip;
    auto [end, err] = std::from_chars(first, text.data() + text.size(), value, base);
    if (text.empty() || end == first || err != std::errc() || end != text.data() + text.size() || value == 0)
        throw UsageError("--size takes a non-zero number of bytes");
    constexpr unsigned long long kMax = 0x7fffffffffffffffULL;
    if (value > kMax)
        throw UsageError("--size (for tmpfs) is limited to " + std::to_string(kMax));
    return value;
}

std::string read_fd(int fd, const std::string& context)
{
    return sys::read_to_end_and_close(fd, size_t{16} << 20, context);
}

Options parse_args(const std::vector<std::string>& args, const FdReader& read)
{
    // Split off the command first: it starts after "--" or at the first
    // argument that is neither an option nor an option's argument. --args
    // files are spliced in where they stand, so their options keep their place
    // in command-line order.
    std::vector<std::string> option_args;
    size_t end = 0;
    size_t command = args.size();
    while (end < args.size()) {
        const std::string& arg = args[end];
        if (arg == "--") {
            command = end + 1;
            break;
        }
        if (arg.empty() || arg[0] != '-') {
            command = end;
            break;
        }
        unsigned n = arity(arg);
        check_has_arguments(arg, n, end, args.size());
        if (arg == "--args") {
            std::vector<std::string> words = read_args_file(args[end + 1], read);
            option_args.insert(option_args.end(), words.begin(), words.end());
        } else {
            option_args.insert(option_args.end(), args.begin() + static_cast<long>(end),
                               args.begin() + static_cast<long>(end + 1 + n));
        }
        end += 1 + n;
    }

    Options o;
    // --agent: the profile's options where it stands (tools/cocoon/profile.h); origins names
    // each option's file and line, for the errors of its handler.
    std::vector<std::string> origins;
    o.agent = expand_agent(option_args, origins);
    try {
        const po::options_description desc = describe(option_args);
        po::parsed_options parsed =
            po::command_line_parser(option_args)
                .options(desc)
                .style(po::command_line_style::allow_long | po::command_line_style::long_allow_next)
                .run();
        // parsed.options keeps command-line order, which the mount and
        // environment edits depend on.
        for (size_t i = 0; i < parsed.options.size(); ++i) {
            const po::option& opt = parsed.options[i];
            try {
                check_modifiers(o, opt.string_key);
                find_named(opt.string_key)->handle(o, opt.value);
            } catch (const UsageError& e) {
                if (i >= origins.size() || origins[i].empty())
                    throw;
                throw UsageError(origins[i] + ": " + e.what(), e.detail());
            }
        }
    } catch (const po::error& e) {
        throw UsageError(e.what());
    }
    finish_modifiers(o);
    if (o.dry_run)
        o.option_words = std::move(option_args);
    // Read after parsing, so only the --seccomp that takes effect is read.
    // A failure reads as bwrap words it ("Can't read seccomp data: Bad file
    // descriptor"); the option that named the fd is its detail. bwrap's order: each
    // program is read and checked for whole instructions before the next is
    // read, and every program before any other check of its data (an empty
    // first program and a ragged second are refused for the ragged one).
    for (SeccompInput& in : o.seccomp) {
        try {
            in.bytes = read(in.fd, "Can't read seccomp data");
        } catch (const SysError& e) {
            throw UsageError(e.what(), in.option);
        }
        check_whole_instructions(in);
    }
    o.command.assign(args.begin() + static_cast<long>(command), args.end());
    return o;
}

bool level_prefix_requested(const std::vector<std::string>& args)
{
    for (size_t i = 0; i < args.size();) {
        const std::string& arg = args[i];
        if (arg == "--level-prefix")
            return true;
        if (arg == "--" || arg.empty() || arg[0] != '-')
            return false;
        const OptionSpec* spec = find_option(arg);
        if (!spec)
            return false;
        i += 1 + count_args(spec->args);
    }
    return false;
}

std::string usage(const std::string& prog)
{
    auto list = [](std::span<const OptionSpec> table) {
        std::string out;
        for (const OptionSpec& s : table) {
            std::string left = std::string("    --") + s.name + (*s.args ? " " : "") + s.args;
            left.resize(std::max<size_t>(left.size() + 1, 34), ' ');
            out += left + s.help + "\n";
        }
        return out;
    };
    return "usage: " + prog + " [OPTIONS...] [--] COMMAND [ARGS...]\n\n" + list(bwrap_options()) +
           "\ncocoon's own options (not in bwrap):\n" + list(extension_options());
}

}  // namespace cocoon::tools