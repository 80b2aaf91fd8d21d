// A boundary's protocol as data: one row per message kind, saying in which phases of the
// receiver it may come, how often, and how many fds it carries. The receiver asks WireCheck
// before it acts on a message; anything the table does not allow is fatal for the sender (the
// receiver decides what "fatal" means: a set-up that fails the start, a worker that is killed).
// The monitor checks the setup channel's and the relay worker's messages with it. Pure: the caller
// gives the time; unit-tested.
// Runs in: monitor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/rate_bound.h"

namespace cocoon {

// The fields in the order a table row reads (kind, name, when, how often, fds); a few bytes of
// padding per row of a table of a dozen.
struct WireRule {  // NOLINT(clang-analyzer-optin.performance.Padding)
    uint32_t kind;  // as on the wire: never inferred from order or size
    const char* name;  // for the message that kills its sender
    uint32_t phases;  // bit mask of the receiver's phases in which it may come; 0: never (a
                      // table built per run keeps a row for a kind this run does not expect)
    uint32_t max_count;  // in the boundary's life; 0: no count (then per_second bounds it)
    double per_second;  // with max_count 0: a token bucket of this rate, burst = 2 s of it
    uint8_t fds;  // this many fds come with it
    uint8_t max_fds = 0;  // more may come, up to this many (0: exactly `fds`)
};

class WireCheck {
public:
    explicit WireCheck(std::span<const WireRule> rules) : m_rules(rules), m_counts(rules.size(), 0)
    {
        for (const WireRule& rule : rules)
            m_rates.emplace_back(rule.per_second, 2 * rule.per_second);
    }

    // Empty when a message of `kind` with `fds` fds may come now, in `phase` (one bit) at `now`,
    // and then counted; else what is wrong with it, in words for the sender's kill line.
    std::string admit(uint32_t kind, uint32_t phase, size_t fds, RateBound::Clock::time_point now)
    {
        for (size_t i = 0; i < m_rules.size(); ++i) {
            const WireRule& rule = m_rules[i];
            if (rule.kind != kind)
                continue;
            const std::string what = std::string("a ") + rule.name + " message";
            if (rule.phases == 0)
                return what + ", which this run does not expect";
            if ((rule.phases & phase) == 0)
                return what + " out of its phase";
            const size_t most = rule.max_fds != 0 ? rule.max_fds : rule.fds;
            if (fds < rule.fds || fds > most)
                return what + " with " + std::to_string(fds) + " fds (it carries " + std::to_string(rule.fds) +
                       (most != rule.fds ? " to " + std::to_string(most) : std::string()) + ")";
            if (rule.max_count != 0 && m_counts[i] >= rule.max_count)
                return what + " past its " + std::to_string(rule.max_count) +
                       (rule.max_count == 1 ? " time" : " times");
            if (rule.max_count == 0 && !m_rates[i].take(now))
                return what + " flood, past " + std::to_string(static_cast<unsigned>(rule.per_second)) + " a second";
            ++m_counts[i];
            return {};
        }
        return "a message of an unknown kind (" + std::to_string(kind) + ")";
    }

    // How many messages of `kind` were admitted.
    uint32_t count(uint32_t kind) const
    {
        for (size_t i = 0; i < m_rules.size(); ++i)
            if (m_rules[i].kind == kind)
                return m_counts[i];
        return 0;
    }

private:
    std::span<const WireRule> m_rules;
    std::vector<uint32_t> m_counts;
    std::vector<RateBound> m_rates;
};

}  // namespace cocoon
