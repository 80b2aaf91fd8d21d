// ns/monitor/setup_rules.h: the setup channel's table for one run. What set-up sends in order is
// admitted; each bad message in turn is refused with words for the monitor's one-line error.
#include "ns/monitor/setup_rules.h"

#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace cocoon::ns {
namespace {

std::vector<UniqueFd> fds(size_t n)
{
    std::vector<UniqueFd> out;
    for (size_t i = 0; i < n; ++i)
        out.emplace_back(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    return out;
}

Message listener(Wire::Kind kind, uint32_t index, size_t n = 2)
{
    return ListenersMsg{kind, index, fds(n)};
}

Message login_dir(uint32_t index)
{
    return LoginDirMsg{index, UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0))};
}

// Two --relay, --egress with two transparent ports, a login file, the reports, PID 2's pidfd.
SetupExpects everything()
{
    SetupExpects e;
    e.relays = 2;
    e.egress = true;
    e.transparent = 2;
    e.login_files = 1;
    e.namespaces = true;
    e.tmpfs = true;
    e.own_pidfd = true;
    return e;
}

class SetupRules : public ::testing::Test {
protected:
    std::string admit(Message msg) { return m_check.admit(msg, RateBound::Clock::now()); }
    // The check, after `count` messages of a run that sends everything, in order.
    void advance(size_t count)
    {
        std::vector<Message> run;
        run.push_back(NamespacesMsg{});
        run.push_back(listener(Wire::RelayListener, 0));
        run.push_back(listener(Wire::RelayListener, 1, 1));
        run.push_back(listener(Wire::EgressProxy, 0));
        run.push_back(listener(Wire::Transparent, 0, 1));
        run.push_back(listener(Wire::Transparent, 1, 1));
        run.push_back(listener(Wire::Resolver, 0, 1));
        run.push_back(TmpfsMsg{fds(3)});
        run.push_back(login_dir(0));
        run.push_back(PidfdMsg{false, UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0))});
        run.push_back(StatusMsg{9});
        for (size_t i = 0; i < count && i < run.size(); ++i)
            ASSERT_EQ(admit(std::move(run[i])), "") << "message " << i;
    }
    SetupCheck m_check{everything()};
};

TEST_F(SetupRules, WhatSetUpSendsInOrderIsAdmitted)
{
    advance(11);
    EXPECT_EQ(m_check.phase(), kCommandEnded);
}

TEST_F(SetupRules, ErrorsComeInAnyPhaseUpToThreeTimes)
{
    advance(3);
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(admit(ErrorMsg{0, "7", "why"}), "");
    EXPECT_EQ(m_check.phase(), kListening);  // an error moves nothing
    EXPECT_EQ(admit(ErrorMsg{0, "7", "why"}), "a set-up error message past its 3 times");
}

TEST_F(SetupRules, ARepeatOfAOnceOnlyMessage)
{
    advance(1);
    EXPECT_EQ(admit(NamespacesMsg{}), "a namespaces message past its 1 time");
}

TEST_F(SetupRules, AMessageOutOfPhase)
{
    advance(8);  // the tmpfs message: mounts
    EXPECT_EQ(admit(listener(Wire::Resolver, 0, 1)), "a --egress resolver socket message out of its phase");
    EXPECT_EQ(admit(NamespacesMsg{}), "a namespaces message out of its phase");
}

TEST_F(SetupRules, NothingButAnErrorAfterTheCommandStarts)
{
    advance(10);  // PID 2's pidfd
    EXPECT_EQ(admit(login_dir(0)), "a --login-file directory message out of its phase");
    EXPECT_EQ(admit(ErrorMsg{0, "13", "exec"}), "");
    EXPECT_EQ(admit(StatusMsg{9}), "");
    EXPECT_EQ(admit(StatusMsg{9}), "a status message out of its phase");  // after the end: nothing
    EXPECT_EQ(admit(ErrorMsg{0, "13", "exec"}), "a set-up error message out of its phase");
}

TEST_F(SetupRules, WrongFdCounts)
{
    EXPECT_EQ(admit(listener(Wire::RelayListener, 0, 3)), "a --relay listener message with 3 fds (it carries 1 to 2)");
    EXPECT_EQ(admit(listener(Wire::RelayListener, 0, 0)), "a --relay listener message with 0 fds (it carries 1 to 2)");
    EXPECT_EQ(admit(listener(Wire::Resolver, 0, 2)), "a --egress resolver socket message with 2 fds (it carries 1)");
    EXPECT_EQ(admit(TmpfsMsg{fds(0)}), "a tmpfs message with 0 fds (it carries 1 to 64)");
    EXPECT_EQ(admit(TmpfsMsg{fds(65)}), "a tmpfs message with 65 fds (it carries 1 to 64)");
}

TEST(SetupRulesPerRun, IndicesInRangeAndOnce)
{
    const auto now = RateBound::Clock::now();
    auto first = [&](Message msg) { return SetupCheck(everything()).admit(msg, now); };
    EXPECT_EQ(first(listener(Wire::RelayListener, 2)), "a --relay listener message for index 2 (the run has 2)");
    EXPECT_EQ(first(listener(Wire::Transparent, 7, 1)),
              "a --egress transparent listener message for index 7 (the run has 2)");
    EXPECT_EQ(first(listener(Wire::EgressProxy, 1)), "a --egress proxy listener message for index 1 (the run has 1)");
    EXPECT_EQ(first(listener(Wire::Resolver, 1, 1)), "a --egress resolver socket message for index 1 (the run has 1)");
    EXPECT_EQ(first(login_dir(1)), "a --login-file directory message for index 1 (the run has 1)");
    SetupCheck check(everything());
    EXPECT_EQ(check.admit(listener(Wire::RelayListener, 1), now), "");
    EXPECT_EQ(check.admit(listener(Wire::RelayListener, 1), now),
              "a --relay listener message for index 1 a second time");
    EXPECT_EQ(check.admit(listener(Wire::Transparent, 0, 1), now), "");
    EXPECT_EQ(check.admit(listener(Wire::Transparent, 0, 1), now),
              "a --egress transparent listener message for index 0 a second time");
}

TEST(SetupRulesPerRun, KindsThisRunDoesNotExpect)
{
    SetupCheck check{SetupExpects{}};  // no --relay, --egress, login file, report, cgroup leaf
    const auto now = RateBound::Clock::now();
    auto admit = [&](Message msg) { return check.admit(msg, now); };
    EXPECT_EQ(admit(listener(Wire::RelayListener, 0)), "a --relay listener message, which this run does not expect");
    EXPECT_EQ(admit(listener(Wire::EgressProxy, 0)),
              "a --egress proxy listener message, which this run does not expect");
    EXPECT_EQ(admit(listener(Wire::Transparent, 0, 1)),
              "a --egress transparent listener message, which this run does not expect");
    EXPECT_EQ(admit(listener(Wire::Resolver, 0, 1)),
              "a --egress resolver socket message, which this run does not expect");
    EXPECT_EQ(admit(NamespacesMsg{}), "a namespaces message, which this run does not expect");
    EXPECT_EQ(admit(TmpfsMsg{fds(1)}), "a tmpfs message, which this run does not expect");
    EXPECT_EQ(admit(login_dir(0)), "a --login-file directory message, which this run does not expect");
    EXPECT_EQ(admit(PidfdMsg{false, {}}), "a command's pidfd message, which this run does not expect");
    // The join helper's pidfd belongs to its own channel (ns/join.cc), never this one.
    EXPECT_EQ(admit(PidfdMsg{true, {}}), "a first process's pidfd message, which this run does not expect");
    EXPECT_EQ(admit(StatusMsg{9}), "");
}

TEST(SetupRulesPerRun, EveryKindHasOneRow)
{
    const std::vector<WireRule> rules = setup_rules(everything());
    for (Wire::Kind kind :
         {Wire::Error, Wire::Status, Wire::Namespaces, Wire::RelayListener, Wire::EgressProxy, Wire::Transparent,
          Wire::Resolver, Wire::FirstProcessPidfd, Wire::OwnPidfd, Wire::LoginDir, Wire::Tmpfs}) {
        size_t rows = 0;
        for (const WireRule& rule : rules)
            rows += rule.kind == kind;
        EXPECT_EQ(rows, 1U) << static_cast<char>(kind);
    }
    EXPECT_EQ(rules.size(), 11U);
}

// ARCHITECTURE.md's table of the messages ("Process model") says what the code does: a row per
// kind, each with the fds its rule carries.
TEST(SetupRulesPerRun, ArchitectureMdsTableMatchesTheCode)
{
    static const unsigned char bytes[] = {
#include "architecture_md.inc"
    };
    const std::string doc(reinterpret_cast<const char*>(bytes), sizeof bytes);
    size_t rows = 0;
    for (const WireRule& rule : setup_rules(everything())) {
        const std::string start = std::string("| `") + static_cast<char>(rule.kind) + "` |";
        const size_t at = doc.find("\n" + start);
        ASSERT_NE(at, std::string::npos) << "no row for kind " << static_cast<char>(rule.kind);
        const std::string line = doc.substr(at + 1, doc.find('\n', at + 1) - at - 1);
        const std::string fds =
            rule.max_fds ? std::to_string(rule.fds) + "-" + std::to_string(rule.max_fds) : std::to_string(rule.fds);
        EXPECT_EQ(line.substr(line.rfind("| ", line.size() - 3) + 2), fds + " |") << line;
        ++rows;
    }
    size_t doc_rows = 0;
    std::istringstream in(doc);
    for (std::string line; std::getline(in, line);)
        doc_rows +=
            line.rfind("| `", 0) == 0 && line.size() > 5 && line[4] == '`' && line.find("Msg") != std::string::npos;
    EXPECT_EQ(doc_rows, rows) << "ARCHITECTURE.md has a row for a kind the code does not know";
}

}  // namespace
}  // namespace cocoon::ns
