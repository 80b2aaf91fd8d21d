// A token bucket: at most `burst` events at once, then `per_second` a second. Pure (the caller
// gives the time). Used by the relay worker (--egress's refusal lines, the resolver's questions)
// and by the monitor (base/wire_rules.h: how often a message kind may come).
// Runs in: monitor, worker: the worker bounds refusal lines and questions; the monitor bounds
//  message rates.
#pragma once

#include <algorithm>
#include <chrono>

namespace cocoon {

class RateBound {
public:
    using Clock = std::chrono::steady_clock;

    // Full at first: a quiet sandbox's first `burst` events all pass.
    RateBound(double per_second, double burst) : m_rate(per_second), m_burst(burst), m_tokens(burst) {}

    // Whether one more event may happen at `now` (and, if so, takes its token). A clock that
    // went back refills nothing.
    bool take(Clock::time_point now)
    {
        refill(now);
        if (m_tokens < 1)
            return false;
        m_tokens -= 1;
        return true;
    }

    // Whether an event could happen at `now`, without taking a token.
    bool ready(Clock::time_point now)
    {
        refill(now);
        return m_tokens >= 1;
    }

private:
    void refill(Clock::time_point now)
    {
        if (m_last == Clock::time_point{} || now <= m_last) {
            m_last = std::max(m_last, now);
            return;
        }
        const double seconds = std::chrono::duration<double>(now - m_last).count();
        m_tokens = std::min(m_burst, m_tokens + seconds * m_rate);
        m_last = now;
    }

    double m_rate, m_burst, m_tokens;
    Clock::time_point m_last{};
};

}  // namespace cocoon
