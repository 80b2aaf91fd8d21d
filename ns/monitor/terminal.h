// The caller's terminals, as they were before the sandbox was made, put back when it has ended.
//
// The command shares its caller's terminal when cocoon's fds 0-2 are one (and, without
// --new-session, the controlling terminal through /dev/tty). An interactive agent puts it in raw
// mode while it runs; a hostile one leaves it without echo, with output stopped, another line
// discipline or in exclusive mode. The default seccomp policy refuses what no agent needs
// (ns/setup/seccomp_rules.h); this puts back what an agent may change. Not the window size: the user
// resizing the window during the run changes it the same way, and putting the old size back
// would leave the caller's shell with a wrong one after every such run.
// Runs in: caller, monitor, setup: the caller saves; set-up forgets the saved state; the monitor
//  restores.
#pragma once

#include <termios.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <optional>
#include <vector>

#include "base/sys_error.h"
#include "base/unique_fd.h"

namespace cocoon::ns {

class Terminals {
public:
    // Each distinct terminal among fds 0-2 and the controlling terminal: a copy of the fd and
    // its settings, line discipline and exclusive mode. No terminal: nothing.
    static Terminals save();
    // Puts each one back where it differs, and resumes output a TCOOFF stopped. Call once the
    // sandbox's processes are gone. Returns the first failure (step "terminal", the
    // terminal's name as path), if any; never blocks: SIGTTOU is blocked meanwhile, so a
    // cocoon in the background restores too.
    std::optional<SysError> restore();
    // The fds closed, nothing restored (the sandbox's processes drop the monitor's copies).
    void forget() { m_saved.clear(); }

private:
    struct Saved {
        UniqueFd fd;
        termios settings{};
        int discipline = 0;
        int exclusive = 0;
        dev_t rdev = 0;  // which terminal (0: fstat failed)
    };
    std::vector<Saved> m_saved;
};

}  // namespace cocoon::ns
