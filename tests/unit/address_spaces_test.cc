// The sampled memory's grouping by address space (ns/monitor/usage_vm.h), with real processes:
// this one, a child that shares its memory (clone(CLONE_VM), as vfork and posix_spawn make one),
// and a fork, which has the same layout but memory of its own. kcmp needs only the caller's uid.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "ns/monitor/usage_cpu.h"
#include "ns/monitor/usage_vm.h"

namespace cocoon::test {
namespace {

int sleep_forever(void*)
{
    for (;;)
        ::pause();
}

// A child process, ended and reaped when the test ends.
struct Child {
    std::vector<char> stack = std::vector<char>(64 * 1024);
    pid_t pid = -1;
    explicit Child(bool share_memory)
    {
        if (share_memory) {
            pid = ::clone(sleep_forever, stack.data() + stack.size(), CLONE_VM | SIGCHLD, nullptr);
        } else if ((pid = ::fork()) == 0) {
            sleep_forever(nullptr);
        }
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;
    ~Child()
    {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

ns::ProcessSample sample_of(pid_t pid)
{
    UniqueFd proc(::open(("/proc/" + std::to_string(pid)).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    std::optional<ns::ProcessSample> p = proc ? ns::read_process(proc.get(), pid) : std::nullopt;
    EXPECT_TRUE(p) << "/proc/" << pid;
    return p.value_or(ns::ProcessSample{});
}

// Each tick over its budget from its start, as on a loaded host or while a sharer holds its
// memory's lock: a sharer first seen then counts once all the same (it counted the memory twice).
TEST(AddressSpaces, ASharerFirstSeenInATickOverItsBudgetCountsOnce)
{
    Child sharer(true);
    ASSERT_GT(sharer.pid, 0);
    ns::AddressSpaces spaces;
    const std::vector<ns::ProcessSample> seen{sample_of(::getpid()), sample_of(sharer.pid)};
    ASSERT_EQ(seen[0].layout, seen[1].layout);
    for (int tick = 0; tick < 3; ++tick)
        EXPECT_EQ(spaces.distinct(seen, [] { return true; }).size(), 1u) << "tick " << tick;
}

// A fork has the same layout but memory of its own: two address spaces, whatever the budget.
TEST(AddressSpaces, AForkCountsAsAnAddressSpaceOfItsOwn)
{
    Child fork(false);
    ASSERT_GT(fork.pid, 0);
    ns::AddressSpaces spaces;
    const std::vector<ns::ProcessSample> seen{sample_of(::getpid()), sample_of(fork.pid)};
    for (bool over : {false, true})
        EXPECT_EQ(spaces.distinct(seen, [&] { return over; }).size(), 2u) << "over budget: " << over;
}

}  // namespace
}  // namespace cocoon::test
