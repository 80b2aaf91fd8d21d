// Test-only: a relay worker that misbehaves once confined, as one taken over by a parsing bug
// would (tests/e2e/hostile_worker_test.cc). Compiled only with -DCOCOON_TEST_HOOKS=ON, which no
// shipped build sets; runs in the confined worker.
// Runs in: monitor, worker: test builds only: the worker misbehaves; the monitor reads the variable
//  that arms it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace cocoon::relay::test_hook {

// The environment variable that arms the hook: "MODE:DELAY_MS[:PID]". The monitor reads it and
// passes it in the worker's options (relay/worker_config.h): the worker's environment is empty.
//   two-fds      sendmsg two fds on each socket to the monitor, then a request of a wrong size
//   bad-kind     a request of the right size and an unknown kind
//   linger:PORT  a TCP socket the monitor connected to 127.0.0.1:PORT (an upstream request for
//                an allowed address), its send queue full and SO_LINGER {1, 100000}, sent with
//                SCM_RIGHTS on each socket to the monitor
//   connect-host:PORT  socket(2) and connect(2) to 127.0.0.1:PORT, the host's
//   ask-upstream:PORT  upstream requests the monitor must refuse: 127.0.0.1:PORT as a literal,
//                a name off the allowlist, an allowed name at 127.0.0.1 and at 169.254.169.254;
//                one line per answer
//   flood        refused upstream requests as fast as they are answered, until it is killed
//   stop:PID     SIGSTOP by kill(2) and tgkill(2) to the monitor (its pid as cocoon knew it before
//                the clone), to getppid() when not 0, and to PID
//   kill-all     kill(-1, SIGKILL)
//   rewrite-log  lseek(--egress-log, 0, SEEK_SET) and a write: O_APPEND puts it at the end
//   rewrite-log-flags  fcntl(--egress-log, F_SETFL, O_WRONLY) to clear O_APPEND: outside the
//                allowlist (the worker dies of it)
//   rewrite-log-dup  dup(--egress-log), whose copy F_SETFL could clear: outside the allowlist
//   stderr-flood 5000 lines to stderr at once, then a second later one that says so
inline constexpr const char* kEnv = "COCOON_TEST_WORKER_HOOK";

struct Hook {
    std::string mode;
    int delay_ms = 0;
    long arg = 0;
    pid_t monitor = 0;
};

// The spec as the worker's options carry it; nullopt when empty.
std::optional<Hook> parse(const std::string& spec, pid_t monitor);

// The worker's fds: its control socket, its answer socket, its request pipe, its --egress-log.
struct Fds {
    int control, answers, requests, log;
};

// Does what the mode says, writing one line per attempt to stderr ("cocoon: relay worker: test
// hook: ...").
void misbehave(const Hook& hook, const Fds& fds, const std::string& prefix);

}  // namespace cocoon::relay::test_hook
