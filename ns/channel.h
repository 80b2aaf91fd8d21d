// The setup channel: typed messages from the sandbox's setup processes (PID 1,
// and PID 2 until it execs) to the monitor, over one SOCK_SEQPACKET pair.
#pragma once

#include <optional>
#include <string>
#include <variant>

namespace cocoon::ns {

// Setup failed: "what failed: why", printed by the monitor as is.
struct ErrorMsg {
    std::string text;
};
// The command ended with this wait status (sent by PID 1 before it exits).
struct StatusMsg {
    int wait_status;
};
using Message = std::variant<ErrorMsg, StatusMsg>;

// Best effort: a dead monitor is not the sender's problem.
void send_message(int sock, const Message& msg);

// One message; nullopt at EOF (every sender is gone) or when nothing is
// queued on a non-blocking read.
std::optional<Message> receive_message(int sock, bool blocking);

} // namespace cocoon::ns
