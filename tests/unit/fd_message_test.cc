// Unit tests of relay/fd_message.h, the relay worker's and the monitor's messages: a message keeps
// exactly the fds its receiver has room for, never more; and the kernel rule the monitor's
// socket ends rely on (shut for reading, they take nothing from the worker).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "relay/fd_message.h"

namespace cocoon::relay {
namespace {

struct Msg {
    uint32_t kind = 0;
    uint32_t index = 0;
};

size_t count_open_fds()
{
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
        ++n;
    return n;
}

struct Pair {
    UniqueFd a, b;
    Pair()
    {
        int fds[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds), 0);
        a.reset(fds[0]);
        b.reset(fds[1]);
    }
};

// Sends msg with `count` fds (each a new /dev/null) in one SCM_RIGHTS, closing the sender's copies.
bool send_with_fds(int sock, const Msg& msg, size_t count)
{
    std::vector<UniqueFd> owned;
    std::vector<int> raw;
    for (size_t i = 0; i < count; ++i) {
        owned.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        raw.push_back(owned.back().get());
    }
    iovec iov{const_cast<Msg*>(&msg), sizeof msg};
    msghdr hdr{};
    hdr.msg_iov = &iov;
    hdr.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
    if (count > 0) {
        hdr.msg_control = control;
        hdr.msg_controllen = CMSG_SPACE(count * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&hdr);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(count * sizeof(int));
        std::memcpy(CMSG_DATA(c), raw.data(), count * sizeof(int));
    }
    return ::sendmsg(sock, &hdr, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof msg);
}

TEST(FdMessage, AMessageWithoutAnFdLeavesTheSlotEmpty)
{
    Pair pair;
    const size_t before = count_open_fds();
    ASSERT_TRUE(send_with_fds(pair.a.get(), Msg{7, 1}, 0));
    Msg msg;
    UniqueFd fd;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), 0);
    EXPECT_FALSE(fd);
    EXPECT_EQ(msg.kind, 7u);
    EXPECT_EQ(count_open_fds(), before);
}

TEST(FdMessage, TheOneFdExpectedIsKept)
{
    Pair pair;
    const size_t before = count_open_fds();
    ASSERT_TRUE(send_with_fds(pair.a.get(), Msg{1, 2}, 1));
    Msg msg;
    UniqueFd fd;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), 0);
    ASSERT_TRUE(fd);
    EXPECT_EQ(msg.index, 2u);
    EXPECT_EQ(count_open_fds(), before + 1);
    EXPECT_TRUE(::fcntl(fd.get(), F_GETFD) & FD_CLOEXEC);
    fd.reset();
    EXPECT_EQ(count_open_fds(), before);
}

// Security: a peer cannot fill the receiver's fd table with fds it did not ask for.
TEST(FdMessage, TwoFdsWhereOneIsExpectedAreBothClosedAndTheMessageRefused)
{
    Pair pair;
    const size_t before = count_open_fds();
    ASSERT_TRUE(send_with_fds(pair.a.get(), Msg{1, 2}, 2));
    Msg msg;
    UniqueFd fd;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), EBADMSG);
    EXPECT_FALSE(fd);
    EXPECT_EQ(count_open_fds(), before);
}

TEST(FdMessage, AnFdWhereNoneIsExpectedIsClosedAndTheMessageRefused)
{
    Pair pair;
    const size_t before = count_open_fds();
    ASSERT_TRUE(send_with_fds(pair.a.get(), Msg{1, 2}, 1));
    Msg msg;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, {}), EBADMSG);
    EXPECT_EQ(count_open_fds(), before);
}

TEST(FdMessage, ManyFdsPastTheControlBufferAreNotKept)
{
    Pair pair;
    const size_t before = count_open_fds();
    ASSERT_TRUE(send_with_fds(pair.a.get(), Msg{1, 2}, 8));
    Msg msg;
    UniqueFd fd;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), EBADMSG);
    EXPECT_FALSE(fd);
    EXPECT_EQ(count_open_fds(), before);
}

TEST(FdMessage, AMessageOfAnotherSizeIsRefused)
{
    Pair pair;
    const uint32_t small = 5;
    ASSERT_EQ(::send(pair.a.get(), &small, sizeof small, 0), static_cast<ssize_t>(sizeof small));
    Msg msg;
    UniqueFd fd;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), EBADMSG);
    pair.a.reset();
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), ECONNRESET);
}

// The monitor's ends of the worker's sockets are shut for reading before the worker exists: the
// kernel then queues nothing the worker sends there, so no fd of the worker's reaches the monitor,
// not even one the monitor would close unread (ns/monitor/relay_worker.cc, make_channels).
TEST(FdMessage, AnEndShutForReadingTakesNoMessageNorFd)
{
    Pair pair;
    ASSERT_EQ(::shutdown(pair.a.get(), SHUT_RD), 0);
    const size_t before = count_open_fds();
    errno = 0;
    EXPECT_FALSE(send_with_fds(pair.b.get(), Msg{1, 2}, 2));
    EXPECT_EQ(errno, EPIPE);
    EXPECT_EQ(count_open_fds(), before);
    // The other way still carries its fd.
    ASSERT_TRUE(send_with_fds(pair.a.get(), Msg{1, 2}, 1));
    Msg msg;
    UniqueFd fd;
    EXPECT_EQ(receive_msg(pair.b.get(), msg, std::span(&fd, 1)), 0);
    EXPECT_TRUE(fd);
}

}  // namespace
}  // namespace cocoon::relay
