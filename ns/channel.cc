// Setup channel encoding: one datagram per message, a type byte then the body.
// Used by the monitor (receiving) and the sandbox's setup processes (sending).
#include "ns/channel.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace cocoon::ns {
namespace {

constexpr char kError = 'E';
constexpr char kStatus = 'S';

} // namespace

void send_message(int sock, const Message& msg)
{
    std::string data;
    if (auto* err = std::get_if<ErrorMsg>(&msg)) {
        data = kError + err->text;
    } else {
        int status = std::get<StatusMsg>(msg).wait_status;
        data.assign(1, kStatus);
        data.append(reinterpret_cast<const char*>(&status), sizeof status);
    }
    ::send(sock, data.data(), data.size(), MSG_NOSIGNAL);
}

std::optional<Message> receive_message(int sock, bool blocking)
{
    char buf[4096];
    for (;;) {
        ssize_t n = ::recv(sock, buf, sizeof buf, blocking ? 0 : MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return std::nullopt;
        if (buf[0] == kStatus && n == 1 + sizeof(int)) {
            int status;
            std::memcpy(&status, buf + 1, sizeof status);
            return StatusMsg{status};
        }
        if (buf[0] == kError)
            return ErrorMsg{std::string(buf + 1, static_cast<size_t>(n - 1))};
        // Anything else is not from our setup code; ignore it.
    }
}

} // namespace cocoon::ns
