// The setup channel: typed messages from the sandbox's setup processes (the
// first process, PID 1 after it, and PID 2 until it execs) to the monitor, over
// one SOCK_SEQPACKET pair. Each message kind has its own kind byte on the wire
// (Wire below): nothing is inferred from order or count. What may come when,
// how often and with how many fds is the monitor's table
// (ns/monitor/setup_rules.h); this file only encodes and decodes.
// Runs in: caller, monitor, setup, pid1, pid2: set-up, PID 1 and PID 2 send on the setup channel;
//  the monitor decodes it; the caller reads the join helper's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/unique_fd.h"

namespace cocoon::ns {

// The kind byte each message starts with on the wire.
struct Wire {
    enum Kind : uint8_t {
        Error = 'E',
        Status = 'S',
        Namespaces = 'N',
        RelayListener = 'L',  // --relay's, with its index
        EgressProxy = 'G',  // --egress's proxy
        Transparent = 'A',  // --egress's transparent listener for one port, with the port's index
        Resolver = 'R',  // --egress's resolver socket
        FirstProcessPidfd = 'P',  // the join helper's channel only (ns/join.cc)
        OwnPidfd = 'O',  // PID 2's own pidfd; on the join channel, the extra fork's
        LoginDir = 'D',
        Tmpfs = 'T',
    };
};

// Setup failed in the sandbox. The monitor rebuilds the exception: a
// SysError(step, err, text) when err is set (text is its context, without the
// strerror part), else a UsageError(text). step names the launch step, for
// failures that are neither (their text is prefixed with it).
struct ErrorMsg {
    int err = 0;
    std::string step;
    std::string text;
};
// The command ended with this wait status (sent by PID 1 before it exits). answer: PID 1 is
// about to kill what the command left running, and waits (bounded) for the monitor's answer
// (kLeftoversAnswer on the channel) before it does: a process left behind may be writing a
// --login-file DEST, which the kill would cut short, so the monitor first reads what DEST became
// and saves nothing later (LoginFiles::stop_begins).
struct StatusMsg {
    int wait_status;
    bool answer = false;
};
constexpr char kLeftoversAnswer = 'K';
// The monitor's one message to the first process about the command's cgroup, where the sandbox's
// cgroup is made while set-up runs (a cgroup nobody asked for: ns/launch.cc). It carries the leaf
// (the fd PID 2 is cloned into) and its cgroup.procs, or no fd where no cgroup was made; and
// whether PID 2 sends the monitor its pidfd (ns/monitor/command_watch.h). Where the network
// namespace is made beside set-up too (LaunchContext::netns_beside), netns says how it came out:
// made (its fd last; lo_up: whether lo came up in it), or not (the helper failed: the first process
// makes it itself).
struct CommandCgroupMsg {
    static constexpr uint8_t kNetnsFd = 1, kNetnsMakeIt = 2;
    char kind = 'C';
    uint8_t send_pidfd = 0;
    uint8_t netns = 0;  // 0: not made beside set-up
    uint8_t lo_up = 0;
};
// Listeners for the relay worker, made in the sandbox's network namespace
// (SCM_RIGHTS). kind: Wire::RelayListener (index: the --relay's, in
// command-line order), EgressProxy, Transparent (index: the port's, in the
// plan's transparent_ports) or Resolver (index 0). The count of fds is the
// monitor's table's to check (127.0.0.1 and, where the kernel has IPv6, ::1).
struct ListenersMsg {
    Wire::Kind kind = Wire::RelayListener;
    uint32_t index = 0;
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
// --login-file: DEST's directory in the sandbox (an O_PATH fd of its tmpfs),
// for the login file at `index` in command-line order.
struct LoginDirMsg {
    uint32_t index = 0;
    UniqueFd fd;
};
// --json-status-fd: the tmpfs mounts set-up made (O_PATH fds of their roots),
// for the report's "tmpfs-peak-bytes" (fstatfs; no path is walked). At most
// kMaxTmpfsReported of them, in one message.
struct TmpfsMsg {
    std::vector<UniqueFd> fds;
};
constexpr size_t kMaxTmpfsReported = 64;
using Message = std::variant<ErrorMsg, StatusMsg, ListenersMsg, NamespacesMsg, PidfdMsg, LoginDirMsg, TmpfsMsg>;

// bwrap's report names these namespaces, in this order, when they are new.
struct ReportedNamespace {
    unsigned long long clone_flag;
    const char* name;
};
extern const std::array<ReportedNamespace, 6> kReportedNamespaces;

// The ErrorMsg for an exception thrown during `step`: errno and context of a
// SysError, the text of anything else.
ErrorMsg error_message(const std::exception& e, const std::string& step);

// Throws the exception an ErrorMsg describes (see ErrorMsg).
[[noreturn]] void rethrow(const ErrorMsg& msg);

// The message's kind byte, and the fds it carries (for the monitor's table).
Wire::Kind kind_of(const Message& msg);
size_t fd_count(const Message& msg);

// Best effort for errors and status: a dead monitor is not the sender's
// problem. Sending listeners throws SysError when it fails.
void send_message(int sock, const Message& msg);

// Blocks for one message; nullopt at EOF (every sender is gone).
std::optional<Message> receive_message(int sock);

// One message if one is queued, else nullopt at once (also at EOF: poll's
// POLLHUP tells the two apart).
std::optional<Message> receive_queued_message(int sock);

// The largest datagram a sender may write: an error's text is cut to fit.
constexpr size_t kMaxDatagram = 4096;

// Decodes one datagram (pure; unit-tested). fds: what SCM_RIGHTS carried.
// truncated: the kernel cut the datagram or its fds (MSG_TRUNC, MSG_CTRUNC).
// Throws ProtocolError for anything our setup code does not send: a
// truncated, short, oversized or unknown datagram, fds where none belong, or
// other than one fd where one belongs. How many fds a listener or tmpfs message
// may carry is the monitor's table's to say (ns/monitor/setup_rules.h).
Message decode_message(std::string_view data, std::vector<UniqueFd> fds, bool truncated);

class ProtocolError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace cocoon::ns
