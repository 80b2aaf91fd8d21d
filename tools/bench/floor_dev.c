/* The start-up floor of the sandbox bwrap builds in scenarios (a) and (b) of tools/bench/startup:
 * one clone into new user/pid/mount/net/ipc/uts/cgroup namespaces, id maps, lo up, a tmpfs root
 * with the scenario's binds, a new proc with the parts Debian's bwrap 0.8.0 leaves read-only here
 * (irq, bus), --dev's /dev made as bwrap makes it (a tmpfs, six device nodes bound onto files made
 * for them, five links, /dev/shm a directory, a new devpts and /dev/ptmx linking into it),
 * pivot_root, and the command started as PID 2 by vfork (no page tables copied). Each step by the
 * cheapest calls there are, and nothing else: no checks, no capability drop, no option parsing,
 * no seccomp, no report (bwrap and cocoon do all of them). A lower bound, then: what any program
 * that builds bwrap's sandbox pays on this machine.
 * usage: floor_dev a|b CMD [ARGS...]   (as root or unprivileged; a: --ro-bind / /, b: scenario b's
 * --ro-bind /usr /usr, three links and a --tmpfs /tmp)
 * A yardstick for tools/bench/startup, not part of cocoon: built there with gcc -O2 -static. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char stack[1 << 16];
static char** command;
static int scenario_b;
static uid_t uid;
static gid_t gid;

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
    must(mount(path, path, NULL, MS_BIND, NULL) == 0, 79);
    set_attr(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
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
    must(mkdir("/tmp/r/dev/shm", 01777) == 0 && mkdir("/tmp/r/dev/pts", 0755) == 0, 85);
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

static int child(void* arg)
{
    (void)arg;
    char map[64];
    write_file("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", uid);
    write_file("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", gid);
    write_file("/proc/self/gid_map", map);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq lo = {0};
    strcpy(lo.ifr_name, "lo");
    must(s >= 0 && ioctl(s, SIOCGIFFLAGS, &lo) == 0, 93);
    lo.ifr_flags |= IFF_UP;
    must(ioctl(s, SIOCSIFFLAGS, &lo) == 0, 94);
    close(s);
    must(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) == 0, 95);
    /* The new root, on /tmp of the new mount namespace. */
    must(mount("tmpfs", "/tmp", "tmpfs", 0, NULL) == 0 && mkdir("/tmp/r", 0755) == 0, 96);
    must(mount("tmpfs", "/tmp/r", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") == 0, 97);
    make_root();
    must(mount("proc", "/tmp/r/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0, 98);
    cover_proc("irq");
    cover_proc("bus");
    make_dev();
    must(chdir("/tmp/r") == 0 && syscall(SYS_pivot_root, ".", ".") == 0 && umount2(".", MNT_DETACH) == 0 &&
             chdir("/") == 0,
         99);
    pid_t pid = vfork();
    if (pid == 0) {
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        execvp(command[0], command);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char** argv)
{
    if (argc < 3 || (strcmp(argv[1], "a") != 0 && strcmp(argv[1], "b") != 0)) {
        fprintf(stderr, "usage: floor_dev a|b CMD [ARGS...]\n");
        return 2;
    }
    scenario_b = argv[1][0] == 'b';
    command = argv + 2;
    uid = getuid();
    gid = getgid();
    int flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_NEWCGROUP | SIGCHLD;
    pid_t pid = clone(child, stack + sizeof stack, flags, NULL);
    if (pid < 0) {
        perror("floor_dev: clone");
        return 1;
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
