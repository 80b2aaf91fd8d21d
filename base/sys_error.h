// SysError: a failed system call with its errno, what it was working on and the step it failed
// in. Thrown by the wrappers in base/sys.h in every process of cocoon; the monitor's warnings
// after set-up are built from it (Warnings).
// Runs in: caller, monitor, setup, pid1, pid2, worker: the error types every process of cocoon
//  throws.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace cocoon {

// what() reads "<context>[ <path>]: <strerror(err)>", e.g. "mount(/newroot/usr): Permission
// denied", or with a path, "--cgroup-parent /x: No such file or directory". The step (a set-up
// step's name, or "login sync", "cgroup", "terminal", "report" after it) is not part of what():
// set-up's text stays bwrap's. A warning line starts with it (Warnings).
class SysError : public std::runtime_error {
public:
    SysError(int err, const std::string& context) : SysError("", err, context) {}
    SysError(std::string step, int err, const std::string& context, std::string path = "");
    int code() const { return m_errno; }
    // What was being done, without the path and the strerror part.
    const std::string& context() const { return m_context; }
    const std::string& step() const { return m_step; }
    const std::string& path() const { return m_path; }

private:
    int m_errno;
    std::string m_context, m_step, m_path;
};

// Setup errors that are not a failed call (bad input, a broken rule): what() is the message alone.
// Where bwrap has a message for the same mistake, what() is bwrap's text byte for byte (programs
// match it), and what cocoon adds (the option, the fd, the size) is detail(): said after it only
// when invoked as cocoon (tools/cocoon/entry.cc).
class UsageError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    UsageError(const std::string& text, std::string detail) : std::runtime_error(text), m_detail(std::move(detail)) {}
    const std::string& detail() const { return m_detail; }

private:
    std::string m_detail;
};

// Throws SysError(errno, context) when result is negative, else returns it.
inline long check(long result, const std::string& context)
{
    if (result < 0)
        throw SysError(errno, context);
    return result;
}

// The monitor's warnings: what fails after set-up does not end the run, and is said in one line
// on stderr, "<log_prefix>cocoon: <step>: <what()>[; <outcome>]" (the outcome: what the user is
// left with, e.g. "SRC keeps its last saved version").
class Warnings {
public:
    explicit Warnings(std::string log_prefix = "") : m_log_prefix(std::move(log_prefix)) {}
    void say(const SysError& error, const std::string& outcome = "");
    // A line that is no failed call (a refusal).
    void say(const std::string& step, const std::string& text) const;
    // The last failure said: what a test asserts.
    const std::optional<SysError>& last() const { return m_last; }

private:
    std::string m_log_prefix;
    std::optional<SysError> m_last;
};

}  // namespace cocoon
