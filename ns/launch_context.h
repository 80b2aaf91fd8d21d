// What launch() (ns/launch.cc, in the monitor) hands the sandbox's first process
// (ns/setup/first_process.cc). Internal to ns/.
// Runs in: caller, monitor, setup, pid1, pid2: what the caller hands the first process and its
//  children.
#pragma once

#include <sched.h>
#include <signal.h>

#include <optional>
#include <vector>

#include "base/unique_fd.h"
#include "ns/monitor/login_file.h"
#include "ns/plan.h"

namespace cocoon::ns {

// Start-up speed: the setup chain (monitor -> PID 1 -> PID 2) runs one step at
// a time, so it is kept on the CPU cocoon started on: each hand-off is then a
// local context switch rather than the wake-up of an idle CPU, which is slow
// on virtual machines. The one exception: once it has cloned the first
// process, the monitor steps aside to another CPU (step_aside), and its own
// work (the cgroup, its event loop's set-up) runs there while the first
// process sets up on this one. Every process gets the caller's affinity back
// before it does real work: the monitor with release(), the sandbox's
// processes (forked with the pin) with restore().
class CpuPin {
public:
    CpuPin()
    {
        cpu_set_t caller, one;
        int cpu = ::sched_getcpu();
        if (cpu < 0 || ::sched_getaffinity(0, sizeof caller, &caller) < 0)
            return;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (::sched_setaffinity(0, sizeof one, &one) == 0)
            m_caller = caller;
    }
    CpuPin(const CpuPin&) = delete;
    CpuPin& operator=(const CpuPin&) = delete;
    ~CpuPin() { release(); }

    // Gives process pid (0: this one) the caller's affinity back.
    void restore(pid_t pid = 0) const
    {
        if (m_caller)
            ::sched_setaffinity(pid, sizeof *m_caller, &*m_caller);
    }
    // This process (the monitor, which has just cloned the first process here with the pin)
    // moves to the caller's other CPUs, if there are any, to work there beside set-up; the
    // first process runs here, where cocoon's pages are warm, as soon as the monitor has left.
    // release() then gives the monitor all of the caller's CPUs, which keeps it where it is.
    // Sending the first process to the other CPU instead made set-up 0.1-0.14 ms slower, and
    // the monitor staying made the first process wait for its work (ARCHITECTURE.md,
    // "Start-up").
    void step_aside() const
    {
        const int cpu = ::sched_getcpu();
        if (m_caller && cpu >= 0) {
            cpu_set_t others = *m_caller;
            CPU_CLR(cpu, &others);
            if (CPU_COUNT(&others) > 0)
                ::sched_setaffinity(0, sizeof others, &others);
        }
        leave_batch();
    }
    // Start-up speed: from just before the clone of the first process until the monitor has
    // stepped aside, the monitor runs as SCHED_BATCH, which the first process inherits and leaves
    // first thing (leave_batch in child_main). A SCHED_OTHER task woken on this CPU preempts the
    // one that woke it: the first process, new here, ran on until its first sleep (0.4-0.5 ms of
    // set-up) before the monitor could step aside, and the monitor's work beside set-up waited
    // that long. A SCHED_BATCH task preempts no one on wakeup. Only from SCHED_OTHER (a caller's
    // SCHED_IDLE, real-time policy or reset-on-fork flag stays as it is): to SCHED_BATCH and back
    // needs no privilege, and keeps the nice value.
    void batch_for_clone()
    {
        const sched_param none{};
        m_batch = ::sched_getscheduler(0) == SCHED_OTHER && ::sched_setscheduler(0, SCHED_BATCH, &none) == 0;
    }
    // The policy the caller had, back: in the monitor once aside, in the first process at its start
    // (it runs set-up and forks the command as SCHED_OTHER).
    void leave_batch() const
    {
        const sched_param none{};
        if (m_batch)
            ::sched_setscheduler(0, SCHED_OTHER, &none);
        m_batch = false;
    }
    void release()
    {
        leave_batch();  // where the clone failed before the monitor stepped aside
        restore();
        m_caller.reset();
    }

private:
    std::optional<cpu_set_t> m_caller;
    mutable bool m_batch = false;  // cleared by leave_batch, in each process for itself
};

// The command's cgroup leaf as the first process has it: the fds are the monitor's (inherited at
// the clone) or came in CommandCgroupMsg; -1 without a cgroup.
struct CommandCgroup {
    int leaf = -1;  // which PID 1 clones PID 2 into (CLONE_INTO_CGROUP)
    int procs = -1;  // its cgroup.procs, for PID 2 where PID 1 could not
    bool send_pidfd = false;  // PID 2 sends its pidfd to the monitor (ns/monitor/command_watch.h)
};

// What one launch decides when it starts, beside the (const) plan.
struct LaunchContext {
    bool terminal_foreground = false;  // cocoon's group owned the terminal: the command gets it
    sigset_t caller_mask{};  // the signal mask the command gets back
    CpuPin pin;
    UniqueFd exe;  // cocoon's own binary (O_PATH), for plan.reexec_pid1
    std::vector<LoginSeed> login_seeds;  // --login-file: what the first process writes at each DEST
    CommandCgroup command_cgroup;  // the command's cgroup leaf, where made before the clone
    // The sandbox's cgroup is made once the first process runs: the monitor sends the leaf
    // (CommandCgroupMsg) on this channel of its own (the first process's end), read before PID 2
    // is forked; -1: made before. Not on the setup channel: a set-up that fails before it reads
    // the message would leave it unread, and the kernel then resets the monitor's reads there,
    // losing the error set-up sent.
    int command_cgroup_channel = -1;
    // The sandbox's network namespace is made beside set-up (ns/launch.cc, make_netns_beside): the
    // first process was cloned without one and joins it from the same message, before it forks the
    // command; until then lo is not its to bring up, nor the namespace its to report.
    bool netns_beside = false;
    // The sandbox's IPC namespace is made by the first process itself, while it waits for that
    // message, not by the clone (ns/launch.cc).
    bool ipc_beside = false;
    // PID 1 puts the command's session keyring and default seccomp policy in place while it waits
    // for that message, and the command inherits them (ns/launch.cc).
    bool confined_before_fork = false;
    bool tmpfs_report = false;  // --json-status-fd: the monitor measures the sandbox's tmpfs mounts
};

// Makes our process group the terminal's foreground one (the command's, and
// the monitor's again at the end).
void take_terminal();

// The sandbox's first process. Never returns: it execs the command, becomes
// the reaper, or reports what failed (and in which step) to the monitor and
// exits 1. fds: the caller's fds the sandbox uses (this process's copies).
[[noreturn]] void child_main(const LaunchPlan& plan, const LaunchContext& ctx, SandboxFds fds, bool report, int sock);

}  // namespace cocoon::ns
