// The setup channel's protocol as one table (base/wire_rules.h): for each message kind, the phase
// of the sandbox's set-up it may come in, how often, and with how many fds. Built per run: the
// plan says how many listeners and login directories come, and which reports are asked for.
// Runs in the monitor, on every datagram of the setup channel (ns/channel.h), before the monitor
// acts on it; anything the table refuses ends the sandbox (SECURITY.md, "The setup channel").
// Pure; unit-tested (tests/unit/setup_rules_test.cc).
// Runs in: monitor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/wire_rules.h"
#include "ns/channel.h"

namespace cocoon::ns {

// The monitor's phases: how far set-up has come, as its messages say (the monitor sees nothing
// else of it). Set-up sends in the order of its steps (ns/setup/first_process.cc), so each message moves
// the phase on to its own step; a message of an earlier step after it is out of phase.
enum SetupPhase : uint32_t {
    kStarting = 1,  // step 1: the namespaces' report
    kListening = 2,  // step 7: the relay worker's listeners
    kMounting = 4,  // step 8: the tmpfs mounts, the login files' directories
    kCommandStarts = 8,  // PID 2's own pidfd, right before the command's exec
    kCommandEnded = 16,  // PID 1's status of the command: nothing comes after it
};

// What this run's set-up sends, from the plan and the launch.
struct SetupExpects {
    uint32_t relays = 0;  // --relay: one listener message each
    bool egress = false;  // --egress: its proxy's listeners, its resolver's socket
    uint32_t transparent = 0;  // --egress: one transparent listener message per port
    uint32_t login_files = 0;  // --login-file: one directory each
    bool namespaces = false;  // --info-fd, --json-status-fd: the namespaces' report
    bool tmpfs = false;  // --json-status-fd: the tmpfs mounts (when set-up made any)
    bool own_pidfd = false;  // PID 2's pidfd (when it moves itself into the command's cgroup leaf)
};

// The table, one row per kind the channel's encoding knows; a kind this run does not expect has
// phases 0 (its row says why the message is refused).
std::vector<WireRule> setup_rules(const SetupExpects& expects);

// The table, the phase, and the per-index kinds' indices: each index in range, and once.
class SetupCheck {
public:
    explicit SetupCheck(const SetupExpects& expects);
    SetupCheck(const SetupCheck&) = delete;  // m_check holds a span of m_rules
    SetupCheck& operator=(const SetupCheck&) = delete;

    // Empty when `msg` may come now (then it is counted and the phase moves on); else what is
    // wrong with it, in words for the monitor's one-line error.
    std::string admit(const Message& msg, RateBound::Clock::time_point now);
    uint32_t phase() const { return m_phase; }

private:
    const SetupExpects m_expects;
    const std::vector<WireRule> m_rules;
    WireCheck m_check;
    uint32_t m_phase = kStarting;
    std::map<uint32_t, std::vector<bool>> m_seen;  // kind: which indices came
};

}  // namespace cocoon::ns
