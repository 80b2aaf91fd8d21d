// Inside a container (issue 36), its conditions made without a container runtime:
// - a container's root: root without CAP_SYS_ADMIN, neither effective nor in its bounding set
//   (setpriv; Docker's default set too), which gets a user namespace of its own, as an
//   unprivileged caller does; as the unprivileged user, root of a user namespace of its own first
//   (a rootless container's root);
// - a masked /proc: /dev/null bound over a file of /proc in a mount namespace of the test's own
//   (as Docker masks /proc/kcore), where --proc fails with one line that says how to unmask it,
//   --check says the same, and a command line without --proc runs.
// The differential suite's row `container_root` compares the first with Debian's bwrap.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/e2e/e2e.h"
#include "tests/e2e/no_openat2.h"

namespace cocoon::test {
namespace {

// Docker's default capabilities for a container's root, as setpriv's --bounding-set list.
constexpr const char* kDockerSet = "-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,"
                                   "+net_bind_service,+net_raw,+sys_chroot,+mknod,+audit_write,+setfcap";

// What runs cocoon as a container's root: root whose bounding set is `bounding` (setpriv's list),
// so its effective set lacks CAP_SYS_ADMIN too. As root, setpriv alone; as an unprivileged user,
// first root of a user namespace of its own, as in a rootless container.
std::vector<std::string> container_root(const std::string& bounding = "-sys_admin")
{
    std::vector<std::string> out;
    if (!is_root())
        out = {"/usr/bin/unshare", "--user", "--map-root-user", "--"};
    out.insert(out.end(), {"/usr/bin/setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=" + bounding,
                           "--", cocoon_bin()});
    return out;
}

// The command's uid, effective capabilities and user namespace map, one line each.
const std::vector<std::string> kShowIds =
    sh("id -u; sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status; tr -s ' ' < /proc/self/uid_map");

const std::vector<std::string> kLayout = {"--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev"};

TEST(ContainerRoot, RunsASandboxAsAnUnprivilegedCallerDoes)
{
    for (const char* bounding : {"-sys_admin", kDockerSet}) {
        Result r = run(args({container_root(bounding), kLayout, kShowIds}));
        ASSERT_EQ(r.code, 0) << bounding << ": " << r.err;
        // uid 0 inside, no capability, and a user namespace of its own that maps that one id.
        EXPECT_EQ(lines(r.out), (std::vector<std::string>{"0", "0000000000000000", " 0 0 1"})) << bounding;
        EXPECT_EQ(r.err, "");
    }
    // With --unshare-user asked for, the same; --cap-add gives what it names.
    Result asked = run(args({container_root(kDockerSet), {"--unshare-user"}, kLayout, kShowIds}));
    EXPECT_EQ(lines(asked.out), (std::vector<std::string>{"0", "0000000000000000", " 0 0 1"})) << asked.err;
    Result added = run(args({container_root(kDockerSet), {"--cap-add", "CAP_NET_ADMIN"}, kLayout, kShowIds}));
    EXPECT_EQ(lines(added.out), (std::vector<std::string>{"0", "0000000000001000", " 0 0 1"})) << added.err;
}

// Without --unshare-all's --unshare-user-try too: the namespaces alone, which bwrap cannot make
// there (the differential row `container_root`).
TEST(ContainerRoot, GetsAUserNamespaceWithoutAsking)
{
    Result r = run(args({container_root(kDockerSet),
                         {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--ro-bind", "/", "/",
                          "--dev", "/dev", "--proc", "/proc"},
                         kShowIds}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(lines(r.out), (std::vector<std::string>{"0", "0000000000000000", " 0 0 1"})) << r.err;
}

TEST(ContainerRoot, CheckSaysWhichModeAndThatItRuns)
{
    Result r = run(args({container_root(kDockerSet), {"--check"}}));
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    for (const char* line :
         {"mode root without CAP_SYS_ADMIN (a container's root): every sandbox gets a user namespace of its own, as "
          "an unprivileged caller's does, and its command no capability unless --cap-add (its uid 0 is this "
          "root's)\n",
          "yes  user namespaces\n", "yes  mount, PID, network, IPC, UTS and cgroup namespaces\n",
          "yes  new mount API\n", "yes  a new /proc (--proc with a PID namespace)\n",
          "\na default sandbox can run here\n"})
        EXPECT_TRUE(contains(r.out, line)) << line << " in:\n" << r.out;
    EXPECT_TRUE(contains(r.out, "no   an unprivileged caller: as root, pass --host-user USER (an unprivileged user "
                                "made for the agent): without --host-user the sandbox's uid 0 is the host's"))
        << r.out;
}

// Linux lets a process map uid 0 into a user namespace it makes only if it held CAP_SETFCAP
// then: without it, one line says so before anything is made, and --check says it too.
TEST(ContainerRoot, WithoutSetfcapIsToldWhy)
{
    const std::string bounding = "-sys_admin,-setfcap";
    Result r = run(args({container_root(bounding), kLayout, {"true"}}));
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "cocoon: a root caller without CAP_SYS_ADMIN gets a user namespace of its own, and mapping uid 0 "
                     "into it needs CAP_SETFCAP, which this process lacks too: give it CAP_SETFCAP (a container's "
                     "root has it unless its runtime drops it), or run cocoon as another user\n");
    Result check = run(args({container_root(bounding), {"--check"}}));
    EXPECT_EQ(check.code, 1) << check.out;
    EXPECT_TRUE(contains(check.out, "no   user namespaces: mapping uid 0 into one needs CAP_SETFCAP")) << check.out;
    EXPECT_TRUE(contains(check.out, "\na default sandbox cannot run here; to run one, change: user namespaces: "
                                    "mapping uid 0 into one needs CAP_SETFCAP"))
        << check.out;
}

// --host-user works for a container's root that holds CAP_SETUID and CAP_SETGID (Docker's set
// does), and is refused, saying so, without them.
TEST(ContainerRoot, HostUserWorksWithSetuidAndSetgid)
{
    if (!is_root())
        GTEST_SKIP() << "needs a root caller: --host-user is refused to any other, and a rootless container's "
                        "root maps only its own ids";
    std::optional<TestUser> user = test_user();
    ASSERT_TRUE(user) << kNoTestUser;
    Result r = run(args({container_root(kDockerSet), {"--host-user", kTestUser}, kLayout, kShowIds}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(lines(r.out),
              (std::vector<std::string>{"0", "0000000000000000", " 0 " + std::to_string(user->uid) + " 1"}))
        << r.err;
    Result refused = run(args({container_root("-sys_admin,-setuid"), {"--host-user", kTestUser}, kLayout, {"true"}}));
    EXPECT_EQ(refused.code, 1);
    EXPECT_EQ(refused.err, std::string("cocoon: --host-user ") + kTestUser +
                               " needs CAP_SETUID and CAP_SETGID to map that user's ids, and this root caller lacks "
                               "them (a container's root has both unless its runtime drops them)\n");
}

// cocoon as a container's PID 1 (`podman run ... cocoon --agent ...`): its parent, the runtime's, is
// outside its PID namespace (getppid() is 0). --die-with-parent holds there too (the kernel's
// parent-death signal, as no pidfd of that parent can be had): the run works, and its sandbox
// ends when that parent is killed.
TEST(ContainerPid1, DieWithParentEndsTheSandboxWithTheRuntime)
{
    std::vector<std::string> pid1{"/usr/bin/unshare", "--pid", "--fork", "--"};
    if (!is_root())
        pid1.insert(pid1.begin() + 1, {"--user", "--map-root-user"});
    Result r = run(args({pid1, {cocoon_bin(), "--die-with-parent"}, kLayout, sh("echo ran")}));
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "ran\n");

    const std::string marker = unique_marker("container-pid1");
    TempDir dir;
    const pid_t parent = start_logged(
        args({pid1, {cocoon_bin(), "--die-with-parent"}, kLayout, sh("echo started; sleep 1000; : " + marker)}),
        dir / "log");
    for (int i = 0; i < 500 && !contains(read_file(dir / "log"), "started"); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(contains(read_file(dir / "log"), "started")) << read_file(dir / "log");
    ASSERT_FALSE(processes_with(marker).empty());
    ::kill(parent, SIGKILL);  // unshare: cocoon's parent, outside its PID namespace
    wait_exit(parent);
    for (int i = 0; i < 500 && !processes_with(marker).empty(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(processes_with(marker), std::vector<pid_t>{}) << "the sandbox outlived its parent";
}

// A container's default seccomp profile (Podman's, Docker's) refuses sethostname (EPERM) without
// CAP_SYS_ADMIN, though the sandbox's UTS namespace is its own: --hostname says so, in one line,
// and --check names the filter, not the kernel.
TEST(ContainerSeccomp, AHostnameTheFilterRefusesIsSaidSo)
{
    const std::vector<std::string> line = args({kLayout, {"--hostname", "sandbox"}, sh("hostname")});
    Result control = cocoon(line);
    EXPECT_EQ(control.out, "sandbox\n") << control.err;
    Result r = under_refusal(SCMP_SYS(sethostname), EPERM, [&] { return cocoon(line); });
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "cocoon: Can't set hostname to sandbox: Operation not permitted: refused by the seccomp filter "
                     "cocoon runs under, in the sandbox's own UTS namespace (a container's default profile refuses "
                     "sethostname without CAP_SYS_ADMIN: run the container with a profile that allows it, "
                     "--security-opt seccomp=PROFILE), or leave out --hostname\n");
    Result check = under_refusal(SCMP_SYS(sethostname), EPERM, [] { return cocoon({"--check"}); });
    EXPECT_EQ(check.code, 1) << check.out;
    EXPECT_TRUE(std::regex_search(check.out,
                                  std::regex("\nno   a host name in a new UTS namespace \\(--hostname\\): sethostname "
                                             "refused \\(EPERM\\) on Linux [0-9]+\\.[0-9]+, which has it: by this "
                                             "process's seccomp filter or a missing capability")))
        << check.out;
    EXPECT_TRUE(contains(check.out, "; to run one, change: a host name in a new UTS namespace (--hostname): let this "
                                    "process's seccomp filter allow sethostname"))
        << check.out;
}

// --check on a kernel that has the new mount API and clone3, where a filter refuses them (EPERM, as
// Docker's profile does without CAP_SYS_ADMIN; ENOSYS, as for calls a profile does not know, and
// Docker's for clone3): never "needs Linux X", but what refused it.
TEST(ContainerSeccomp, CheckNamesTheFilterNotTheKernel)
{
    Result eperm = under_refusal(SCMP_SYS(fsopen), EPERM, [] { return cocoon({"--check"}); });
    EXPECT_EQ(eperm.code, 1);
    EXPECT_FALSE(contains(eperm.out, "needs Linux")) << eperm.out;
    EXPECT_TRUE(std::regex_search(eperm.out, std::regex("\nno   new mount API: fsopen refused \\(EPERM\\) on Linux "
                                                        "[0-9.]+, which has it: by this process's seccomp filter")))
        << eperm.out;
    Result enosys = under_refusal(SCMP_SYS(mount_setattr), ENOSYS, [] { return cocoon({"--check"}); });
    EXPECT_EQ(enosys.code, 1);
    EXPECT_FALSE(contains(enosys.out, "needs Linux")) << enosys.out;
    EXPECT_TRUE(std::regex_search(enosys.out,
                                  std::regex("\nno   new mount API: mount_setattr answered ENOSYS on Linux [0-9.]+, "
                                             "which has it: this process's seccomp filter refuses it")))
        << enosys.out;
    // Docker's profile answers clone3 ENOSYS without CAP_SYS_ADMIN.
    Result clone3 = under_refusal(SCMP_SYS(clone3), ENOSYS, [] { return cocoon({"--check"}); });
    EXPECT_EQ(clone3.code, 1);
    EXPECT_TRUE(std::regex_search(
        clone3.out, std::regex("\nno   clone3 \\(the sandbox's first process\\): clone3 answered ENOSYS on "
                               "Linux [0-9.]+, which has it: this process's seccomp filter refuses it")))
        << clone3.out;
}

// The first of the files Docker masks in /proc that this kernel has.
std::string maskable()
{
    for (const char* path : {"/proc/kcore", "/proc/keys", "/proc/timer_list"})
        if (::access(path, F_OK) == 0)
            return path;
    return "";
}

// Runs `inner` in a mount namespace of its own where /dev/null is bound over `masked` (none if
// empty), as a container's runtime masks it: as root, a private mount namespace; as an
// unprivileged user, one in a user namespace of its own, where it is root. The host's mounts are
// never touched.
Result in_masked_namespace(const std::string& masked, const std::vector<std::string>& inner)
{
    std::vector<std::string> argv{"/usr/bin/unshare", "--mount", "--propagation", "private", "--"};
    if (!is_root())
        argv.insert(argv.begin() + 1, {"--user", "--map-root-user"});
    argv.insert(argv.end(),
                {"/bin/sh", "-c", "[ -z \"$0\" ] || mount --bind /dev/null \"$0\" || exit 99; exec \"$@\"", masked});
    argv.insert(argv.end(), inner.begin(), inner.end());
    return run(argv);
}

// Who runs cocoon there: root (or the user namespace's root) without CAP_SYS_ADMIN; as it is,
// with --unshare-all asking for a user namespace; and, in the root pass, the unprivileged user.
std::vector<std::vector<std::string>> runners()
{
    std::vector<std::vector<std::string>> out{
        {"/usr/bin/setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-sys_admin", "--", cocoon_bin()},
        {cocoon_bin()}};
    if (is_root())
        out.push_back(
            {"/usr/bin/setpriv", "--reuid", kTestUser, "--regid", kTestUser, "--clear-groups", "--", cocoon_bin()});
    return out;
}

std::string masked_advice(const std::string& path)
{
    return "the kernel refuses a new /proc in a user namespace while this process's /proc has paths mounted over (" +
           path +
           "), as a container's runtime or an outer sandbox leaves it: run the container with /proc unmasked (Podman: "
           "--security-opt "
           "unmask=ALL; Docker: --security-opt systempaths=unconfined; Kubernetes: the pod's "
           "securityContext.procMount: Unmasked), or leave out --proc";
}

class MaskedProc : public ::testing::Test {
protected:
    void SetUp() override
    {
        m_path = maskable();
        ASSERT_NE(m_path, "") << "this kernel has none of /proc/kcore, /proc/keys, /proc/timer_list";
        if (is_root()) {
            ASSERT_TRUE(test_user()) << kNoTestUser;
        }
    }
    std::string m_path;
};

TEST_F(MaskedProc, ProcFailsWithOneLineThatSaysHowToUnmask)
{
    const std::vector<std::string> before = mount_table();
    for (const std::vector<std::string>& runner : runners()) {
        const std::string marker = unique_marker("masked-proc");
        const std::vector<std::string> line = args({runner, kLayout, {"--proc", "/proc"}, sh("true " + marker)});
        Result control = in_masked_namespace("", line);
        EXPECT_EQ(control.code, 0) << runner.front() << ": without the mask: " << control.err;
        Result r = in_masked_namespace(m_path, line);
        EXPECT_EQ(r.code, 1) << runner.front();
        EXPECT_EQ(r.err, "cocoon: Can't mount proc on /proc: Operation not permitted: " + masked_advice(m_path) + "\n")
            << runner.front();
        EXPECT_EQ(processes_with(marker), std::vector<pid_t>{}) << "a process outlived cocoon";
    }
    EXPECT_EQ(mount_table(), before) << "a mount was left on the host";
}

TEST_F(MaskedProc, CheckSaysIt)
{
    for (const std::vector<std::string>& runner : runners()) {
        if (runner.size() == 1)
            continue;  // root with CAP_SYS_ADMIN makes no user namespace: its /proc mounts
        Result r = in_masked_namespace(m_path, args({runner, {"--check"}}));
        EXPECT_EQ(r.code, 1) << runner.front() << r.out << r.err;
        EXPECT_TRUE(contains(
            r.out, "no   a new /proc (--proc with a PID namespace): refused (EPERM): " + masked_advice(m_path) + "\n"))
            << r.out;
        EXPECT_TRUE(contains(r.out, "\na default sandbox cannot run here; to run one, change: a new /proc (--proc with "
                                    "a PID namespace): run the container with /proc unmasked (Podman: --security-opt "
                                    "unmask=ALL; Docker: --security-opt systempaths=unconfined; Kubernetes: the pod's "
                                    "securityContext.procMount: Unmasked), or leave out --proc\n"))
            << r.out;
        Result unmasked = in_masked_namespace("", args({runner, {"--check"}}));
        EXPECT_TRUE(contains(unmasked.out, "yes  a new /proc (--proc with a PID namespace)\n")) << unmasked.out;
    }
}

// What cocoon can do without a new /proc still works there: no --proc, or --proc without a PID
// namespace (this /proc bound, masks and all).
TEST_F(MaskedProc, WithoutANewProcTheSandboxRuns)
{
    for (const std::vector<std::string>& runner : runners()) {
        Result r = in_masked_namespace(m_path, args({runner, kLayout, sh("test -d /proc/self && echo ran")}));
        EXPECT_EQ(r.code, 0) << runner.front() << ": " << r.err;
        EXPECT_EQ(r.out, "ran\n");
        Result bound = in_masked_namespace(m_path, args({runner,
                                                         {"--unshare-user", "--unshare-net", "--unshare-ipc",
                                                          "--unshare-uts", "--ro-bind", "/", "/", "--proc", "/proc"},
                                                         sh("test -r /proc/self/status && echo ran")}));
        EXPECT_EQ(bound.code, 0) << runner.front() << ": " << bound.err;
        EXPECT_EQ(bound.out, "ran\n");
    }
}

}  // namespace
}  // namespace cocoon::test
