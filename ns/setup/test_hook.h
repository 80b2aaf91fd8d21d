// Test-only: a sandbox set-up that sends the monitor what its setup channel's table must refuse, as
// a set-up or a PID 1 taken over would (tests/e2e/hostile_setup_test.cc). Compiled only with
// -DCOCOON_TEST_HOOKS=ON, which no shipped build sets; runs in the first process (before the
// command), in PID 1 (after the command started), and in the monitor (its pause).
// Runs in: monitor, setup, pid1: test builds only: set-up and PID 1 misbehave; the monitor pauses
//  after refusing it.
#pragma once

#include <optional>
#include <string>

namespace cocoon::ns::test_hook {

// The environment variable that arms the hook: "MODE:DELAY_MS". The first process (or PID 1 for
// late-*) waits DELAY_MS, then sends:
//   repeat               a second tmpfs message (run with --json-status-fd and a --tmpfs)
//   bad-kind             a datagram of an unknown kind (0x7f)
//   extra-fd             a status message carrying an fd
//   unplanned-listener   an --egress proxy listener, in a run without --egress
//   flood                tmpfs messages of 64 fds each until the channel is full
//   late-listener        as unplanned-listener, from PID 1 once the command runs
//   slow-pid1            nothing sent: PID 1 waits DELAY_MS once the command is forked, as a PID 1
//                        the scheduler keeps off a CPU would (pause_pid1)
inline constexpr const char* kSetupEnv = "COCOON_TEST_SETUP_HOOK";

struct SetupHook {
    std::string mode;
    int delay_ms = 0;
};

// Read by the first process before its steps (PID 1 keeps it: a re-executed PID 1 has none).
std::optional<SetupHook> setup_hook_from_env();

// The first process, before it forks the command (modes but late-*; then it waits 30 s, going no
// further), or PID 1 before it reaps (late-*): does what the mode says, one line on stderr
// ("cocoon: setup test hook: ...").
void misbehave(const SetupHook& hook, int sock, bool in_pid1);

// PID 1 right after the fork of the command (slow-pid1): waits DELAY_MS, saying so.
void pause_pid1(const SetupHook& hook);

// The monitor, once it refused the setup channel: with the hook armed, says so on stderr and holds
// on 1.5 s, so the test can look at its fds after the refused message.
void monitor_refused(const std::string& prefix);

}  // namespace cocoon::ns::test_hook
