// The e2e tests' own binaries: this test binary run as a helper inside a sandbox (a mode chosen
// by an environment variable, before any test), and the probes built beside it. Test process.
#pragma once

#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/e2e/e2e.h"

namespace cocoon::test {

// A binary built beside this test binary (the probes, cocoon_steptrace), by its file name.
inline std::string sibling_binary(const std::string& name)
{
    const std::string self = self_exe();
    return self.substr(0, self.rfind('/') + 1) + name;
}

// Helper mode: where the environment variable `env` is set, this process is not a test run but a
// helper that a test bound into a sandbox (or ran) with that variable: `run` gets the variable's
// value, and the process exits with what `run` returns, stdout flushed, before main and any test.
// SIGPIPE is ignored: a helper writes to sockets whose peer may be gone. Used as a namespace-scope
// initializer, `[[maybe_unused]] const bool kClient = helper_mode("COCOON_E2E_...", run_client);`,
// so the check runs as the binary starts; false where the variable is not set.
inline bool helper_mode(const char* env, int (*run)(const std::string& value))
{
    const char* value = std::getenv(env);
    if (!value)
        return false;
    ::signal(SIGPIPE, SIG_IGN);
    const int code = run(value);
    std::fflush(stdout);
    std::_Exit(code);
}

}  // namespace cocoon::test
