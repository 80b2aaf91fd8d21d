// The caller's terminal: saved before the clone, restored after the sandbox.
// Runs in: caller, monitor: the caller saves the terminal before the clone; the monitor restores
//  it.
#include "ns/monitor/terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cocoon::ns {

namespace {

// Field by field: the struct's padding is not part of the settings.
bool same(const termios& a, const termios& b)
{
    return a.c_line == b.c_line && a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
           a.c_lflag == b.c_lflag && std::memcmp(a.c_cc, b.c_cc, sizeof a.c_cc) == 0 &&
           ::cfgetispeed(&a) == ::cfgetispeed(&b) && ::cfgetospeed(&a) == ::cfgetospeed(&b);
}

}  // namespace

Terminals Terminals::save()
{
    Terminals out;
    // owned: fd itself is kept (else a copy), or closed with it.
    auto add = [&](int fd, UniqueFd&& owned) {
        Saved s;
        if (::tcgetattr(fd, &s.settings) != 0)
            return;
        struct stat st {};
        s.rdev = ::fstat(fd, &st) == 0 ? st.st_rdev : 0;
        for (const Saved& other : out.m_saved)
            if (s.rdev && other.rdev == s.rdev)
                return;  // the same terminal, saved already
        s.fd = owned ? std::move(owned) : UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
        if (!s.fd)
            return;
        if (::ioctl(fd, TIOCGETD, &s.discipline) != 0)
            s.discipline = -1;
        if (::ioctl(fd, TIOCGEXCL, &s.exclusive) != 0)
            s.exclusive = -1;
        out.m_saved.push_back(std::move(s));
    };
    for (int fd = 0; fd <= 2; ++fd)
        add(fd, UniqueFd());
    // Without --new-session the command reaches the controlling terminal through /dev/tty even
    // when no fd of it is one (ENXIO: there is none).
    if (UniqueFd tty{::open("/dev/tty", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)})
        add(tty.get(), std::move(tty));
    return out;
}

std::optional<SysError> Terminals::restore()
{
    if (m_saved.empty())
        return std::nullopt;
    // A process outside the terminal's foreground group that changes it gets SIGTTOU (and
    // stops) unless the signal is blocked or ignored; blocked, the change is made.
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    ::pthread_sigmask(SIG_BLOCK, &ttou, &old);
    std::optional<SysError> failed;
    auto check = [&](int fd, bool ok, const char* what) {
        // EIO: the terminal was hung up (closed), nothing left to restore.
        if (ok || errno == EIO || failed)
            return;
        const int err = errno;
        char name[64] = "";
        if (::ttyname_r(fd, name, sizeof name) != 0)
            name[0] = '\0';  // unnamed: the message says the rest
        failed = SysError("terminal", err, std::string("can't restore the ") + what + " of", name);
    };
    for (Saved& s : m_saved) {
        const int fd = s.fd.get();
        // First the line discipline: another one (N_NULL) takes none of the requests below.
        int discipline = 0;
        if (s.discipline >= 0 && ::ioctl(fd, TIOCGETD, &discipline) == 0 && discipline != s.discipline)
            check(fd, ::ioctl(fd, TIOCSETD, &s.discipline) == 0, "line discipline");
        // Output a TCOOFF stopped resumes (a ^S the user typed is not undone by this).
        check(fd, ::tcflow(fd, TCOON) == 0, "output flow");
        int exclusive = 0;
        if (s.exclusive == 0 && ::ioctl(fd, TIOCGEXCL, &exclusive) == 0 && exclusive)
            check(fd, ::ioctl(fd, TIOCNXCL) == 0, "exclusive mode");
        termios now{};
        if (::tcgetattr(fd, &now) == 0 && !same(now, s.settings))
            check(fd, ::tcsetattr(fd, TCSANOW, &s.settings) == 0, "settings");
    }
    m_saved.clear();
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return failed;
}

}  // namespace cocoon::ns
