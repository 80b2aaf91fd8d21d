// A /proc the kernel will not mount again, found from the mount table (mount/masked_proc.h).
// Runs in: caller, setup: --check asks it before any sandbox; set-up when a proc mount fails.
#include "mount/masked_proc.h"

#include <sys/mount.h>

#include <cerrno>
#include <sstream>
#include <vector>

#include "base/sys.h"
#include "base/sys_error.h"
#include "mount/new_root.h"

namespace cocoon::mount {
namespace {

// A mountinfo field with its octal escapes ("\040" for a space) undone.
std::string unescaped(const std::string& field)
{
    std::string out;
    auto is_octal = [](char c) { return c >= '0' && c <= '7'; };
    for (size_t i = 0; i < field.size(); ++i) {
        if (field[i] == '\\' && i + 3 < field.size() && is_octal(field[i + 1]) && is_octal(field[i + 2]) &&
            is_octal(field[i + 3])) {
            out += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
            i += 3;
        } else {
            out += field[i];
        }
    }
    return out;
}

struct Mount {
    std::string point;
    std::string fstype;
};

// Each line's mount point (field 5) and filesystem type (the field after the " - " separator).
std::vector<Mount> mounts_of(std::string_view mountinfo)
{
    std::vector<Mount> out;
    std::istringstream in{std::string(mountinfo)};
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string field; fields >> field;)
            f.push_back(field);
        size_t dash = 6;
        while (dash < f.size() && f[dash] != "-")
            ++dash;
        if (f.size() < 5 || dash + 1 >= f.size())
            continue;
        out.push_back({unescaped(f[4]), f[dash + 1]});
    }
    return out;
}

}  // namespace

std::string masked_proc_path(std::string_view mountinfo)
{
    const std::vector<Mount> mounts = mounts_of(mountinfo);
    std::string bound;  // a procfs bound over a path of its own (read-only /proc/sys), if no mask
    for (const Mount& proc : mounts) {
        if (proc.fstype != "proc")
            continue;
        const std::string below = proc.point == "/" ? "/" : proc.point + "/";
        for (const Mount& m : mounts) {
            if (m.point.size() <= below.size() || m.point.compare(0, below.size(), below) != 0 ||
                m.point.compare(below.size(), std::string::npos, "sys/fs/binfmt_misc") == 0)
                continue;
            if (m.fstype != "proc")
                return m.point;
            if (bound.empty())
                bound = m.point;
        }
    }
    return bound;
}

std::string masked_proc_advice(const std::string& path)
{
    return "the kernel refuses a new /proc in a user namespace while this process's /proc has paths mounted "
           "over (" +
           path +
           "), as a container's runtime or an outer sandbox leaves it: run the container with /proc unmasked (Podman: "
           "--security-opt unmask=ALL; Docker: --security-opt systempaths=unconfined; Kubernetes: the pod's "
           "securityContext.procMount: Unmasked), or leave out --proc";
}

bool in_user_namespace()
{
    std::istringstream map(sys::read_small(AT_FDCWD, "/proc/self/uid_map", 4096));
    unsigned long long inside = 1, outside = 1, count = 0;
    map >> inside >> outside >> count;
    return !(inside == 0 && outside == 0 && count == 4294967295ULL);
}

UniqueFd new_proc(const std::string& dest)
{
    try {
        return new_mount("proc", {}, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, dest);
    } catch (const SysError& e) {
        if (e.code() != EPERM || !in_user_namespace())
            throw;
        const std::string path = masked_proc_path(sys::read_small(AT_FDCWD, "/proc/self/mountinfo", size_t{4} << 20));
        if (path.empty())
            throw;
        throw UsageError(std::string(e.what()) + ": " + masked_proc_advice(path));
    }
}

}  // namespace cocoon::mount
