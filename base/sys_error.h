// SysError: a failed system call with its errno and what it was working on.
// Thrown by the wrappers in base/sys.h in every process of cocoon.
#pragma once

#include <stdexcept>
#include <string>

namespace cocoon {

// what() reads "<context>: <strerror(err)>", e.g. "mount(/newroot/usr): Permission denied".
class SysError : public std::runtime_error {
public:
    SysError(int err, const std::string& context);
    int code() const { return m_errno; }
    // What was being done, without the strerror part.
    const std::string& context() const { return m_context; }

private:
    int m_errno;
    std::string m_context;
};

// Setup errors that are not a failed call (bad input, a broken rule):
// what() is the message alone.
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Throws SysError(errno, context) when result is negative, else returns it.
inline long check(long result, const std::string& context)
{
    if (result < 0)
        throw SysError(errno, context);
    return result;
}

}  // namespace cocoon
