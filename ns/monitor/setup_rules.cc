// The setup channel's table, built for one run, and the checks beside it that a static table cannot
// make: the phase each message moves on to, and each index in range and once.
// Runs in: monitor.
#include "ns/monitor/setup_rules.h"

#include <optional>
#include <utility>

namespace cocoon::ns {
namespace {

// A message of a step may come in that step's phase and any before it (a step that sends nothing
// leaves the phase where it was).
constexpr uint32_t upto(uint32_t phase)
{
    return phase | (phase - 1);
}

// The phase a message moves on to: its sender's step. An error comes at any step, and moves
// nothing: its sender exits.
uint32_t step_of(Wire::Kind kind)
{
    switch (kind) {
    case Wire::Namespaces:
        return kStarting;
    case Wire::RelayListener:
    case Wire::EgressProxy:
    case Wire::Transparent:
    case Wire::Resolver:
        return kListening;
    case Wire::Tmpfs:
    case Wire::LoginDir:
        return kMounting;
    case Wire::OwnPidfd:
        return kCommandStarts;
    case Wire::Status:
        return kCommandEnded;
    default:
        return 0;
    }
}

// The index a message names, and how many this run has; nullopt for kinds without an index.
std::optional<std::pair<uint32_t, uint32_t>> index_of(const Message& msg, const SetupExpects& e)
{
    if (auto* listeners = std::get_if<ListenersMsg>(&msg))
        switch (listeners->kind) {
        case Wire::RelayListener:
            return std::pair(listeners->index, e.relays);
        case Wire::Transparent:
            return std::pair(listeners->index, e.transparent);
        default:
            return std::pair(listeners->index, 1u);  // one of each: index 0
        }
    if (auto* dir = std::get_if<LoginDirMsg>(&msg))
        return std::pair(dir->index, e.login_files);
    return std::nullopt;
}

}  // namespace

std::vector<WireRule> setup_rules(const SetupExpects& e)
{
    auto when = [](bool expected, uint32_t phases) { return expected ? phases : 0; };
    // kind, name, phases, max count, rate (none: every row has a count), fds [to max fds]
    return {
        // One per set-up process that may fail, each of which exits after it: the joining helper
        // (ns/join.cc), the first process (or PID 1 before it reaps), PID 2 before its exec. The
        // first is the one reported.
        {Wire::Error, "set-up error", upto(kCommandStarts), 3, 0, 0},
        // PID 1, when a signal ended the command (an exit code rides on PID 1's own).
        {Wire::Status, "status", upto(kCommandStarts), 1, 0, 0},
        {Wire::Namespaces, "namespaces", when(e.namespaces, kStarting), 1, 0, 0},
        // 127.0.0.1 and, where the kernel has IPv6, ::1 (net/listener.h).
        {Wire::RelayListener, "--relay listener", when(e.relays > 0, upto(kListening)), e.relays, 0, 1, 2},
        {Wire::EgressProxy, "--egress proxy listener", when(e.egress, upto(kListening)), 1, 0, 1, 2},
        {Wire::Transparent, "--egress transparent listener", when(e.transparent > 0, upto(kListening)), e.transparent,
         0, 1},
        {Wire::Resolver, "--egress resolver socket", when(e.egress, upto(kListening)), 1, 0, 1},
        {Wire::Tmpfs, "tmpfs", when(e.tmpfs, upto(kMounting)), 1, 0, 1, kMaxTmpfsReported},
        {Wire::LoginDir, "--login-file directory", when(e.login_files > 0, upto(kMounting)), e.login_files, 0, 1},
        {Wire::OwnPidfd, "command's pidfd", when(e.own_pidfd, upto(kMounting)), 1, 0, 1},
        // The join helper's channel's (ns/join.cc), never this one's.
        {Wire::FirstProcessPidfd, "first process's pidfd", 0, 1, 0, 1},
    };
}

SetupCheck::SetupCheck(const SetupExpects& expects)
    : m_expects(expects), m_rules(setup_rules(expects)), m_check(m_rules)
{
}

std::string SetupCheck::admit(const Message& msg, RateBound::Clock::time_point now)
{
    const Wire::Kind kind = kind_of(msg);
    if (std::string why = m_check.admit(kind, m_phase, fd_count(msg), now); !why.empty())
        return why;
    if (auto index = index_of(msg, m_expects)) {
        const uint32_t at = index->first, count = index->second;
        std::vector<bool>& seen = m_seen[kind];
        seen.resize(count);
        const std::string what = [&] {
            for (const WireRule& rule : m_rules)
                if (rule.kind == kind)
                    return std::string("a ") + rule.name + " message for index " + std::to_string(at);
            return std::string();
        }();
        if (at >= count)
            return what + " (the run has " + std::to_string(count) + ")";
        if (seen[at])
            return what + " a second time";
        seen[at] = true;
    }
    if (const uint32_t step = step_of(kind); step > m_phase)
        m_phase = step;
    return {};
}

}  // namespace cocoon::ns
