// The monitor's loop: one poll over named event sources, each a small object with one job
// (ns/monitor/*.h). A source's handler that throws ends the run with an error that names it.
// Runs in: monitor.
#pragma once

#include <functional>
#include <vector>

namespace cocoon::ns {

struct EventSource {
    const char* name;  // "stop signals", "login sync", ...: errors carry it
    std::function<int()> fd;  // what to poll now; -1: not now
    std::function<void(short revents)> ready;
};

// Polls every source (POLLIN) and calls the ready ones, in the vector's order (the stop path's
// sources first: nothing waits behind them in a round), until done() after a round.
// A source's SysError comes out as SysError(errno, "NAME: what it was doing").
void run_events(const std::vector<EventSource>& sources, const std::function<bool()>& done);

}  // namespace cocoon::ns
