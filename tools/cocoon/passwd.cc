// Resolving --host-user USER[:GROUP] against the host's /etc/passwd and
// /etc/group texts. Pure, unit-tested.
// Runs in: caller.
#include "tools/cocoon/passwd.h"

#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include "base/sys_error.h"

namespace cocoon::tools {
namespace {

// A decimal id, nothing else; (uid_t)-1 is "no id" to the kernel.
std::optional<uint32_t> parse_id(std::string_view text)
{
    uint32_t value = 0;
    auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || err != std::errc() || end != text.data() + text.size() || value == UINT32_MAX)
        return std::nullopt;
    return value;
}

// The colon-separated fields of one line.
std::vector<std::string_view> fields(std::string_view line)
{
    std::vector<std::string_view> out;
    for (size_t pos = 0;;) {
        size_t colon = line.find(':', pos);
        out.push_back(line.substr(pos, colon == std::string_view::npos ? std::string_view::npos : colon - pos));
        if (colon == std::string_view::npos)
            return out;
        pos = colon + 1;
    }
}

// The fields of the first entry of a passwd or group text (at least
// min_fields of them, the id in the third) that `match` accepts; empty if
// there is none. Lines that are not entries (comments, NIS's +/- lines, short
// ones) are passed over.
template <typename Match>
std::vector<std::string_view> find_entry(std::string_view text, size_t min_fields, const Match& match)
{
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        if (line.empty() || line[0] == '#' || line[0] == '+' || line[0] == '-')
            continue;
        std::vector<std::string_view> f = fields(line);
        if (f.size() >= min_fields && parse_id(f[2]) && match(f))
            return f;
    }
    return {};
}

constexpr size_t kPasswdFields = 4;  // name:password:uid:gid (then gecos, home, shell)
constexpr size_t kGroupFields = 3;  // name:password:gid (then the members)

auto named(std::string_view name)
{
    return [name](const std::vector<std::string_view>& f) { return f[0] == name; };
}

}  // namespace

HostIds resolve_host_user(const std::string& spec, const std::string& passwd, const std::string& group)
{
    const std::string what = "--host-user " + spec;
    const size_t colon = spec.find(':');
    const std::string_view user = std::string_view(spec).substr(0, colon);
    const std::optional<std::string_view> group_name =
        colon == std::string::npos ? std::nullopt : std::optional(std::string_view(spec).substr(colon + 1));
    if (user.empty() || (group_name && group_name->empty()))
        throw UsageError(what + ": give USER or USER:GROUP (names or numbers)");

    HostIds ids;
    std::optional<gid_t> primary;
    if (std::optional<uint32_t> number = parse_id(user)) {
        ids.uid = *number;
        auto entry = find_entry(passwd, kPasswdFields, [&](const auto& f) { return parse_id(f[2]) == number; });
        if (!entry.empty())
            primary = parse_id(entry[3]);
    } else {
        auto entry = find_entry(passwd, kPasswdFields, named(user));
        if (entry.empty() || !parse_id(entry[3]))
            throw UsageError(what + ": no user " + std::string(user) +
                             " in /etc/passwd (cocoon reads the local files only: give a number)");
        ids.uid = *parse_id(entry[2]);
        primary = *parse_id(entry[3]);
    }
    if (group_name) {
        if (std::optional<uint32_t> number = parse_id(*group_name)) {
            ids.gid = *number;
        } else {
            auto entry = find_entry(group, kGroupFields, named(*group_name));
            if (entry.empty())
                throw UsageError(what + ": no group " + std::string(*group_name) +
                                 " in /etc/group (cocoon reads the local files only: give a number)");
            ids.gid = *parse_id(entry[2]);
        }
    } else if (primary) {
        ids.gid = *primary;
    } else {
        throw UsageError(what + ": uid " + std::string(user) +
                         " has no entry in /etc/passwd to take a group from: " + "give one, as USER:GROUP");
    }
    // Security: the point is to act as a user other than root; uid 0 or gid 0
    // (say an alias of root, or a user whose primary group is root's) would
    // hand the sandbox root's files again.
    if (ids.uid == 0)
        throw UsageError(what + ": that is uid 0 (root); name an unprivileged user");
    if (ids.gid == 0)
        throw UsageError(what + ": its group is gid 0 (root's); name another, as USER:GROUP");
    return ids;
}

}  // namespace cocoon::tools
