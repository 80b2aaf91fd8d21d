// The command's end, seen by the monitor even when PID 1 cannot report it.
//
// Where cgroup2 is mounted without nsdelegate, the kernel lets a process move another between
// two cgroups when its uid may write the cgroup.procs of their common ancestor. The agent runs
// as the caller's uid (or as uid 0 of a user namespace it makes, which is the same to the
// kernel), so it may move PID 1 out of the sandbox's cgroup into one of its own and freeze it:
// PID 1 then never reaps the command, and the sandbox would outlive it. So PID 2 sends its own
// pidfd before it execs; once the command has exited and PID 1 has not reaped it within a grace
// period, the monitor takes the command's wait status from /proc (a zombie keeps it) and kills
// PID 1, which a SIGKILL reaches frozen or not. With nsdelegate the kernel refuses the move and
// nothing of this runs.
// Runs in: monitor.
#pragma once

#include <optional>
#include <string>

#include "base/unique_fd.h"

namespace cocoon::ns {

class CommandWatch {
public:
    // How long PID 1 has to reap the command before it counts as stopped.
    static constexpr double kGraceSeconds = 1.0;

    // The command's pidfd (PID 2's own, from the setup channel).
    void watch(UniqueFd pidfd);
    // Readable once the command has exited; -1 when nothing is watched.
    int pidfd() const { return m_waiting ? m_pidfd.get() : -1; }
    int timer_fd() const { return m_timer.get(); }
    // pidfd() was readable: the grace period starts.
    void on_exit();
    // timer_fd() was readable: the command's wait status when it is still a zombie (PID 1 did
    // not reap it: kill PID 1), nullopt when PID 1 did.
    std::optional<int> on_timer();

private:
    UniqueFd m_pidfd, m_timer;
    bool m_waiting = false;
};

// A zombie's wait status from the text of its /proc/PID/stat (field 52, exit_code), or nullopt
// when the text is not a zombie's (state Z) or is malformed. Pure; the comm field in parentheses
// is the process's own choice, so fields are counted from the last ')'.
std::optional<int> zombie_wait_status(const std::string& stat);

}  // namespace cocoon::ns
