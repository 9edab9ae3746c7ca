#include "hourglass/fast_now.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

constexpr time_point t0 = time_point{} + 1h;

// 2.5 GHz: 0.4 ns per tick, 0.4 * 2^32 in 32.32 fixed point.
constexpr std::uint64_t q32_of_2_5ghz = 1'717'986'918;

TEST(FastNow, TheCountersPeriodComesFromTwoReadingsAtLeastAMillisecondApart) {
  EXPECT_EQ(detail::tsc_ns_per_tick_q32(1'000, t0, 1'000 + 5'000'000, t0 + 2ms), q32_of_2_5ghz);
  EXPECT_EQ(detail::tsc_ns_per_tick_q32(1'000, t0, 1'000 + 2'500'000, t0 + 1ms), q32_of_2_5ghz);
  EXPECT_EQ(detail::tsc_ns_per_tick_q32(1'000, t0, 1'000 + 2'000'000, t0 + 999us), 0u);  // too close to tell
  EXPECT_EQ(detail::tsc_ns_per_tick_q32(9'000, t0, 1'000, t0 + 5ms), 0u);                // counter went back
}

TEST(FastNow, TicksBecomeTimeAtTheMeasuredPeriod) {
  EXPECT_EQ(detail::tsc_ticks_as_duration(2'500, q32_of_2_5ghz), 999ns);  // the period rounds down a hair
  EXPECT_EQ(detail::tsc_ticks_as_duration(2'500'000'000, q32_of_2_5ghz), 999'999'999ns);
  EXPECT_EQ(detail::tsc_ticks_as_duration(250'000'000'000'000, q32_of_2_5ghz) / 1s, 99'999);  // no overflow
  EXPECT_EQ(detail::tsc_ticks_as_duration(2'500, 0), 0ns);                                    // period unknown
}

TEST(FastNow, AReadingIsYoungOnlyWithinItsSpanAndAKnownPeriod) {
  EXPECT_TRUE(detail::tsc_reading_is_young(100, 100, 1us, q32_of_2_5ghz));
  EXPECT_TRUE(detail::tsc_reading_is_young(100, 100 + 2'500, 1us, q32_of_2_5ghz));   // 999 ns
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 100 + 2'510, 1us, q32_of_2_5ghz));  // 1003 ns
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 99, 1us, q32_of_2_5ghz));           // another core's counter, behind
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 100, 1us, 0));                      // period not known yet
  EXPECT_FALSE(detail::tsc_reading_is_young(100, 100, 0ns, q32_of_2_5ghz));          // no span allowed
}

TEST(FastNow, OnlyAReadingBracketedTightlyByTheCounterIsASample) {
  EXPECT_TRUE(detail::tsc_bracket_is_tight(1'000, 1'100));  // an ordinary vDSO read
  EXPECT_TRUE(detail::tsc_bracket_is_tight(1'000, 1'000 + detail::tsc_tight_bracket_ticks));
  EXPECT_FALSE(detail::tsc_bracket_is_tight(1'000, 1'001 + detail::tsc_tight_bracket_ticks));
  EXPECT_FALSE(detail::tsc_bracket_is_tight(1'000, 1'000 + 500'000));  // preempted ~200 us mid-read
  EXPECT_FALSE(detail::tsc_bracket_is_tight(1'000, 999));              // moved to a core whose counter lags
}

TEST(FastNow, AManualClockIsReadEveryTime) {
  manual_clock clk;
  const time_point a = fast_now(clk, 1s);
  EXPECT_EQ(a, clk.now());
  clk.advance(1ns);
  EXPECT_EQ(fast_now(clk, 1s), a + 1ns);
}

// Real time, so with slack: a result is within a few ns of the clock where
// the counter is used (20 us allowed here for a preemption between the
// reads), and one thread's results never go back. Run for 20 ms so the
// counter's rate is measured and extrapolation really happens.
TEST(FastNow, TheRealClockIsFollowedCloselyAndNeverGoesBack) {
  steady_clock_service& clk = real_clock();
  const auto until = std::chrono::steady_clock::now() + 20ms;
  int readings = 0;
  time_point previous{};
  while (std::chrono::steady_clock::now() < until) {
    const time_point before = std::chrono::steady_clock::now();
    const time_point r = fast_now(clk, 100us);
    const time_point after = std::chrono::steady_clock::now();
    ASSERT_LE(r, after + 20us);
    ASSERT_GE(r, before - 20us);
    ASSERT_GE(r, previous);
    previous = r;
    ++readings;
  }
  EXPECT_GT(readings, 1000);
}

}  // namespace
}  // namespace hourglass
