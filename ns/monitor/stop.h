// The stop path: signals the monitor takes over, --kill-after's timer, --die-with-parent. Each
// is an event source of the monitor's loop (ns/monitor/event_loop.h), polled before any other
// and bounded: a signal is a read and a pidfd_send_signal, the timer one sample and a SIGKILL;
// one that ends programs also reads --login-file's queued events, the first time (on_stop).
// Runs in: caller, monitor: the caller blocks the stop signals before the clone; the monitor acts
//  on them.
#pragma once

#include <signal.h>

#include <functional>
#include <optional>
#include <vector>

#include "base/unique_fd.h"
#include "ns/monitor/event_loop.h"

namespace cocoon::ns {

struct LaunchPlan;

class StopPath {
public:
    // pidfd: PID 1's (borrowed). parent: a pidfd of cocoon's parent with --die-with-parent, else
    // invalid. on_stop: called before each signal the monitor sends that ends programs (a
    // forwarded INT, TERM, HUP or QUIT; --kill-after's or --die-with-parent's SIGKILL).
    // before_kill: called once before --kill-after's SIGKILL (the last sample).
    StopPath(const LaunchPlan& plan, int pidfd, UniqueFd parent, std::function<void()> on_stop,
             std::function<void()> before_kill);

    // Its sources: the signalfd, the --kill-after timer, the parent's pidfd.
    std::vector<EventSource> sources();

private:
    void on_signal();
    void on_kill_after();

    bool m_forward = false;
    std::optional<double> m_kill_after;
    int m_pidfd;
    UniqueFd m_signals, m_timer, m_parent;
    bool m_timer_armed = false;
    std::function<void()> m_on_stop, m_before_kill;
};

// Signals the monitor takes over (blocks, then reads from a signalfd) for this plan: the
// forwarded set with --forward-signals, the stop signals with --kill-after, none otherwise
// (bwrap's dispositions).
sigset_t monitor_signals(const LaunchPlan& plan);

// pidfd_send_signal, errors ignored (a process that is gone needs no signal).
void send_signal(int pidfd, int sig);

// A CLOCK_MONOTONIC timerfd, and arming it once `seconds` (>= 0) from now.
UniqueFd make_timer();
void arm(int timer, double seconds);

}  // namespace cocoon::ns
