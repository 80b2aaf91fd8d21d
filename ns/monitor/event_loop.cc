// The monitor's one poll over its sources.
// Runs in: monitor.
#include "ns/monitor/event_loop.h"

#include <poll.h>

#include <cerrno>
#include <string>

#include "base/sys_error.h"

namespace cocoon::ns {

void run_events(const std::vector<EventSource>& sources, const std::function<bool()>& done)
{
    std::vector<pollfd> fds(sources.size());
    while (!done()) {
        for (size_t i = 0; i < sources.size(); ++i)
            fds[i] = {sources[i].fd(), POLLIN, 0};
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR)
                continue;
            throw SysError(errno, "poll");
        }
        for (size_t i = 0; i < sources.size(); ++i) {
            if (!fds[i].revents)
                continue;
            try {
                sources[i].ready(fds[i].revents);
            } catch (const SysError& e) {
                // The source is the step of what fails in it, and its name starts the text.
                throw SysError(sources[i].name, e.code(), std::string(sources[i].name) + ": " + e.context(), e.path());
            }
        }
    }
}

}  // namespace cocoon::ns
