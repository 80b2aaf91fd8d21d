// The differential suite's table: each row is one command line, run under Debian's bwrap and under
// cocoon-as-bwrap; the two normalised reports must be equal, or differ exactly as the row states
// (each such row is a row of docs/bwrap-differences.md's table of intended differences). Runs as
// whoever runs the tests: tools/test runs it as root and again as an unprivileged user.
#include "tests/diff/rows.h"

#include <iterator>
#include <vector>

#include "tests/support/process.h"

namespace cocoon::test::diff {
namespace {

// /proc for a row without a PID namespace: the host's, bound (as bwrap binds it for --proc there).
const std::vector<std::string> kHostProc = {"--ro-bind", "/proc", "/proc"};
// A PID namespace and its own procfs.
const std::vector<std::string> kOwnProc = {"--unshare-pid", "--proc", "/proc"};

std::vector<std::string> cat(std::initializer_list<std::vector<std::string>> parts)
{
    std::vector<std::string> out;
    for (const auto& part : parts)
        out.insert(out.end(), part.begin(), part.end());
    return out;
}

std::vector<std::string> probe(std::initializer_list<std::string> args)
{
    std::vector<std::string> out{"/probe"};
    out.insert(out.end(), args);
    return out;
}

// A new user namespace. Root drops its capabilities there: which ones root keeps in it is issue 9,
// item 5 (bwrap keeps only those root had, =eip and ambient), not compared until that lands.
std::vector<std::string> userns(std::initializer_list<std::string> more = {}, const char* unshare = "--unshare-user")
{
    std::vector<std::string> out{unshare};
    if (is_root())
        out.insert(out.end(), {"--cap-drop", "ALL"});
    out.insert(out.end(), more);
    return out;
}

// What drops root's capabilities (see userns()).
std::vector<std::string> root_no_caps()
{
    return is_root() ? std::vector<std::string>{"--cap-drop", "ALL"} : std::vector<std::string>{};
}

// What runs bwrap as a container's root: root without CAP_SYS_ADMIN, effective or in its bounding
// set; as the unprivileged user, root of a user namespace of its own first (a rootless container's).
std::vector<std::string> container_root()
{
    std::vector<std::string> out;
    if (!is_root())
        out = {"/usr/bin/unshare", "--user", "--map-root-user", "--"};
    out.insert(out.end(),
               {"/usr/bin/setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-sys_admin", "--"});
    return out;
}

// A seccomp program of one instruction: return SECCOMP_RET_ALLOW.
const std::string kAllowAll("\x06\0\0\0\0\0\xff\x7f", 8);

// The root, ids and namespaces.
std::vector<Row> id_and_namespace_rows()
{
    return {
        {.name = "host_proc", .options = kHostProc},
        {.name = "own_proc", .options = kOwnProc},
        {.name = "no_proc", .options = {}},
        {.name = "unshare_user", .options = cat({userns(), kHostProc})},
        {.name = "unshare_user_pid", .options = cat({userns(), kOwnProc})},
        {.name = "uid0", .options = cat({userns({"--uid", "0", "--gid", "0"}), kOwnProc})},
        {.name = "uid_gid", .options = cat({userns({"--uid", "1234", "--gid", "5678"}), kOwnProc})},
        {.name = "uid_host_proc", .options = cat({userns({"--uid", "1234"}), kHostProc})},
        {.name = "uid_without_userns",
         .options = cat({{"--uid", "1234"}, kOwnProc}),
         .who = Who::Root,
         .left_out = "found: bwrap says `Specifying --uid requires --unshare-user or --userns`, cocoon leaves out ` or "
                     "--userns`"},
        {.name = "unshare_user_try", .options = cat({userns({}, "--unshare-user-try"), kOwnProc})},
        {.name = "unshare_ipc", .options = cat({{"--unshare-ipc"}, kHostProc})},
        {.name = "unshare_ipc_pid", .options = cat({{"--unshare-ipc"}, kOwnProc})},
        {.name = "unshare_net", .options = cat({{"--unshare-net"}, kHostProc})},
        {.name = "unshare_net_pid", .options = cat({{"--unshare-net"}, kOwnProc})},
        {.name = "unshare_uts_hostname", .options = cat({{"--unshare-uts", "--hostname", "box"}, kOwnProc})},
        {.name = "unshare_uts", .options = cat({{"--unshare-uts"}, kHostProc})},
        {.name = "hostname_without_uts", .options = cat({{"--hostname", "box"}, kOwnProc})},
        {.name = "unshare_cgroup",
         .options = cat({{"--unshare-cgroup"}, kOwnProc}),
         .differs_root = {"-pid1-ns same", "+pid1-ns other"}},
        {.name = "unshare_cgroup_try", .options = cat({{"--unshare-cgroup-try"}, kHostProc})},
        {.name = "unshare_all", .options = userns({"--proc", "/proc"}, "--unshare-all")},
        {.name = "unshare_all_share_net", .options = userns({"--share-net", "--proc", "/proc"}, "--unshare-all")},
        {.name = "unshare_all_uid0",
         .options = userns({"--uid", "0", "--gid", "0", "--proc", "/proc"}, "--unshare-all")},
        {.name = "share_net_alone", .options = cat({{"--share-net"}, kHostProc})},
        {.name = "pid_user_net_ipc_uts",
         .options = cat({userns({"--unshare-net", "--unshare-ipc", "--unshare-uts"}), kOwnProc})},
        // A container's root, without CAP_SYS_ADMIN and asking for no user namespace: cocoon
        // makes the sandbox in one of its own, as for an unprivileged caller; bwrap cannot make
        // the namespaces (issue 36).
        {.name = "container_root",
         .options = cat({{"--unshare-net", "--unshare-ipc", "--unshare-uts", "--dev", "/dev"}, kOwnProc}),
         .runner = container_root(),
         .differs = {"+(probe ran)", "+exit 0", "-err bwrap: Creating new namespace failed: Operation not permitted",
                     "-exit 1"}},
    };
}

// Mounts the options make: /dev, tmpfs, mqueue, directories, symlinks, files.
std::vector<Row> made_mount_rows()
{
    return {
        {.name = "dev",
         .options = cat({kOwnProc, {"--dev", "/dev"}}),
         .command = probe({"/dev/null", "/dev/pts"}),
         .who = Who::Root},
        {.name = "dev_userns", .options = cat({userns(), kHostProc, {"--dev", "/dev"}}), .who = Who::Root},
        {.name = "dev_unprivileged",
         .options = cat({kOwnProc, {"--dev", "/dev"}}),
         .who = Who::User,
         .left_out = "found: for an unprivileged --dev, bwrap runs the command in a second user namespace (uid_map "
                     "`999 0 1`, /dev/pts owned by the caller); cocoon in one (`999 999 1`, /dev/pts owned by "
                     "nobody)"},
        {.name = "dev_bind", .options = cat({kHostProc, {"--dev-bind", "{T}/dir", "/d"}}), .command = probe({"/d"})},
        {.name = "tmpfs", .options = cat({kOwnProc, {"--tmpfs", "/tmp"}}), .command = probe({"/tmp"})},
        {.name = "tmpfs_perms_size",
         .options = cat({kOwnProc, {"--perms", "0700", "--size", "1048576", "--tmpfs", "/tmp"}}),
         .command = probe({"/tmp"})},
        {.name = "tmpfs_userns",
         .options = cat({userns(), kHostProc, {"--tmpfs", "/tmp"}}),
         .command = probe({"/tmp"})},
        {.name = "mqueue",
         .options = cat({{"--unshare-ipc"}, kOwnProc, {"--mqueue", "/dev/mqueue"}}),
         .differs = {"-mount /dev/mqueue root=/ mqueue src=mqueue rw,relatime super=rw",
                     "+mount /dev/mqueue root=/ mqueue src=mqueue rw,nosuid,nodev,noexec,relatime super=rw"}},
        {.name = "dir", .options = cat({kOwnProc, {"--dir", "/a/b/c"}}), .command = probe({"/a", "/a/b", "/a/b/c"})},
        {.name = "dir_perms", .options = cat({kOwnProc, {"--perms", "0700", "--dir", "/a"}}), .command = probe({"/a"})},
        {.name = "dir_existing", .options = cat({kOwnProc, {"--dir", "/usr"}}), .command = probe({"/usr"})},
        {.name = "symlink",
         .options = cat({kOwnProc, {"--symlink", "../usr/share", "/x/share"}}),
         .command = probe({"/x", "/x/share"}),
         .differs_root = {"-stat /x dir 0700 0:0 w=ok", "+stat /x dir 0755 0:0 w=ok"},
         .differs_user = {"-stat /x dir 0700 999:995 w=ok", "+stat /x dir 0755 999:995 w=ok"}},
        {.name = "symlink_same_twice",
         .options = cat({kOwnProc, {"--symlink", "usr/bin", "/bin"}}),
         .command = probe({"/bin"}),
         .differs = {"+(probe ran)", "+exit 0", "-err bwrap: Can't make symlink at /bin: File exists", "-exit 1"}},
        {.name = "file",
         .options = cat({kOwnProc, {"--file", "5", "/etc/f"}}),
         .command = probe({"/etc", "/etc/f"}),
         .fds = {{5, Fd::Data, "hello"}}},
        {.name = "file_perms",
         .options = cat({kOwnProc, {"--perms", "0600", "--file", "5", "/f"}}),
         .command = probe({"/f"}),
         .fds = {{5, Fd::Data, "hello"}}},
        {.name = "bind_data",
         .options = cat({kOwnProc, {"--bind-data", "5", "/f"}}),
         .command = probe({"/f"}),
         .fds = {{5, Fd::Data, "hello"}}},
        {.name = "ro_bind_data",
         .options = cat({kOwnProc, {"--ro-bind-data", "5", "/f"}}),
         .command = probe({"/f"}),
         .fds = {{5, Fd::Data, "hello"}}},
        {.name = "ro_bind_data_perms",
         .options = cat({userns(), kHostProc, {"--perms", "0444", "--ro-bind-data", "5", "/f"}}),
         .command = probe({"/f"}),
         .fds = {{5, Fd::Data, "hello"}}},
    };
}

// Mounts of the host's files and fds, remounts, and other roots.
std::vector<Row> bind_mount_rows()
{
    return {
        {.name = "bind_dir", .options = cat({kOwnProc, {"--bind", "{T}/dir", "/d"}}), .command = probe({"/d", "/d/a"})},
        {.name = "bind_file", .options = cat({kOwnProc, {"--bind", "{T}/file", "/f"}}), .command = probe({"/f"})},
        {.name = "ro_bind_file", .options = cat({kOwnProc, {"--ro-bind", "{T}/file", "/f"}}), .command = probe({"/f"})},
        {.name = "bind_through_link",
         .options = cat({kOwnProc, {"--bind", "{T}/link", "/l"}}),
         .command = probe({"/l", "/l/a"})},
        {.name = "bind_try_missing",
         .options = cat({kOwnProc, {"--bind-try", "{T}/missing", "/m"}}),
         .command = probe({"/m"})},
        {.name = "ro_bind_try_present",
         .options = cat({kOwnProc, {"--ro-bind-try", "{T}/dir", "/d"}}),
         .command = probe({"/d"})},
        {.name = "ro_bind_try_missing",
         .options = cat({kOwnProc, {"--ro-bind-try", "{T}/missing", "/m"}}),
         .command = probe({"/m"})},
        {.name = "dev_bind_try_missing",
         .options = cat({kOwnProc, {"--dev-bind-try", "{T}/missing", "/m"}}),
         .command = probe({"/m"})},
        {.name = "bind_missing", .options = cat({kOwnProc, {"--bind", "{T}/missing", "/m"}})},
        {.name = "bind_cwd", .options = cat({kOwnProc, {"--bind", "{T}", "{T}"}}), .command = probe({"{T}/file"})},
        {.name = "bind_nested",
         .options = cat({kOwnProc, {"--tmpfs", "/t", "--ro-bind", "{T}/dir", "/t/d", "--bind", "{T}/empty", "/t/d/e"}}),
         .command = probe({"/t", "/t/d", "/t/d/e"})},
        {.name = "remount_ro",
         .options = cat({kOwnProc, {"--bind", "{T}/dir", "/d", "--remount-ro", "/d"}}),
         .command = probe({"/d"})},
        {.name = "remount_ro_root",
         .options = cat({kOwnProc, {"--dir", "/x", "--remount-ro", "/"}}),
         .command = probe({"/", "/x"})},
        {.name = "bind_fd",
         .options = cat({kOwnProc, {"--bind-fd", "5", "/d"}}),
         .command = probe({"/d", "/d/a"}),
         .fds = {{5, Fd::Path, "{T}/dir"}}},
        {.name = "ro_bind_fd",
         .options = cat({kOwnProc, {"--ro-bind-fd", "5", "/d"}}),
         .command = probe({"/d"}),
         .fds = {{5, Fd::Path, "{T}/dir"}}},
        {.name = "chmod",
         .options = cat({kOwnProc, {"--dir", "/x", "--chmod", "0750", "/x"}}),
         .command = probe({"/x"})},
        {.name = "chmod_missing", .options = cat({kOwnProc, {"--chmod", "0750", "/missing"}})},
        // No --dev: for an unprivileged caller bwrap's --dev adds a second user namespace (row
        // dev_unprivileged); the host's /dev comes in with the root.
        {.name = "ro_bind_root",
         .options = {"--ro-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "--ro-bind", "{P}", "/tmp/probe"},
         .command = {"/tmp/probe", "/etc"},
         .base = false},
        {.name = "tmpfs_root_then_binds",
         .options = {"--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--ro-bind", "{P}", "/probe", "--unshare-pid",
                     "--proc", "/proc"},
         .command = probe({"/"}),
         .base = false},
        {.name = "dotdot_destination",
         .options = cat({kOwnProc, {"--dir", "/a", "--bind", "{T}/dir", "/a/../b"}}),
         .differs = {"+err bwrap: Invalid destination /a/../b: contains a '..' component", "+exit 1", "-(probe ran)",
                     "-exit 0"}},
    };
}

// The command's environment and process.
std::vector<Row> process_rows()
{
    return {
        {.name = "chdir", .options = cat({kOwnProc, {"--chdir", "/usr"}})},
        {.name = "chdir_missing", .options = cat({kOwnProc, {"--chdir", "/missing"}})},
        {.name = "clearenv", .options = cat({kOwnProc, {"--clearenv"}})},
        {.name = "setenv", .options = cat({kOwnProc, {"--setenv", "A", "1", "--setenv", "PATH", "/x"}})},
        {.name = "unsetenv", .options = cat({kOwnProc, {"--unsetenv", "PATH", "--unsetenv", "NOPE"}})},
        {.name = "clearenv_setenv",
         .options = cat({kOwnProc, {"--setenv", "A", "1", "--clearenv", "--setenv", "B", "2"}})},
        {.name = "new_session",
         .options = cat({kOwnProc, {"--new-session"}}),
         .left_out = "found: with a PID namespace bwrap's PID 1 leads the new session and the command is a member; "
                     "cocoon's command leads it (and so could take a controlling terminal)"},
        {.name = "new_session_host_pid", .options = cat({kHostProc, {"--new-session"}})},
        {.name = "die_with_parent",
         .options = cat({kOwnProc, {"--die-with-parent"}}),
         .differs = {"-pdeathsig 9", "+pdeathsig 0"}},
        {.name = "die_with_parent_host_pid", .options = cat({kHostProc, {"--die-with-parent"}})},
        {.name = "as_pid_1", .options = cat({kOwnProc, {"--as-pid-1"}})},
        {.name = "as_pid_1_without_pidns", .options = cat({kHostProc, {"--as-pid-1"}})},
        {.name = "exit_code", .options = kOwnProc, .command = {"/bin/sh", "-c", "exit 3"}},
        {.name = "exit_code_host_pid", .options = kHostProc, .command = {"/bin/sh", "-c", "exit 3"}},
        {.name = "killed", .options = kOwnProc, .command = {"/bin/sh", "-c", "kill -9 $$"}},
        {.name = "killed_host_pid", .options = kHostProc, .command = {"/bin/sh", "-c", "kill -9 $$"}},
        {.name = "command_missing", .options = kOwnProc, .command = {"/nonexistent"}},
        {.name = "no_command", .options = kOwnProc, .command = {}},
        {.name = "nothing_at_all", .options = {}, .command = {}, .base = false},
        {.name = "unknown_option", .options = {"--frobnicate"}},
        // An option without its arguments: bwrap's words for each count.
        {.name = "bind_without_dest", .options = {"--bind", "/usr"}, .command = {}},
        {.name = "ro_bind_fd_without_dest", .options = {"--ro-bind-fd", "3"}, .command = {}},
        {.name = "setenv_without_value", .options = {"--setenv", "A"}, .command = {}},
        {.name = "chdir_without_dir", .options = {"--chdir"}, .command = {}},
        {.name = "remount_ro_without_dir", .options = {"--remount-ro"}, .command = {}},
        {.name = "tmpfs_without_dir", .options = {"--tmpfs"}, .command = {}},
        {.name = "leftover_process",
         .options = cat({kOwnProc, {"--dev", "/dev", "--bind", "{T}", "/t"}}),
         .command = {"/bin/sh", "-c", "(sleep 0.3; echo > /t/late) & echo started"},
         .differs = {"-after {T}/late exists", "+after {T}/late missing"},
         .after = {"{T}/late"}},
    };
}

// fds and synchronisation.
std::vector<Row> fd_rows()
{
    return {
        {.name = "lock_file",
         .options = cat({kOwnProc, {"--bind", "{T}", "/t", "--lock-file", "/t/lock"}}),
         .command = probe({"lock:/t/lock"})},
        {.name = "sync_fd", .options = cat({kOwnProc, {"--sync-fd", "5"}}), .fds = {{5, Fd::Data, ""}}},
        // fds no option names, left open across the exec of bwrap: the command gets them.
        {.name = "inherited_fds", .options = kOwnProc, .fds = {{4, Fd::Data, "x"}, {6, Fd::Path, "{T}/dir"}}},
        {.name = "inherited_fds_as_pid_1",
         .options = cat({kOwnProc, {"--as-pid-1", "--sync-fd", "5"}}),
         .fds = {{4, Fd::Data, "x"}, {5, Fd::Data, ""}, {6, Fd::Path, "{T}/dir"}}},
        {.name = "inherited_fds_no_pid_ns", .options = kHostProc, .fds = {{4, Fd::Data, "x"}}},
        {.name = "block_fd", .options = cat({kOwnProc, {"--block-fd", "5"}}), .fds = {{5, Fd::Data, "x"}}},
        {.name = "info_fd", .options = cat({kOwnProc, {"--info-fd", "5"}}), .fds = {{5, Fd::Output}}},
        {.name = "info_fd_all",
         .options = userns({"--proc", "/proc", "--info-fd", "5"}, "--unshare-all"),
         .fds = {{5, Fd::Output}}},
        {.name = "json_status_fd",
         .options = cat({kOwnProc, {"--json-status-fd", "5"}}),
         .fds = {{5, Fd::Output}},
         .differs = {"-fd5 { \"exit-code\": 0 }",
                     "+fd5 { \"exit-code\": 0, \"wall-time-us\": N, \"cpu-user-us\": N, \"cpu-system-us\": N, "
                     "\"memory-peak-bytes\": N, \"pids-peak\": N, \"tmpfs-peak-bytes\": N, \"accounting\": \"A\" }"}},
        {.name = "json_status_fd_killed",
         .options = cat({kOwnProc, {"--json-status-fd", "5"}}),
         .command = {"/bin/sh", "-c", "kill -9 $$"},
         .fds = {{5, Fd::Output}},
         .differs = {"-fd5 { \"exit-code\": 137 }",
                     "+fd5 { \"exit-code\": 137, \"exit-signal\": 9, \"wall-time-us\": N, \"cpu-user-us\": N, "
                     "\"cpu-system-us\": N, \"memory-peak-bytes\": N, \"pids-peak\": N, \"tmpfs-peak-bytes\": N, "
                     "\"accounting\": "
                     "\"A\" }"}},
        {.name = "userns_block_fd",
         .options = cat({userns({"--info-fd", "5", "--userns-block-fd", "6"}), kOwnProc}),
         .fds = {{5, Fd::Output}, {6, Fd::Data, "x"}},
         .left_out = "needs a caller that writes the id maps between reading --info-fd and writing the block fd, which "
                     "this harness is not (without maps both fail with EOVERFLOW, in other words)"},
        {.name = "userns_block_fd_uid",
         .options = cat({userns({"--uid", "0", "--info-fd", "5", "--userns-block-fd", "6"}), kOwnProc}),
         .fds = {{5, Fd::Output}, {6, Fd::Data, "x"}},
         .differs =
             {"+err bwrap: --userns-block-fd cannot be combined with --uid or --gid (the caller writes the id maps)",
              "-err bwrap: Creating newroot failed: Value too large for defined data type",
              "-fd5     \"child-pid\": N,", "-fd5     \"mnt-namespace\": N,", "-fd5     \"pid-namespace\": N", "-fd5 {",
              "-fd5 }"}},
    };
}

// Namespaces, seccomp programs and arguments handed over as fds; labels.
std::vector<Row> namespace_fd_rows()
{
    return {
        {.name = "userns",
         .options = cat({root_no_caps(), {"--userns", "5"}, kHostProc}),
         .fds = {{5, Fd::Userns}},
         .differs = {"-fd 5 user"}},
        {.name = "userns_pid",
         .options = cat({root_no_caps(), {"--userns", "5"}, kOwnProc}),
         .fds = {{5, Fd::Userns}},
         .differs = {"-fd 5 user"}},
        {.name = "userns_not_a_namespace",
         .options = cat({{"--userns", "5"}, kOwnProc}),
         .fds = {{5, Fd::Data, "x"}},
         .differs = {"+err bwrap: Invalid --userns 5: not a user namespace",
                     "-err bwrap: Joining the specified user namespace failed, it might not be a descendant of the "
                     "current user namespace."}},
        {.name = "userns2_not_a_namespace",
         .options = {"--userns2", "5"},
         .fds = {{5, Fd::Path, "/"}},
         .left_out = "bwrap 0.8.0 leaves a process behind after this failure (docs/bwrap-differences.md)"},
        {.name = "userns2",
         .options = {"--userns", "5", "--userns2", "6", "--unshare-pid", "--proc", "/proc"},
         .fds = {{5, Fd::UsernsParent}, {6, Fd::Userns}},
         .who = Who::User,
         .differs = {"-fd 5 user", "-fd 6 user", "-status CapBnd: 000001ffffffffff",
                     "+status CapBnd: 0000000000000000"}},
        {.name = "userns2_root",
         .options = {"--userns", "5", "--userns2", "6", "--unshare-pid", "--proc", "/proc"},
         .fds = {{5, Fd::UsernsParent}, {6, Fd::Userns}},
         .who = Who::Root,
         .left_out = "issue 9, item 5: root's capabilities (with --cap-drop ALL bwrap keeps the bounding set in the "
                     "second namespace, cocoon empties it)"},
        {.name = "pidns",
         .options = cat({root_no_caps(), {"--userns", "5", "--pidns", "6", "--proc", "/proc"}}),
         .fds = {{5, Fd::Userns}, {6, Fd::Pidns}},
         .differs = {"-fd 5 user", "-fd 6 pid"}},
        {.name = "disable_userns", .options = cat({userns({"--disable-userns"}), kOwnProc})},
        {.name = "disable_userns_assert",
         .options = cat({userns({"--disable-userns", "--assert-userns-disabled"}), kOwnProc})},
        {.name = "disable_userns_without_userns", .options = cat({{"--disable-userns"}, kOwnProc})},
        {.name = "assert_userns_disabled", .options = cat({{"--assert-userns-disabled"}, kOwnProc})},
        {.name = "seccomp", .options = cat({kOwnProc, {"--seccomp", "5"}}), .fds = {{5, Fd::Data, kAllowAll}}},
        {.name = "add_seccomp_fd",
         .options = cat({kHostProc, {"--add-seccomp-fd", "5", "--add-seccomp-fd", "6"}}),
         .fds = {{5, Fd::Data, kAllowAll}, {6, Fd::Data, kAllowAll}}},
        {.name = "seccomp_ragged", .options = cat({kOwnProc, {"--seccomp", "5"}}), .fds = {{5, Fd::Data, "x"}}},
        {.name = "add_seccomp_fd_ragged",
         .options = cat({kHostProc, {"--add-seccomp-fd", "5", "--add-seccomp-fd", "6"}}),
         .fds = {{5, Fd::Data, kAllowAll}, {6, Fd::Data, std::string(9, 'x')}}},
        {.name = "seccomp_empty",
         .options = cat({kOwnProc, {"--seccomp", "5"}}),
         .fds = {{5, Fd::Data, ""}},
         .differs =
             {"+err bwrap: Invalid seccomp data from --seccomp 5: 0 bytes; a compiled cBPF program has 1 to 4096 "
              "instructions",
              "-err bwrap: Unable to set up system call filtering as requested: prctl(PR_SET_SECCOMP) reported EINVAL. "
              "(Hint: this requires a kernel configured with CONFIG_SECCOMP and CONFIG_SECCOMP_FILTER.)"}},
        {.name = "args",
         .options = cat({kOwnProc, {"--args", "5"}}),
         .fds = {{5, Fd::Data, std::string("--setenv\0A\0from-args\0--chdir\0/usr\0", 33)}}},
        {.name = "args_with_separator",
         .options = cat({kOwnProc, {"--args", "5"}}),
         .fds = {{5, Fd::Data, std::string("--setenv\0A\0B\0--\0/probe\0", 23)}},
         .differs = {"+err bwrap: --args 5: only options may come from an arguments file, not '--'", "+exit 1",
                     "-(probe ran)", "-exit 0"}},
        {
            .name = "exec_label",
            .options = cat({kOwnProc, {"--exec-label", "system_u:system_r:x_t:s0"}}),
        },
        {
            .name = "file_label",
            .options = cat({kOwnProc, {"--file-label", "system_u:object_r:x_t:s0"}}),
        },
    };
}

// Capabilities (bwrap honours them only for root, or inside a user namespace).
std::vector<Row> capability_rows()
{
    return {
        {.name = "cap_drop_all",
         .options = cat({kOwnProc, {"--cap-drop", "ALL"}}),
         .who = Who::Root,
         .left_out = "issue 9, item 5: bwrap keeps root's bounding set, cocoon empties it"},
        {.name = "cap_drop_one",
         .options = cat({kHostProc, {"--cap-drop", "CAP_NET_RAW"}}),
         .who = Who::Root,
         .left_out = "issue 9, item 5: bwrap keeps root's bounding set, cocoon drops the capability from it"},
        {.name = "cap_add_uid0",
         .options = cat({{"--unshare-user", "--uid", "0", "--cap-add", "CAP_NET_ADMIN"}, kOwnProc}),
         .left_out = "issue 9, item 5: the capability sets of a uid-0 command with --cap-add"},
        {.name = "root_in_userns",
         .options = cat({{"--unshare-user"}, kOwnProc}),
         .who = Who::Root,
         .left_out = "issue 9, item 5: root's command in a new user namespace; bwrap keeps the bounding set root had, "
                     "cocoon has the full set"},
        {.name = "help", .options = {"--help"}, .left_out = "issue 9, item 2: --help's text"},
        {.name = "symlink_conflict",
         .options = cat({kOwnProc, {"--symlink", "usr/lib", "/bin"}}),
         .left_out = "issue 9, item 3: --symlink conflict messages"},
        {.name = "chdir_twice",
         .options = cat({kOwnProc, {"--chdir", "/", "--chdir", "/usr"}}),
         .left_out = "issue 9, item 4: warnings for repeated single-value options"},
        {.name = "file_fd_not_a_number",
         .options = cat({kOwnProc, {"--file", "abc", "/f"}}),
         .left_out = "issue 9, item 7: `Invalid fd: abc`"},
        {.name = "proc_without_pidns",
         .options = cat({userns(), {"--proc", "/proc"}}),
         .left_out = "issue 9, item 1: --proc without a PID namespace binds the host's /proc"},
        {.name = "cap_drop_unprivileged", .options = cat({kOwnProc, {"--cap-drop", "CAP_NET_RAW"}}), .who = Who::User},
        {.name = "cap_unprivileged", .options = cat({kOwnProc, {"--cap-add", "CAP_NET_ADMIN"}}), .who = Who::User},
    };
}

// Options Debian's bwrap 0.8.0 does not have yet.
std::vector<Row> newer_option_rows()
{
    return {
        {.name = "version", .options = {"--version"}, .differs = {"+cocoon 0.1.0", "-bubblewrap 0.8.0"}},
        {.name = "argv0",
         .options = cat({kOwnProc, {"--argv0", "name"}}),
         .differs = {"+(probe ran)", "+exit 0", "-err bwrap: Unknown option --argv0", "-exit 1"}},
        {.name = "level_prefix",
         .options = {"--level-prefix", "--bind", "{T}/missing", "/m"},
         .differs = {"+err <3>bwrap: Can't find source path {T}/missing: No such file or directory",
                     "-err bwrap: Unknown option --level-prefix"}},
        {.name = "overlay_src",
         .options = cat({kOwnProc, {"--overlay-src", "{T}/dir", "--tmp-overlay", "/o"}}),
         .differs = {"+(probe ran)", "+exit 0", "-err bwrap: Unknown option --overlay-src", "-exit 1"}},
        {.name = "ro_overlay",
         .options = cat({kOwnProc, {"--overlay-src", "{T}/dir", "--overlay-src", "{T}/empty", "--ro-overlay", "/o"}}),
         .differs = {"+(probe ran)", "+exit 0", "-err bwrap: Unknown option --overlay-src", "-exit 1"}},
        {.name = "overlay",
         .options = cat({kOwnProc, {"--overlay-src", "{T}/dir", "--overlay", "{T}/empty", "{T}/work", "/o"}}),
         .differs = {"+(probe ran)", "+exit 0", "-err bwrap: Unknown option --overlay-src", "-exit 1"}},
    };
}

}  // namespace

const std::vector<Row>& rows()
{
    // In this order: the tests' names and numbers come from it.
    static const std::vector<Row> table = [] {
        std::vector<Row> all;
        for (auto part : {id_and_namespace_rows, made_mount_rows, bind_mount_rows, process_rows, fd_rows,
                          namespace_fd_rows, capability_rows, newer_option_rows}) {
            std::vector<Row> some = part();
            all.insert(all.end(), std::make_move_iterator(some.begin()), std::make_move_iterator(some.end()));
        }
        return all;
    }();
    return table;
}

}  // namespace cocoon::test::diff
