// The setup channel: typed messages from the sandbox's setup processes (PID 1,
// and PID 2 until it execs) to the monitor, over one SOCK_SEQPACKET pair.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::ns {

// Setup failed: "what failed: why", printed by the monitor as is.
struct ErrorMsg {
    std::string text;
};
// The command ended with this wait status (sent by PID 1 before it exits).
struct StatusMsg {
    int wait_status;
};
// The relay listeners, made in the sandbox's network namespace (SCM_RIGHTS).
struct ListenersMsg {
    std::vector<UniqueFd> fds;
};
// The sandbox's namespaces for --info-fd/--json-status-fd, as the first
// process sees them: the monitor cannot read /proc/PID/ns of a process that
// made itself non-dumpable, so the sandbox reports them itself.
struct NamespacesMsg {
    std::array<unsigned long long, 6> inodes{};  // kReportedNamespaces order; 0: not new
};
// --userns/--pidns: a pidfd from the helper that joins the namespaces
// (ns/join.cc), over a channel of its own: the sandbox's first process
// (first_process), or the extra fork --pidns with --unshare-pid needs, to reap.
struct PidfdMsg {
    bool first_process = false;
    UniqueFd fd;
};
using Message = std::variant<ErrorMsg, StatusMsg, ListenersMsg, NamespacesMsg, PidfdMsg>;

// bwrap's report names these namespaces, in this order, when they are new.
struct ReportedNamespace {
    unsigned long long clone_flag;
    const char* name;
};
extern const std::array<ReportedNamespace, 6> kReportedNamespaces;

// Best effort for errors and status: a dead monitor is not the sender's
// problem. Sending listeners throws SysError when it fails.
void send_message(int sock, const Message& msg);

// One message; nullopt at EOF (every sender is gone) or when nothing is
// queued on a non-blocking read.
std::optional<Message> receive_message(int sock, bool blocking);

}  // namespace cocoon::ns
