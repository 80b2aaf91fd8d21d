// base/rate_bound.h: the token bucket behind --egress's bounds on refusal lines and the
// resolver's questions. Pure: the tests give the time.
#include "base/rate_bound.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace cocoon::relay {
namespace {

// The shared bound on refusal lines and the resolver's questions: a burst, then the rate; time
// that does not pass (or goes back) refills nothing; a long pause refills no more than the burst.
TEST(RateBound, ABurstThenTheRate)
{
    using Clock = RateBound::Clock;
    const Clock::time_point t0 = Clock::now();
    RateBound bound(200, 2000);
    int passed = 0;
    for (int i = 0; i < 5000; ++i)
        passed += bound.take(t0);
    EXPECT_EQ(passed, 2000);
    EXPECT_FALSE(bound.ready(t0));
    // 1 s later: 200 more, not one over.
    passed = 0;
    for (int i = 0; i < 5000; ++i)
        passed += bound.take(t0 + std::chrono::seconds(1));
    EXPECT_EQ(passed, 200);
    // The clock going back gives nothing; 5 ms (one token) gives one.
    EXPECT_FALSE(bound.take(t0));
    EXPECT_TRUE(bound.take(t0 + std::chrono::milliseconds(1005)));
    EXPECT_FALSE(bound.take(t0 + std::chrono::milliseconds(1005)));
    // An hour of quiet refills the burst, no more.
    passed = 0;
    for (int i = 0; i < 5000; ++i)
        passed += bound.take(t0 + std::chrono::hours(1));
    EXPECT_EQ(passed, 2000);
}

// Over 10 s of a flood asked every millisecond, the bound lets through the burst and the rate's
// worth, whatever the pattern.
TEST(RateBound, AFloodGetsTheBurstAndTheRateOverTime)
{
    using Clock = RateBound::Clock;
    const Clock::time_point t0 = Clock::now();
    RateBound bound(2000, 2000);
    uint64_t passed = 0;
    for (int ms = 0; ms < 10000; ++ms)
        for (int i = 0; i < 120; ++i)
            passed += bound.take(t0 + std::chrono::milliseconds(ms));
    EXPECT_GE(passed, 2000U + 2000U * 9.99 - 1);
    EXPECT_LE(passed, 2000U + 2000U * 10);
}

}  // namespace
}  // namespace cocoon::relay
