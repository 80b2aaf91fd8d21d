// What a sandboxed command can do to root's files on the host (tests/e2e/host_user_test.cc):
// prints "NAME ok" or "NAME <errno name>" for each attempt. Static; runs as the sandboxed command.
//
// usage: cocoon_host_user_probe read PATH...   open each PATH for reading (name: the path)
//        cocoon_host_user_probe cgroup DIR     from a new user, mount and cgroup namespace (no id
//                                              maps: the ids stay what they were, and the
//                                              capabilities last until exec), mount cgroup2 on
//                                              DIR/v2 and the v1 pids hierarchy on DIR/v1, and
//                                              write files of the cgroup the sandbox runs in.
//                                              Each write puts back the value the file holds (and
//                                              cgroup.procs gets the probe's own pid, which is
//                                              in that cgroup already), so a write that succeeds
//                                              changes nothing on the host.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

void report(const std::string& name, int err)
{
    std::printf("%s %s\n", name.c_str(), err == 0 ? "ok" : strerrorname_np(err));
}

int read_into(const std::string& path, std::string& out)
{
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    char buf[256];
    ssize_t n = ::read(fd, buf, sizeof buf);
    int err = n < 0 ? errno : 0;
    ::close(fd);
    out.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
    return err;
}

// Opens path for writing and writes `value` (or what it holds now, if value is empty).
void rewrite(const std::string& name, const std::string& path, std::string value = "")
{
    if (value.empty()) {
        if (int err = read_into(path, value)) {
            report(name + "-read", err);
            return;
        }
    }
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        report(name, errno);
        return;
    }
    int err = ::write(fd, value.data(), value.size()) < 0 ? errno : 0;
    ::close(fd);
    report(name, err);
}

int cgroup(const std::string& dir)
{
    const std::string v2 = dir + "/v2", v1 = dir + "/v1";
    for (const std::string& d : {v2, v1})
        if (::mkdir(d.c_str(), 0755) < 0 && errno != EEXIST) {
            report("mkdir", errno);
            return 1;
        }
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP) < 0) {
        report("unshare", errno);
        return 1;
    }
    int err = ::mount("none", v2.c_str(), "cgroup2", 0, nullptr) < 0 ? errno : 0;
    report("v2-mount", err);
    if (err == 0) {
        rewrite("v2-max-descendants", v2 + "/cgroup.max.descendants");
        rewrite("v2-max-depth", v2 + "/cgroup.max.depth");
        rewrite("v2-procs", v2 + "/cgroup.procs", std::to_string(::getpid()));
    }
    err = ::mount("none", v1.c_str(), "cgroup", 0, "pids") < 0 ? errno : 0;
    report("v1-mount", err);
    if (err == 0) {
        rewrite("v1-notify-on-release", v1 + "/notify_on_release");
        if (::access((v1 + "/pids.max").c_str(), F_OK) == 0)
            rewrite("v1-pids-max", v1 + "/pids.max");
        rewrite("v1-procs", v1 + "/cgroup.procs", std::to_string(::getpid()));
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc >= 3 && std::strcmp(argv[1], "read") == 0) {
        for (int i = 2; i < argc; ++i) {
            int fd = ::open(argv[i], O_RDONLY | O_CLOEXEC);
            report(argv[i], fd < 0 ? errno : 0);
            if (fd >= 0)
                ::close(fd);
        }
        return 0;
    }
    if (argc == 3 && std::strcmp(argv[1], "cgroup") == 0)
        return cgroup(argv[2]);
    std::fprintf(stderr, "usage: %s read PATH... | cgroup DIR\n", argv[0]);
    return 2;
}
