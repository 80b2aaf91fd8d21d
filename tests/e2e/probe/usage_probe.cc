// The resource report's probe (tests/e2e/usage_test.cc), run as a sandbox's command. Static, so
// that it needs nothing of the sandbox's /usr.
//   usage_probe share MIB N  touches MIB MiB, then clones N children that share its memory
//                            (CLONE_VM, as vfork and posix_spawn do), each of which works
//                            on memory of its own for 1.5 s; the parent waits for them (or
//                            1.5 s, with none), then exits 0.
//   usage_probe spin N       ignores SIGTERM and spins in N processes (itself and N - 1
//                            children) until killed; each prints "cpu-us PID US", the CPU it
//                            has used so far, at each 50 ms of it.
//   usage_probe unwaited N   ignores SIGCHLD (so the kernel reaps its children and no wait counts
//                            their CPU), runs N children one after another, each spinning for
//                            0.3 s of CPU and printing "cpu-us PID US" before it exits, then
//                            spins itself as spin 1 does.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

long long cpu_us()
{
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// A child of share(): for 1.5 s it maps 256 KiB, touches them and unmaps them, every 2 ms, as
// a working process does: the address space's size and resident set change all the time, so two
// reads of it a moment apart rarely agree.
int shared_child(void*)
{
    const timespec pause{0, 2'000'000};
    timespec start{}, now{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        void* p = ::mmap(nullptr, 256 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        std::memset(p, 2, 256 << 10);
        ::munmap(p, 256 << 10);
        ::nanosleep(&pause, nullptr);
        ::clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 1500);
    return 0;
}

int share(size_t mib, int children)
{
    const size_t bytes = mib << 20;
    std::vector<char> block(bytes, 1);  // written: every page resident
    std::vector<std::vector<char>> stacks(static_cast<size_t>(children), std::vector<char>(256 * 1024));
    std::vector<pid_t> pids;
    for (std::vector<char>& stack : stacks) {
        const pid_t pid = ::clone(shared_child, stack.data() + stack.size(), CLONE_VM | SIGCHLD, nullptr);
        if (pid < 0)
            return 3;
        pids.push_back(pid);
    }
    if (children == 0) {
        timespec ts{1, 500'000'000};
        ::nanosleep(&ts, nullptr);
    }
    int failed = 0;
    for (pid_t pid : pids) {
        int status = 0;
        if (::waitpid(pid, &status, 0) != pid || status != 0)
            failed = 4;
    }
    return block[bytes / 2] == 1 ? failed : 5;
}

[[noreturn]] void spin(int processes)
{
    ::signal(SIGTERM, SIG_IGN);
    for (int i = 1; i < processes; ++i)
        if (::fork() == 0)
            break;
    const pid_t self = ::getpid();
    std::printf("spinning %d\n", self);
    for (long long next = 0;;) {
        const long long used = cpu_us();
        if (used >= next) {
            std::printf("cpu-us %d %lld\n", self, used);
            std::fflush(stdout);
            next = used + 50000;
        }
    }
}

[[noreturn]] void unwaited(int children)
{
    ::signal(SIGCHLD, SIG_IGN);
    for (int i = 0; i < children; ++i) {
        std::fflush(stdout);
        const pid_t pid = ::fork();
        if (pid == 0) {
            while (cpu_us() < 300000) {}
            std::printf("cpu-us %d %lld\n", ::getpid(), cpu_us());
            std::fflush(stdout);
            ::_exit(0);
        }
        // Reaped by the kernel: gone once kill finds no such process.
        for (const timespec pause{0, 10'000'000}; pid > 0 && ::kill(pid, 0) == 0;)
            ::nanosleep(&pause, nullptr);
    }
    spin(1);
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc == 4 && std::strcmp(argv[1], "share") == 0)
        return share(std::strtoul(argv[2], nullptr, 10), std::atoi(argv[3]));
    if (argc == 3 && std::strcmp(argv[1], "spin") == 0)
        spin(std::atoi(argv[2]));
    if (argc == 3 && std::strcmp(argv[1], "unwaited") == 0)
        unwaited(std::atoi(argv[2]));
    std::fprintf(stderr, "usage: usage_probe share MIB N | spin N | unwaited N\n");
    return 2;
}
