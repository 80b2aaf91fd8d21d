// Unit tests of the setup channel (ns/channel.cc): the error contract across
// the process boundary (errno, step, text in; SysError or UsageError out) and
// the decoder's answer to datagrams our setup code never sends.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <random>
#include <string>

#include "base/sys_error.h"
#include "ns/channel.h"

namespace cocoon::ns {
namespace {

struct Pair {
    UniqueFd a, b;
    Pair()
    {
        int sv[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        a.reset(sv[0]);
        b.reset(sv[1]);
    }
};

Message round_trip(Message sent)
{
    Pair p;
    send_message(p.a.get(), sent);
    auto got = receive_message(p.b.get());
    EXPECT_TRUE(got);
    return std::move(*got);
}

TEST(Channel, ASysErrorKeepsItsErrnoAcrossTheBoundary)
{
    ErrorMsg sent = error_message(SysError(ENOENT, "Can't find source path /x"), "8 (mounts)");
    EXPECT_EQ(sent.err, ENOENT);
    EXPECT_EQ(sent.text, "Can't find source path /x");
    Message got = round_trip(sent);
    auto* err = std::get_if<ErrorMsg>(&got);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->err, ENOENT);
    EXPECT_EQ(err->step, "8 (mounts)");
    try {
        rethrow(*err);
        FAIL() << "rethrow returned";
    } catch (const SysError& e) {
        EXPECT_EQ(e.code(), ENOENT);
        EXPECT_STREQ(e.what(), "Can't find source path /x: No such file or directory");
    }
}

TEST(Channel, AUsageErrorStaysOneWithNoErrno)
{
    Message got = round_trip(error_message(UsageError("Invalid --userns 5: not a user namespace"), "2 (id maps)"));
    auto* err = std::get_if<ErrorMsg>(&got);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->err, 0);
    EXPECT_THROW(rethrow(*err), UsageError);
    try {
        rethrow(*err);
    } catch (const std::exception& e) {
        EXPECT_STREQ(e.what(), "Invalid --userns 5: not a user namespace");
    }
}

TEST(Channel, AnyOtherExceptionNamesItsStep)
{
    ErrorMsg msg = error_message(std::length_error("vector"), "9 (lock files)");
    EXPECT_EQ(msg.err, 0);
    EXPECT_EQ(msg.text, "setup step 9 (lock files): vector");
}

TEST(Channel, ALongErrorIsCutToOneDatagram)
{
    ErrorMsg sent{EACCES, "8 (mounts)", std::string(3 * kMaxDatagram, 'x')};
    Message got = round_trip(sent);
    auto* err = std::get_if<ErrorMsg>(&got);
    ASSERT_TRUE(err);
    EXPECT_EQ(err->err, EACCES);
    EXPECT_EQ(err->step, "8 (mounts)");
    EXPECT_EQ(err->text, std::string(kMaxDatagram - 1 - 4 - 1 - err->step.size(), 'x'));
}

TEST(Channel, StatusAndNamespacesRoundTrip)
{
    Message status = round_trip(StatusMsg{0x0f00});
    ASSERT_TRUE(std::holds_alternative<StatusMsg>(status));
    EXPECT_EQ(std::get<StatusMsg>(status).wait_status, 0x0f00);
    EXPECT_FALSE(std::get<StatusMsg>(status).answer);
    EXPECT_TRUE(std::get<StatusMsg>(round_trip(StatusMsg{0, true})).answer);
    NamespacesMsg ns;
    ns.inodes = {1, 2, 3, 4, 5, 6};
    Message got = round_trip(ns);
    ASSERT_TRUE(std::holds_alternative<NamespacesMsg>(got));
    EXPECT_EQ(std::get<NamespacesMsg>(got).inodes, ns.inodes);
}

TEST(Channel, FdsArriveOwned)
{
    Pair carried;
    PidfdMsg sent{true, UniqueFd(::dup(carried.a.get()))};
    const int sent_number = sent.fd.get();
    Message got = round_trip(std::move(sent));
    auto* pidfd = std::get_if<PidfdMsg>(&got);
    ASSERT_TRUE(pidfd);
    EXPECT_TRUE(pidfd->first_process);
    ASSERT_TRUE(pidfd->fd);
    EXPECT_NE(pidfd->fd.get(), sent_number);
    // The received fd is the same socket: a byte written through it arrives.
    ASSERT_EQ(::write(pidfd->fd.get(), "x", 1), 1);
    char c = 0;
    EXPECT_EQ(::read(carried.b.get(), &c, 1), 1);
    EXPECT_EQ(c, 'x');
}

TEST(Channel, ALoginDirectoryArrivesWithItsIndex)
{
    Pair carried;
    Message got = round_trip(LoginDirMsg{7, UniqueFd(::dup(carried.a.get()))});
    auto* dir = std::get_if<LoginDirMsg>(&got);
    ASSERT_TRUE(dir);
    EXPECT_EQ(dir->index, 7U);
    ASSERT_TRUE(dir->fd);
    ASSERT_EQ(::write(dir->fd.get(), "x", 1), 1);
    char c = 0;
    EXPECT_EQ(::read(carried.b.get(), &c, 1), 1);
}

TEST(Channel, DecoderRefusesALoginDirectoryOfAnyOtherShape)
{
    Pair p;
    auto fds = [&](size_t n) {
        std::vector<UniqueFd> out;
        for (size_t i = 0; i < n; ++i)
            out.emplace_back(::dup(p.a.get()));
        return out;
    };
    EXPECT_THROW(decode_message(std::string("D\0\0\0", 4), fds(1), false), ProtocolError);  // index short
    EXPECT_THROW(decode_message(std::string("D\0\0\0\0\0", 6), fds(1), false), ProtocolError);  // index long
    EXPECT_THROW(decode_message(std::string("D\0\0\0\0", 5), fds(2), false), ProtocolError);  // two fds
    EXPECT_THROW(decode_message(std::string("D\0\0\0\0", 5), fds(1), true), ProtocolError);  // truncated
    EXPECT_TRUE(std::holds_alternative<LoginDirMsg>(decode_message(std::string("D\0\0\0\0", 5), fds(1), false)));
}

TEST(Channel, DecoderRefusesWhatOurSetupNeverSends)
{
    auto refuses = [](const std::string& data, bool truncated = false) {
        EXPECT_THROW(decode_message(data, {}, truncated), ProtocolError) << "datagram of " << data.size() << " bytes";
    };
    refuses("");  // empty
    refuses("Z");  // unknown type
    refuses(std::string(1, '\0') + "abc");  // unknown type 0
    refuses("S");  // status, short
    refuses("S12");  // status, short
    refuses("S12345");  // status, oversized
    refuses("N" + std::string(47, '\0'));  // namespaces, one byte short
    refuses("N" + std::string(49, '\0'));  // namespaces, one byte over
    refuses("E");  // error without errno
    refuses(std::string("E\0\0\0\0", 5));  // error without a step length
    refuses(std::string("E\0\0\0\0\x09"
                        "abc",
                        9));  // step longer than the rest
    refuses(std::string("E\xff\xff\xff\xff\0", 6));  // negative errno
    refuses("L");  // a --relay listener without its index
    refuses("G12");  // an --egress proxy listener, index short
    refuses(std::string("R\0\0\0\0\0", 6));  // a resolver socket, index long
    refuses("P");  // a pidfd without its fd
    refuses(std::string("D\0\0\0\0", 5));  // a login directory without its fd
    refuses(std::string("S\0\0\0\0\0", 6), true);  // cut short by the kernel
    refuses(std::string("S\0\0\0\0", 5));  // a status without its answer flag
    refuses(std::string("S\0\0\0\0\2", 6));  // an answer flag that is neither 0 nor 1
    // Well-formed ones decode.
    EXPECT_TRUE(std::holds_alternative<StatusMsg>(decode_message(std::string("S\0\0\0\0\0", 6), {}, false)));
    Message e = decode_message(std::string("E\x02\0\0\0\x01"
                                           "7why",
                                           10),
                               {}, false);
    ASSERT_TRUE(std::holds_alternative<ErrorMsg>(e));
    EXPECT_EQ(std::get<ErrorMsg>(e).err, 2);
    EXPECT_EQ(std::get<ErrorMsg>(e).step, "7");
    EXPECT_EQ(std::get<ErrorMsg>(e).text, "why");
}

TEST(Channel, DecoderRefusesFdsWhereNoneBelong)
{
    Pair p;
    std::vector<UniqueFd> fds;
    fds.emplace_back(::dup(p.a.get()));
    EXPECT_THROW(decode_message(std::string("S\0\0\0\0", 5), std::move(fds), false), ProtocolError);
    std::vector<UniqueFd> two;
    two.emplace_back(::dup(p.a.get()));
    two.emplace_back(::dup(p.a.get()));
    EXPECT_THROW(decode_message("P", std::move(two), false), ProtocolError);
}

// Each listener kind has its own kind byte and carries its index: the monitor infers nothing from
// order (ns/monitor/setup_rules.h checks kind, index and fd count).
TEST(Channel, EachListenerKindArrivesTyped)
{
    for (Wire::Kind kind : {Wire::RelayListener, Wire::EgressProxy, Wire::Transparent, Wire::Resolver}) {
        Pair carried;
        std::vector<UniqueFd> fds;
        fds.emplace_back(::dup(carried.a.get()));
        fds.emplace_back(::dup(carried.a.get()));
        Message got = round_trip(ListenersMsg{kind, 3, std::move(fds)});
        auto* listeners = std::get_if<ListenersMsg>(&got);
        ASSERT_TRUE(listeners) << kind;
        EXPECT_EQ(listeners->kind, kind);
        EXPECT_EQ(kind_of(got), kind);
        EXPECT_EQ(listeners->index, 3U);
        EXPECT_EQ(fd_count(got), 2U);
    }
    EXPECT_EQ(kind_of(StatusMsg{0}), Wire::Status);
    EXPECT_EQ(kind_of(PidfdMsg{false, {}}), Wire::OwnPidfd);
    EXPECT_EQ(kind_of(PidfdMsg{true, {}}), Wire::FirstProcessPidfd);
    EXPECT_EQ(fd_count(LoginDirMsg{}), 1U);
    EXPECT_EQ(fd_count(NamespacesMsg{}), 0U);
}

// Security: a refused datagram's fds are closed, never kept: the other end of a pipe they carried
// sees its last writer gone.
TEST(Channel, ARefusedDatagramClosesItsFds)
{
    const std::string refused[] = {std::string("S\0\0\0\0", 5), std::string("D\0\0\0\0", 5), "P", "\x7f",
                                   std::string("L\0\0\0\0", 5)};
    for (size_t i = 0; i < std::size(refused); ++i) {
        int pipe[2];
        ASSERT_EQ(::pipe2(pipe, O_CLOEXEC), 0);
        UniqueFd read_end(pipe[0]);
        std::vector<UniqueFd> fds;
        fds.emplace_back(pipe[1]);
        fds.emplace_back(::dup(pipe[1]));
        EXPECT_THROW(decode_message(refused[i], std::move(fds), i == std::size(refused) - 1), ProtocolError)
            << refused[i];
        char c;
        EXPECT_EQ(::read(read_end.get(), &c, 1), 0) << refused[i] << ": an fd it carried is still open";
    }
}

// Security: a socket the sandbox sends lingers no more once received, so the monitor's close of a
// refused one never blocks in the kernel (SECURITY.md, "The setup channel").
TEST(Channel, AReceivedSocketLingersNoMore)
{
    UniqueFd tcp(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const linger slow{1, 100000};
    ASSERT_EQ(::setsockopt(tcp.get(), SOL_SOCKET, SO_LINGER, &slow, sizeof slow), 0);
    std::vector<UniqueFd> fds;
    fds.push_back(std::move(tcp));
    Message got = round_trip(ListenersMsg{Wire::Resolver, 0, std::move(fds)});
    auto* listeners = std::get_if<ListenersMsg>(&got);
    ASSERT_TRUE(listeners);
    ASSERT_EQ(listeners->fds.size(), 1U);
    linger now{};
    socklen_t len = sizeof now;
    ASSERT_EQ(::getsockopt(listeners->fds[0].get(), SOL_SOCKET, SO_LINGER, &now, &len), 0);
    EXPECT_EQ(now.l_onoff, 0);
}

// More fds than a sender of ours puts in a datagram all arrive, to be disarmed and closed: none is
// closed by the kernel inside recvmsg (MSG_CTRUNC), where the receiver could not disarm it.
TEST(Channel, ADatagramOfTheKernelsMostFdsIsRefusedWhole)
{
    Pair p;
    UniqueFd one(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const std::vector<int> fds(253, one.get());
    std::string data = "T";
    iovec iov{data.data(), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    ASSERT_EQ(::sendmsg(p.a.get(), &msg, 0), 1);
    auto got = receive_message(p.b.get());  // the table, not the decoder, bounds a tmpfs message's fds
    ASSERT_TRUE(got);
    EXPECT_EQ(fd_count(*got), 253U);
}

TEST(Channel, GarbageNeverCrashesTheDecoder)
{
    std::mt19937 rng(42);
    int refused = 0;
    for (int i = 0; i < 20000; ++i) {
        std::string data(rng() % 80, '\0');
        for (char& c : data)
            c = static_cast<char>(rng());
        if (!data.empty() && i % 2)
            data[0] = "ESNLPOD"[rng() % 7];  // known types with garbage bodies
        try {
            decode_message(data, {}, false);
        } catch (const ProtocolError&) {
            ++refused;
        }
    }
    EXPECT_GT(refused, 10000);
}

TEST(Channel, AnOversizedDatagramIsReportedNotCut)
{
    Pair p;
    std::string big(kMaxDatagram + 100, 'E');
    ASSERT_EQ(::send(p.a.get(), big.data(), big.size(), 0), static_cast<ssize_t>(big.size()));
    EXPECT_THROW(receive_message(p.b.get()), ProtocolError);
}

TEST(Channel, QueuedReceiveNeverBlocks)
{
    Pair p;
    EXPECT_FALSE(receive_queued_message(p.b.get()));  // nothing queued
    send_message(p.a.get(), StatusMsg{7});
    auto got = receive_queued_message(p.b.get());
    ASSERT_TRUE(got);
    EXPECT_EQ(std::get<StatusMsg>(*got).wait_status, 7);
    p.a.reset();
    EXPECT_FALSE(receive_queued_message(p.b.get()));  // EOF
    EXPECT_FALSE(receive_message(p.b.get()));  // EOF, blocking
}

}  // namespace
}  // namespace cocoon::ns
