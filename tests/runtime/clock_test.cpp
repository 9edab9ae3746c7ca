#include "hourglass/clock.hpp"

#include "common/eventually.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

TEST(ManualClock, TimersFireInOrderDuringAdvance) {
  manual_clock clk;
  const time_point t0 = clk.now();
  std::vector<int> order;
  std::vector<time_point> seen;
  clk.schedule(t0 + 30ms, [&] {
    order.push_back(3);
    seen.push_back(clk.now());
  });
  clk.schedule(t0 + 10ms, [&] {
    order.push_back(1);
    seen.push_back(clk.now());
  });
  clk.schedule(t0 + 20ms, [&] {
    order.push_back(2);
    seen.push_back(clk.now());
    clk.schedule(clk.now() + 5ms, [&] {
      order.push_back(25);
      seen.push_back(clk.now());
    });
  });
  clk.advance(9ms);
  EXPECT_TRUE(order.empty());
  clk.advance(100ms);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 25, 3}));
  // Each callback sees now() equal to its own due time.
  EXPECT_EQ(seen, (std::vector<time_point>{t0 + 10ms, t0 + 20ms, t0 + 25ms, t0 + 30ms}));
  EXPECT_EQ(clk.now(), t0 + 109ms);
}

TEST(ManualClock, CancelReportsWhetherTheTimerWillNeverRun) {
  manual_clock clk;
  int calls = 0;
  const timer_id id = clk.schedule(clk.now() + 1ms, [&] { calls++; });
  EXPECT_TRUE(clk.cancel(id));
  EXPECT_FALSE(clk.cancel(id));
  clk.advance(1ms);
  EXPECT_EQ(calls, 0);
  const timer_id ran = clk.schedule(clk.now(), [&] { calls++; });
  clk.run_due();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(clk.cancel(ran));
}

TEST(ManualClock, NeverMovesBackwards) {
  manual_clock clk;
  const time_point t0 = clk.now();
  clk.set(t0 - 1s);
  EXPECT_EQ(clk.now(), t0);
}

TEST(TimeArithmetic, Saturates) {
  EXPECT_EQ(saturating_add(never, 1s), never);
  EXPECT_EQ(saturating_add(time_point{} + 1s, duration::max()), never);
  EXPECT_EQ(remaining(never, time_point{}), duration::max());
  EXPECT_EQ(remaining(time_point{} + 1s, time_point{} + 2s), duration::zero());
  EXPECT_EQ(elapsed(time_point{} + 1s, time_point{} + 3s), 2s);
  EXPECT_EQ(round_down<std::chrono::milliseconds>(1999us), 1ms);
}

// The one real-clock smoke test: the production timer thread runs a timer.
TEST(SteadyClockService, RunsTimersOnItsThread) {
  steady_clock_service clk;
  std::atomic<bool> fired{false};
  clk.schedule(clk.now() + 1ms, [&] { fired = true; });
  const timer_id far = clk.schedule(clk.now() + 1h, [] {});
  // Waits for the event, not for a fixed 20 ms a loaded machine can miss.
  EXPECT_TRUE(test_common::eventually([&] { return fired.load(); }));
  EXPECT_TRUE(clk.cancel(far)) << "the far timer is still pending";
}

}  // namespace
}  // namespace hourglass
