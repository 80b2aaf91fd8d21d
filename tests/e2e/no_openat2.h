// Runs cocoon where openat2 answers ENOSYS, as inside a sandbox whose seccomp policy cannot read
// struct open_how (cocoon's own, around a nested cocoon) or on a kernel without it, or where
// another call is refused, as under a container's seccomp profile: a filter that says so is loaded (no_new_privs set)
// in a child of the test, which then runs the body. Used by the e2e tests, in the test process, as whoever runs them.
#pragma once

#include <fcntl.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cerrno>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "tests/support/process.h"

namespace cocoon::test {

// A memfd (without FD_CLOEXEC, so a command can be handed it) holding a filter, in
// seccomp_export_bpf's format (what --add-seccomp-fd reads), in which system call `nr` answers
// `err` and every other is allowed.
inline UniqueFd refusing_filter(int nr, int err)
{
    std::unique_ptr<void, decltype(&seccomp_release)> ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
    if (!ctx || seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(static_cast<uint16_t>(err)), nr, 0) < 0)
        throw std::runtime_error("seccomp_rule_add(" + std::to_string(nr) + ")");
    UniqueFd mem(::memfd_create("refusing-filter", 0));
    if (!mem || seccomp_export_bpf(ctx.get(), mem.get()) < 0)
        throw std::runtime_error("seccomp_export_bpf");
    ::lseek(mem.get(), 0, SEEK_SET);
    return mem;
}

// The filter in which openat2 answers ENOSYS.
inline UniqueFd no_openat2_filter()
{
    return refusing_filter(SCMP_SYS(openat2), ENOSYS);
}

// body() (which runs cocoon) in a child where system call `nr` answers `err`, as under a
// container's seccomp profile; its Result. A child whose filter did not take (checked for
// openat2), or which died, fails the test.
inline Result under_refusal(int nr, int err, const std::function<Result()>& body)
{
    // Built before the fork: the child only loads it.
    UniqueFd filter = refusing_filter(nr, err);
    std::vector<sock_filter> program(static_cast<size_t>(::lseek(filter.get(), 0, SEEK_END)) / sizeof(sock_filter));
    if (::pread(filter.get(), program.data(), program.size() * sizeof(sock_filter), 0) < 0)
        throw std::runtime_error("pread(filter)");
    filter.reset();  // not handed to cocoon
    int pipe[2];
    if (::pipe2(pipe, O_CLOEXEC) < 0)
        throw std::runtime_error("pipe2");
    UniqueFd from_child(pipe[0]), to_parent(pipe[1]);
    const pid_t pid = ::fork();
    if (pid == 0) {
        from_child.reset();
        sock_fprog prog{static_cast<unsigned short>(program.size()), program.data()};
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
            ::_exit(2);
        if (nr == SCMP_SYS(openat2) && (::syscall(SYS_openat2, -1, nullptr, nullptr, 0) >= 0 || errno != err))
            ::_exit(3);
        Result r = body();
        std::string frame = std::to_string(r.code) + "\n" + std::to_string(r.out.size()) + "\n" + r.out + r.err;
        for (size_t done = 0; done < frame.size();) {
            ssize_t n = ::write(to_parent.get(), frame.data() + done, frame.size() - done);
            if (n <= 0)
                ::_exit(4);
            done += static_cast<size_t>(n);
        }
        ::_exit(0);
    }
    to_parent.reset();
    std::string frame;
    char buf[65536];
    for (ssize_t n; (n = ::read(from_child.get(), buf, sizeof buf)) != 0;) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        frame.append(buf, static_cast<size_t>(n));
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw std::runtime_error("the child under the filter failed (status " + std::to_string(status) + ")");
    Result r;
    const size_t code_end = frame.find('\n'), size_end = frame.find('\n', code_end + 1);
    r.code = std::stoi(frame.substr(0, code_end));
    const size_t out_size = std::stoul(frame.substr(code_end + 1, size_end - code_end - 1));
    r.out = frame.substr(size_end + 1, out_size);
    r.err = frame.substr(size_end + 1 + out_size);
    return r;
}

// body() in a child where openat2 answers ENOSYS.
inline Result without_openat2(const std::function<Result()>& body)
{
    return under_refusal(SCMP_SYS(openat2), ENOSYS, body);
}

}  // namespace cocoon::test
