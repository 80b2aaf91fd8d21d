// The stop path's signals and timers: the signalfd, --kill-after's timer, --die-with-parent.
// Runs in: caller, monitor: the caller blocks the stop signals before the clone; the monitor acts
//  on them.
#include "ns/monitor/stop.h"

#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/sys_error.h"
#include "ns/plan.h"
#include "reaper/reaper.h"

namespace cocoon::ns {

void send_signal(int pidfd, int sig)
{
    ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0);
}

UniqueFd make_timer()
{
    return UniqueFd(static_cast<int>(check(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC), "timerfd_create")));
}

void arm(int timer, double seconds)
{
    itimerspec spec{};
    // seconds >= 0: the cast truncates, as floor would.
    spec.it_value.tv_sec = static_cast<time_t>(seconds);
    spec.it_value.tv_nsec = static_cast<long>((seconds - static_cast<double>(spec.it_value.tv_sec)) * 1e9);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0)
        spec.it_value.tv_nsec = 1;  // zero would disarm
    check(::timerfd_settime(timer, 0, &spec, nullptr), "timerfd_settime");
}

sigset_t monitor_signals(const LaunchPlan& plan)
{
    sigset_t set;
    sigemptyset(&set);
    if (plan.process.forward_signals)
        set = reaper::forwarded_signals();
    if (plan.process.kill_after)
        for (int sig : {SIGINT, SIGTERM, SIGHUP})
            sigaddset(&set, sig);
    return set;
}

StopPath::StopPath(const LaunchPlan& plan, int pidfd, UniqueFd parent, std::function<void()> on_stop,
                   std::function<void()> before_kill)
    : m_forward(plan.process.forward_signals), m_kill_after(plan.process.kill_after), m_pidfd(pidfd),
      m_parent(std::move(parent)), m_on_stop(std::move(on_stop)), m_before_kill(std::move(before_kill))
{
    sigset_t handled = monitor_signals(plan);
    if (!sigisemptyset(&handled))
        m_signals.reset(static_cast<int>(check(::signalfd(-1, &handled, SFD_CLOEXEC), "signalfd")));
    if (m_kill_after)
        m_timer = make_timer();
}

std::vector<EventSource> StopPath::sources()
{
    return {
        {"stop signals", [this] { return m_signals.get(); }, [this](short) { on_signal(); }},
        {"--kill-after", [this] { return m_timer.get(); }, [this](short) { on_kill_after(); }},
        // Security: --die-with-parent; nothing of the sandbox may outlive the process that
        // started cocoon.
        {"--die-with-parent", [this] { return m_parent.get(); },
         [this](short) {
             m_on_stop();
             send_signal(m_pidfd, SIGKILL);
             m_parent.reset();
         }},
    };
}

void StopPath::on_signal()
{
    signalfd_siginfo info;
    if (::read(m_signals.get(), &info, sizeof info) != sizeof info)
        return;
    const int sig = static_cast<int>(info.ssi_signo);
    // USR1, USR2 and WINCH are requests an agent may answer and go on: no stop.
    if (m_forward && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT))
        m_on_stop();
    if (m_forward)
        send_signal(m_pidfd, sig);
    if (m_kill_after && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) && !m_timer_armed) {
        arm(m_timer.get(), *m_kill_after);
        m_timer_armed = true;
    }
}

// --kill-after ran out: the kernel kills every process of the sandbox once its PID 1 dies. What
// they used is sampled first: no wait of the monitor's counts a process killed with PID 1.
void StopPath::on_kill_after()
{
    if (m_before_kill)
        m_before_kill();
    m_on_stop();
    send_signal(m_pidfd, SIGKILL);
    m_timer.reset();
}

}  // namespace cocoon::ns
