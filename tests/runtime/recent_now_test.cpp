#include "hourglass/recent_now.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

constexpr time_point t0 = time_point{} + 1h;

TEST(RecentNow, TheCountersRateComesFromTwoReadingsAtLeastAMillisecondApart) {
  // 2.5 GHz: 2,560 ticks per 1024 ns.
  EXPECT_EQ(detail::tsc_ticks_per_1024ns(1'000, t0, 1'000 + 5'000'000, t0 + 2ms), 2'560u);
  EXPECT_EQ(detail::tsc_ticks_per_1024ns(1'000, t0, 1'000 + 2'500'000, t0 + 1ms), 2'560u);
  EXPECT_EQ(detail::tsc_ticks_per_1024ns(1'000, t0, 1'000 + 2'000'000, t0 + 999us), 0u);  // too close to tell
  EXPECT_EQ(detail::tsc_ticks_per_1024ns(9'000, t0, 1'000, t0 + 5ms), 0u);                // counter went back
}

TEST(RecentNow, AReadingIsYoungOnlyWithinItsAgeAndAKnownRate) {
  const std::uint64_t rate = 2'560;  // 2.5 ticks per ns
  EXPECT_TRUE(detail::tsc_reading_is_young(100, 100, 1us, rate));
  EXPECT_TRUE(detail::tsc_reading_is_young(100, 100 + 2'499, 1us, rate));
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 100 + 2'500, 1us, rate));
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 99, 1us, rate));       // another core's counter, behind
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 100, 1us, 0));         // rate not known yet
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 100, 0ns, rate));      // no age allowed
  EXPECT_TRUE(detail::tsc_reading_is_young(0, 2'499'999, 1ms, rate));   // wide windows do not overflow
  EXPECT_FALSE(detail::tsc_reading_is_young(0, 2'500'000, 1ms, rate));
}

TEST(RecentNow, AManualClockIsReadEveryTime) {
  manual_clock clk;
  const time_point a = recent_now(clk, 1s);
  EXPECT_EQ(a, clk.now());
  clk.advance(1ns);
  EXPECT_EQ(recent_now(clk, 1s), a + 1ns);
}

// Real time, so with slack: a reading is never later than the clock, and
// never older than its age allows. Run long enough (> 1 ms) for the rate to
// be learned, so reuse really happens where the machine supports it.
TEST(RecentNow, TheRealClockIsNeverAheadAndNeverOlderThanItsAge) {
  steady_clock_service& clk = real_clock();
  constexpr auto max_age = 1us;
  const auto until = std::chrono::steady_clock::now() + 20ms;
  int readings = 0, reused = 0;
  time_point previous{};
  while (std::chrono::steady_clock::now() < until) {
    const time_point before = std::chrono::steady_clock::now();
    const time_point r = recent_now(clk, max_age);
    const time_point after = std::chrono::steady_clock::now();
    ASSERT_LE(r, after);
    // Older than `before` only by the age allowed (the rate is measured
    // over >= 1 ms: generous slack for its error and a preemption).
    ASSERT_GE(r, before - max_age - 50us);
    ASSERT_GE(r, previous);  // one thread's readings never go back
    if (r == previous) ++reused;
    previous = r;
    ++readings;
  }
  EXPECT_GT(readings, 1000);
  (void)reused;  // machine-dependent: 0 where the kernel does not keep time on the TSC
}

}  // namespace
}  // namespace hourglass
