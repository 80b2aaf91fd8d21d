// SysError formatting, and the monitor's warning lines.
// Runs in: caller, monitor, setup, pid1, pid2, worker: the error types every process of cocoon
//  throws.
#include "base/sys_error.h"

#include <unistd.h>

#include <cstring>

#include "base/sys.h"

namespace cocoon {

SysError::SysError(std::string step, int err, const std::string& context, std::string path)
    : std::runtime_error(context + (path.empty() ? "" : " " + path) + ": " + std::strerror(err)), m_errno(err),
      m_context(context), m_step(std::move(step)), m_path(std::move(path))
{
}

void Warnings::say(const SysError& error, const std::string& outcome)
{
    m_last = error;
    say(error.step(), error.what() + (outcome.empty() ? "" : "; " + outcome));
}

void Warnings::say(const std::string& step, const std::string& text) const
{
    sys::write_all(STDERR_FILENO, m_log_prefix + "cocoon: " + step + ": " + text + "\n");
}

}  // namespace cocoon
