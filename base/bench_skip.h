// Start-up features a benchmark build can leave out, to measure what each costs, and what all of
// them cost together (tools/bench/features, docs/benchmarks.md). Only a build configured with
// -DCOCOON_BENCH_SKIPS=ON reads COCOON_BENCH_SKIP (features' names, comma-separated); in every
// other build, the one that ships among them, skips() is a constant false and the compiler
// drops the test.
// Runs in: caller, setup: asked before the clone and in set-up (a copy of the caller's memory).
#pragma once

#ifdef COCOON_BENCH_SKIPS
#include <cstdlib>
#include <string_view>
#endif

namespace cocoon::bench {

enum class Skip {
    Cgroup,  // the sandbox's own cgroup, made unasked (ns/monitor/cgroup.cc)
    TmpfsFit,  // sizing cocoon's own tmpfs mounts after set-up (mount/apply.cc)
    DevShm,  // --dev's /dev/shm tmpfs (mount/plan.cc)
    Terminal,  // saving the caller's terminals (ns/monitor/terminal.cc)
    ProcCovers,  // covering /proc/keys and the like (mount/apply.cc)
    NetnsBeside,  // the network namespace made beside set-up, not by the clone (ns/launch.cc)
    IpcBeside,  // the IPC namespace made by the first process in its wait, not by the clone (ns/launch.cc)
    SeccompBeside,  // the command's seccomp policy loaded by PID 1 in its wait, not by PID 2 (ns/launch.cc)
};

#ifdef COCOON_BENCH_SKIPS
inline bool skips(Skip s)
{
    static const char* const kNames[] = {"cgroup",      "tmpfs-fit",    "dev-shm",    "terminal",
                                         "proc-covers", "netns-beside", "ipc-beside", "seccomp-beside"};
    const char* asked = std::getenv("COCOON_BENCH_SKIP");
    for (std::string_view rest = asked ? asked : ""; !rest.empty();) {
        const size_t comma = rest.find(',');
        if (rest.substr(0, comma) == kNames[static_cast<int>(s)])
            return true;
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return false;
}
#else
constexpr bool skips(Skip)
{
    return false;
}
#endif

}  // namespace cocoon::bench
