// base/wire_rules.h: a boundary's table decides each message by its kind, its phase, its count or
// rate, and its fds; anything else is refused with words for the sender's kill line.
#include "base/wire_rules.h"

#include <gtest/gtest.h>

#include <chrono>

namespace cocoon {
namespace {

constexpr uint32_t kEarly = 1, kLate = 2;
constexpr WireRule kRules[] = {
    {1, "once", kEarly, 1, 0, 0},    {2, "listener", kEarly | kLate, 3, 0, 1},
    {3, "request", kLate, 0, 10, 0}, {4, "tmpfs", kEarly, 2, 0, 1, 64},
    {5, "resolver", 0, 1, 0, 1},  // a row this run does not expect
};

TEST(WireRules, EachRuleIsEnforced)
{
    WireCheck check(kRules);
    const auto t = RateBound::Clock::now();
    EXPECT_EQ(check.admit(1, kEarly, 0, t), "");
    EXPECT_EQ(check.admit(1, kEarly, 0, t), "a once message past its 1 time");
    EXPECT_EQ(check.admit(1, kLate, 0, t), "a once message out of its phase");
    EXPECT_EQ(check.admit(2, kLate, 0, t), "a listener message with 0 fds (it carries 1)");
    EXPECT_EQ(check.admit(2, kLate, 2, t), "a listener message with 2 fds (it carries 1)");
    EXPECT_EQ(check.admit(7, kLate, 0, t), "a message of an unknown kind (7)");
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(check.admit(2, kLate, 1, t), "");
    EXPECT_EQ(check.admit(2, kEarly, 1, t), "a listener message past its 3 times");
    EXPECT_EQ(check.count(2), 3u);
    EXPECT_EQ(check.count(1), 1u);
}

TEST(WireRules, AnFdRangeAndARowNotExpected)
{
    WireCheck check(kRules);
    const auto t = RateBound::Clock::now();
    EXPECT_EQ(check.admit(4, kEarly, 0, t), "a tmpfs message with 0 fds (it carries 1 to 64)");
    EXPECT_EQ(check.admit(4, kEarly, 65, t), "a tmpfs message with 65 fds (it carries 1 to 64)");
    EXPECT_EQ(check.admit(4, kEarly, 1, t), "");
    EXPECT_EQ(check.admit(4, kEarly, 64, t), "");
    EXPECT_EQ(check.admit(4, kEarly, 64, t), "a tmpfs message past its 2 times");
    EXPECT_EQ(check.admit(5, kEarly, 1, t), "a resolver message, which this run does not expect");
    EXPECT_EQ(check.count(5), 0u);
}

TEST(WireRules, ARateAdmitsItsBurstThenRefills)
{
    WireCheck check(kRules);
    const auto t = RateBound::Clock::now();
    for (int i = 0; i < 20; ++i)  // burst: 2 s of 10 a second
        ASSERT_EQ(check.admit(3, kLate, 0, t), "") << i;
    EXPECT_EQ(check.admit(3, kLate, 0, t), "a request message flood, past 10 a second");
    EXPECT_EQ(check.admit(3, kLate, 0, t + std::chrono::milliseconds(150)), "");
}

}  // namespace
}  // namespace cocoon
