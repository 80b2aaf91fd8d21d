// The mount plan: filesystem operations in command-line order, as typed values.
// Pure: built in the monitor from the parsed options, applied later by mount/apply.cc.
#pragma once

#include <sys/types.h>

#include <string>
#include <variant>
#include <vector>

namespace cocoon::mount {

enum class BindKind { ReadWrite, ReadOnly, Dev };

// A host path (resolved from the caller's cwd, before the sandbox exists)
// bound recursively onto a path in the new root.
struct Bind {
    std::string source;
    std::string dest;
    BindKind kind = BindKind::ReadWrite;
    bool optional = false;  // the -try forms: a missing source is skipped
};
struct Tmpfs {
    std::string dest;
    mode_t mode = 0755;
};
struct Proc {
    std::string dest;
};
// --dev as given on the command line; the planner expands it into the ops below.
struct Dev {
    std::string dest;
};
// A new devpts instance (only made by expanding --dev).
struct Devpts {
    std::string dest;
};
struct Dir {
    std::string dest;
    mode_t mode = 0755;
};
struct Symlink {
    std::string target;
    std::string dest;
};
struct RemountRo {
    std::string dest;
};

using Op = std::variant<Bind, Tmpfs, Proc, Dev, Devpts, Dir, Symlink, RemountRo>;

// What apply() executes: destinations normalised, --dev expanded.
struct Plan {
    std::vector<Op> ops;
};

// The destination of any op.
const std::string& dest_of(const Op& op);

// Absolute, without "." or repeated slashes; a destination without a leading
// slash is taken from the sandbox's root, as bwrap does. Throws UsageError for
// an empty path or one with a ".." component (it could name a place outside
// the directory the caller meant).
std::string normalize_dest(const std::string& path);

// Throws UsageError naming the offending destination.
Plan make_plan(const std::vector<Op>& ops);

} // namespace cocoon::mount
