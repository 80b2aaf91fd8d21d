// The sandbox's PID 1: reaps every process, forwards signals to the command,
// and ends with the command. Runs inside the sandbox's PID namespace, with no
// capabilities.
// Runs in: setup, pid1: set-up computes PID 1's signal mask; PID 1 reaps.
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace cocoon::reaper {

// The signals PID 1 blocks before it forks the command (SIGCHLD and, with
// --forward-signals, the forwarded ones). The command restores the old mask.
sigset_t signals_to_block(bool forward);

// Runs until `command` exits and returns its wait status. Every other child
// (orphans reparented to PID 1) is reaped on the way. With `forward`, each
// forwarded signal that reaches PID 1 is sent to the command's process group
// (`command` leads its own group then). Expects signals_to_block(forward) to
// be blocked already.
int run(pid_t command, bool forward);

// For a PID namespace's init once the command has exited: SIGKILLs every
// other process of the namespace and reaps them all, so that their CPU time
// reaches this process's RUSAGE_CHILDREN (and so the monitor's). Left to the
// kernel, which reaps them as the init exits, it would be lost. Processes that
// changed to another uid (which PID 1 may not signal) still die then.
void end_leftovers();
// Whether this process has a child, running or not yet reaped (it reaps none).
bool has_children();

// The signals --forward-signals carries: SIGINT, SIGTERM, SIGHUP, SIGQUIT,
// SIGUSR1, SIGUSR2, SIGWINCH.
sigset_t forwarded_signals();

}  // namespace cocoon::reaper
