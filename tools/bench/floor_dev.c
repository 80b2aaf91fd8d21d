/* The start-up floor of the sandbox bwrap builds in scenarios (a) and (b) of tools/bench/startup:
 * one clone into new user/pid/mount/net/ipc/uts/cgroup namespaces, id maps, lo up, a tmpfs root
 * with the scenario's binds, a new proc with the parts Debian's bwrap 0.8.0 leaves read-only here
 * (irq, bus), --dev's /dev made as bwrap makes it (a tmpfs, six device nodes bound onto files made
 * for them, five links, /dev/shm a directory, a new devpts and /dev/ptmx linking into it),
 * pivot_root, and the command started as PID 2 by vfork (no page tables copied). Each step by the
 * cheapest calls there are, and nothing else: no checks, no capability drop, no option parsing,
 * no seccomp, no report (bwrap and cocoon do all of them). A lower bound, then: what any program
 * that builds bwrap's sandbox pays on this machine.
 * usage: floor_dev a|b|cocoon-a|cocoon-b CMD [ARGS...]   (as root or unprivileged; a: --ro-bind / /,
 * b: scenario b's --ro-bind /usr /usr, three links and a --tmpfs /tmp)
 *
 * cocoon-a, cocoon-b: the same sandbox with what cocoon gives every sandbox beside it, which
 * issue 35 forbids trading for speed: the default seccomp policy (the very program cocoon loads,
 * given at build time as COCOON_POLICY, a C copy of the build's ns/seccomp_default.inc), no
 * capability left to the command (bounding set, capset, ambient), /proc's keys, key-users, sys and
 * sysrq-trigger covered too, /dev/shm a tmpfs of its own (64 MiB), the root's and /dev's tmpfs
 * bounded to what they hold (1 MiB and 256 inodes more), and, where the caller may write its
 * cgroup v2 (root here), the sandbox's own cgroup with the command in a leaf below it as the root
 * of its cgroup namespace, removed at the end (FLOOR_CGROUP2 names the cgroup2 mount); else the
 * look for one. Still the cheapest calls and no checks: a lower bound for cocoon's own sandbox.
 * As cocoon does (ns/launch.cc), the network namespace is made beside set-up, not by the clone:
 * a vfork child of the caller joins the sandbox's user namespace, makes it, brings lo up and
 * hands its fd over a socketpair; the first process joins it before it starts the command, having
 * made the IPC namespace and loaded the policy meanwhile (which the command inherits).
 * A yardstick for tools/bench/startup, not part of cocoon: built there with gcc -O2 -static. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef COCOON_POLICY
#include COCOON_POLICY
#endif

static char stack[1 << 16];
static char** command;
static int scenario_b;
static int kept; /* cocoon-a, cocoon-b: cocoon's own properties too */
static uid_t uid;
static gid_t gid;
static int cgroup_dir = -1, cgroup_leaf = -1; /* the sandbox's own cgroup and its command leaf */
static char cgroup_path[600];

/* Any failure ends the child with a status naming the step: a yardstick that quietly did less
 * would read faster than it is. */
static void must(int ok, int step)
{
    if (!ok)
        _exit(step);
}

static void write_file(const char* path, const char* text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    must(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), 80);
    close(fd);
}

/* A bind's flags (a bind through mount(2) takes none), on the mount at path and every one below. */
static void set_attr(const char* path, unsigned long long attr)
{
    struct mount_attr set = {.attr_set = attr};
    must(syscall(SYS_mount_setattr, -1, path, AT_RECURSIVE, &set, sizeof set) == 0, 78);
}

static void bind_node(const char* name)
{
    char host[64], inside[64];
    snprintf(host, sizeof host, "/dev/%s", name);
    snprintf(inside, sizeof inside, "/tmp/r/dev/%s", name);
    int fd = open(inside, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    must(fd >= 0, 81);
    close(fd);
    must(mount(host, inside, NULL, MS_BIND, NULL) == 0, 82);
    set_attr(inside, MOUNT_ATTR_NOSUID);
}

/* /proc/NAME bound over itself read-only, as bwrap covers it. */
static void cover_proc(const char* name)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/r/proc/%s", name);
    int bound = mount(path, path, NULL, MS_BIND, NULL);
    if (bound < 0 && errno == ENOENT)
        return; /* not in this kernel (sysrq-trigger without CONFIG_MAGIC_SYSRQ), as cocoon skips it */
    must(bound == 0, 79);
    set_attr(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

/* /proc/NAME covered by the host's /dev/null, read-only (cocoon's keys and key-users). */
static void cover_with_null(const char* name)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/r/proc/%s", name);
    must(mount("/dev/null", path, NULL, MS_BIND, NULL) == 0, 70);
    set_attr(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
}

/* A tmpfs bounded to what it holds now and 1 MiB and 256 inodes more (one statfs, one remount). */
static void fit(const char* path)
{
    struct statfs st;
    char data[96];
    must(statfs(path, &st) == 0, 71);
    snprintf(data, sizeof data, "size=%llu,nr_inodes=%llu",
             (unsigned long long)(st.f_blocks - st.f_bfree) * st.f_bsize + (1 << 20),
             (unsigned long long)(st.f_files - st.f_ffree) + 256);
    must(mount(NULL, path, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV, data) == 0, 72);
}

static void make_dev(void)
{
    static const char* const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
    static const char* const links[][2] = {
        {"/proc/self/fd", "/tmp/r/dev/fd"},         {"/proc/self/fd/0", "/tmp/r/dev/stdin"},
        {"/proc/self/fd/1", "/tmp/r/dev/stdout"},   {"/proc/self/fd/2", "/tmp/r/dev/stderr"},
        {"/proc/kcore", "/tmp/r/dev/core"},         {"pts/ptmx", "/tmp/r/dev/ptmx"},
    };
    must(mount("tmpfs", "/tmp/r/dev", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0, 83);
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        bind_node(nodes[i]);
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        must(symlink(links[i][0], links[i][1]) == 0, 84);
    must(mkdir("/tmp/r/dev/shm", kept ? 0755 : 01777) == 0 && mkdir("/tmp/r/dev/pts", 0755) == 0, 85);
    if (kept)
        must(mount("tmpfs", "/tmp/r/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                   "mode=0755,size=67108864,nr_inodes=16384") == 0,
             73);
    must(mount("devpts", "/tmp/r/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=620") == 0,
         86);
}

/* The root's contents: scenario a binds the host's / read-only (every mount below it too);
 * scenario b binds /usr so and links /bin, /lib and /lib64 into it, with a tmpfs on /tmp. */
static void make_root(void)
{
    const char* bound = scenario_b ? "/usr" : "/";
    const char* at = scenario_b ? "/tmp/r/usr" : "/tmp/r";
    if (scenario_b)
        must(mkdir(at, 0755) == 0, 87);
    must(mount(bound, at, NULL, MS_BIND | MS_REC, NULL) == 0, 88);
    set_attr(at, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (scenario_b) {
        must(symlink("usr/bin", "/tmp/r/bin") == 0 && symlink("usr/lib", "/tmp/r/lib") == 0 &&
                 symlink("usr/lib64", "/tmp/r/lib64") == 0,
             90);
        must(mkdir("/tmp/r/tmp", 0755) == 0 && mkdir("/tmp/r/proc", 0755) == 0 &&
                 mkdir("/tmp/r/dev", 0755) == 0,
             91);
        must(mount("tmpfs", "/tmp/r/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0, 92);
    }
}

/* (ns/setup/spawn.cc's cocoon_clone3 does the same; this yardstick is built apart from cocoon.)
 * clone3 called as vfork is: the caller's return address is held in rdx across the call (the
 * kernel keeps it, and copies it to the child), not on the stack the child returns on first and
 * then overwrites; each puts it back before its own return. x86_64, without a shadow stack. */
long vfork_clone3(struct clone_args* args, size_t size);
__asm__(".text\n"
        ".globl vfork_clone3\n"
        ".type vfork_clone3, @function\n"
        "vfork_clone3:\n"
        "    popq %rdx\n"
        "    movl $435, %eax\n"
        "    syscall\n"
        "    pushq %rdx\n"
        "    ret\n");

/* PID 1 before it starts the command (cocoon-a, cocoon-b), as cocoon's does while it waits for the
 * network namespace: the IPC namespace made, and the default seccomp policy loaded for the command
 * to inherit (by the CAP_SYS_ADMIN it holds in its user namespace). */
static void confine_for_command(void)
{
    must(unshare(CLONE_NEWIPC) == 0, 87);
#ifdef COCOON_POLICY
    struct sock_fprog prog = {sizeof kDefaultPolicy / sizeof kDefaultPolicy[0], (struct sock_filter*)kDefaultPolicy};
    must(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0, 64);
#else
#error "cocoon-a and cocoon-b need COCOON_POLICY"
#endif
}

/* PID 2 before its exec (cocoon-a, cocoon-b): its cgroup namespace rooted at its leaf, every
 * capability gone, then no_new_privs (the policy is PID 1's, inherited). */
static void drop_everything(void)
{
    if (cgroup_leaf >= 0)
        must(unshare(CLONE_NEWCGROUP) == 0, 60);
    for (int cap = 0; prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0; cap++) {
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {{0}};
    must(syscall(SYS_capset, &header, data) == 0, 61);
    must(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0, 62);
    must(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, 63);
}

static int netns_channel[2] = {-1, -1}; /* cocoon-a, cocoon-b: the network namespace's fd, helper to child */

static void lo_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq lo = {0};
    strcpy(lo.ifr_name, "lo");
    must(s >= 0 && ioctl(s, SIOCGIFFLAGS, &lo) == 0, 93);
    lo.ifr_flags |= IFF_UP;
    must(ioctl(s, SIOCSIFFLAGS, &lo) == 0, 94);
    close(s);
}

/* cocoon-a, cocoon-b: the helper, a vfork child of the caller (which waits anyway). */
static void make_netns(pid_t first)
{
    int pidfd = (int)syscall(SYS_pidfd_open, first, 0);
    must(pidfd >= 0 && setns(pidfd, CLONE_NEWUSER) == 0 && unshare(CLONE_NEWNET) == 0, 90);
    lo_up();
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int ns = s < 0 ? -1 : ioctl(s, SIOCGSKNS);
    must(ns >= 0, 91);
    char byte = 'n', control[CMSG_SPACE(sizeof(int))] = {0};
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    struct cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &ns, sizeof ns);
    must(sendmsg(netns_channel[0], &m, 0) == 1, 92);
    _exit(0);
}

/* cocoon-a, cocoon-b: the child joins it. */
static void join_netns(void)
{
    char byte, control[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
    must(recvmsg(netns_channel[1], &m, MSG_CMSG_CLOEXEC) == 1 && CMSG_FIRSTHDR(&m), 89);
    int ns;
    memcpy(&ns, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof ns);
    must(setns(ns, CLONE_NEWNET) == 0, 88);
    close(ns);
}

static int child(void* arg)
{
    (void)arg;
    if (kept)
        close(netns_channel[0]); /* the helper's end */
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", gid);
    write_file("/proc/self/gid_map", map);
    if (!kept)
        lo_up();
    must(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0, 95);
    /* The new root, on /tmp of the new mount namespace. */
    must(mount("tmpfs", "/tmp", "tmpfs", 0, NULL) == 0 && mkdir("/tmp/r", 0755) == 0, 96);
    must(mount("tmpfs", "/tmp/r", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0, 97);
    /* Scenario a's root tmpfs is covered by the bind of / next, empty for good: bounded now. */
    if (kept && !scenario_b)
        fit("/tmp/r");
    make_root();
    must(mount("proc", "/tmp/r/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0, 98);
    cover_proc("irq");
    cover_proc("bus");
    if (kept) {
        cover_with_null("keys");
        cover_with_null("key-users");
        cover_proc("sys");
        cover_proc("sysrq-trigger");
    }
    make_dev();
    if (kept) {
        fit("/tmp/r/dev");
        if (scenario_b)
            fit("/tmp/r");
    }
    must(chdir("/tmp/r") == 0 && syscall(SYS_pivot_root, ".", ".") == 0 && umount2(".", MNT_DETACH) == 0 &&
             chdir("/") == 0,
         99);
    if (kept) {
        confine_for_command();
        join_netns();
    }
    /* cocoon-a, cocoon-b: a vfork into the command's leaf, where there is one. */
    struct clone_args args = {.flags = CLONE_VM | CLONE_VFORK, .exit_signal = SIGCHLD};
    if (cgroup_leaf >= 0) {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = (unsigned long long)cgroup_leaf;
    }
    pid_t pid = kept ? (pid_t)vfork_clone3(&args, sizeof args) : vfork();
    if (pid == 0) {
        if (kept)
            drop_everything();
        else
            prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        execvp(command[0], command);
        _exit(127);
    }
    must(pid > 0, 75);
    int status;
    waitpid(pid, &status, 0);
    if (kept)
        kill(-1, SIGKILL); /* what the command left (PID 1's end, as cocoon's) */
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The sandbox's own cgroup removed, the leaf first: it empties as its last process is reaped, and
 * removal waits for that (a bounded while). The caller's process only: nothing is left on the host. */
static void remove_cgroup(void)
{
    if (cgroup_dir < 0)
        return;
    for (int tries = 0; unlinkat(cgroup_dir, "command", AT_REMOVEDIR) < 0 && errno == EBUSY && tries < 1000000; tries++) {
    }
    rmdir(cgroup_path);
}

/* must, in the caller's process once the cgroup may exist: removed before the exit. */
static void must_here(int ok, int step)
{
    if (!ok) {
        remove_cgroup();
        _exit(step);
    }
}

/* cocoon-a, cocoon-b: the caller's cgroup v2 (/proc/self/cgroup's "0::" line, under the mount
 * FLOOR_CGROUP2 names); where the caller may write it, a cgroup of the sandbox's own there, with at
 * most 64 descendants, and the command's leaf below it. Left in cgroup_path for its removal. */
static void make_cgroup(void)
{
    const char* mount = getenv("FLOOR_CGROUP2");
    char text[512], dir[520];
    int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof text - 1);
    close(fd);
    if (!mount || n <= 0)
        return;
    text[n] = 0;
    char* own = strstr(text, "0::");
    if (!own)
        return;
    own += 3;
    own[strcspn(own, "\n")] = 0;
    snprintf(dir, sizeof dir, "%s%s", mount, own);
    if (access(dir, W_OK) != 0)
        return;
    snprintf(cgroup_path, sizeof cgroup_path, "%s/floor-%d", dir, getpid());
    must(mkdir(cgroup_path, 0755) == 0, 65);
    cgroup_dir = open(cgroup_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_dir < 0)
        rmdir(cgroup_path);
    must_here(cgroup_dir >= 0 && mkdirat(cgroup_dir, "command", 0755) == 0, 66);
    int max = openat(cgroup_dir, "cgroup.max.descendants", O_WRONLY | O_CLOEXEC);
    must_here(max >= 0 && write(max, "64", 2) == 2, 67);
    close(max);
    cgroup_leaf = openat(cgroup_dir, "command", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    must_here(cgroup_leaf >= 0, 68);
}

int main(int argc, char** argv)
{
    const char* mode = argc < 3 ? "" : argv[1];
    kept = strncmp(mode, "cocoon-", 7) == 0;
    if (kept)
        mode += 7;
    if (strcmp(mode, "a") != 0 && strcmp(mode, "b") != 0) {
        fprintf(stderr, "usage: floor_dev a|b|cocoon-a|cocoon-b CMD [ARGS...]\n");
        return 2;
    }
    scenario_b = mode[0] == 'b';
    command = argv + 2;
    uid = getuid();
    gid = getgid();
    int flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_NEWCGROUP | SIGCHLD;
    if (kept) {
        make_cgroup();
        flags &= ~(CLONE_NEWNET | CLONE_NEWIPC);
        must_here(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, netns_channel) == 0, 69);
    }
    pid_t pid = clone(child, stack + sizeof stack, flags, NULL);
    if (pid < 0) {
        perror("floor_dev: clone");
        remove_cgroup();
        return 1;
    }
    if (kept) {
        if (vfork() == 0)
            make_netns(pid);
        /* The helper has exited: a child waiting for what it never sent reads EOF. */
        close(netns_channel[0]);
        close(netns_channel[1]);
    }
    int status;
    waitpid(pid, &status, 0);
    remove_cgroup();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
