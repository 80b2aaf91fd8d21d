// SysError formatting. Pure.
#include "base/sys_error.h"

#include <cstring>

namespace cocoon {

SysError::SysError(int err, const std::string& context)
    : std::runtime_error(context + ": " + std::strerror(err)), m_errno(err), m_context(context)
{
}

}  // namespace cocoon
