#include "hourglass/clock.hpp"

#include "common/eventually.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
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

// What a thread waits for with clock::wait_until: a flag, its mutex and cv.
struct waited {
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;

  // Waits on `clk` until ready or `deadline`; what wait_until said, and the
  // clock's time when it returned.
  std::pair<bool, time_point> wait(clock& clk, time_point deadline) {
    std::unique_lock lock(mu);
    const bool got = clk.wait_until(lock, cv, deadline, [&] { return ready; });
    return {got, clk.now()};
  }
  void set() {
    const std::lock_guard lock(mu);
    ready = true;
    cv.notify_all();
  }
};

TEST(ManualClockWait, TimesOutExactlyAtItsDeadline) {
  manual_clock clk;
  waited w;
  const time_point deadline = clk.now() + 10ms;
  auto result = std::async(std::launch::async, [&] { return w.wait(clk, deadline); });
  ASSERT_TRUE(clk.wait_for_timer_at(deadline)) << "the waiter's timer";
  EXPECT_FALSE(clk.wait_for_timer_at(deadline + 1ns, 0ms));
  clk.advance(10ms - 1ns);
  EXPECT_EQ(result.wait_for(0s), std::future_status::timeout) << "a nanosecond early";
  clk.advance(1ns);
  const auto [got, at] = result.get();
  EXPECT_FALSE(got);
  EXPECT_EQ(at, deadline);
  EXPECT_EQ(clk.pending_timers(), 0u);
}

TEST(ManualClockWait, ReturnsAtOnceWhenThePredicateHoldsOrTheDeadlinePassed) {
  manual_clock clk;
  waited w;
  EXPECT_FALSE(w.wait(clk, clk.now()).first) << "a deadline already reached";
  EXPECT_FALSE(w.wait(clk, clk.now() - 1s).first);
  w.ready = true;
  EXPECT_TRUE(w.wait(clk, clk.now() + 1h).first);
  EXPECT_TRUE(w.wait(clk, clk.now()).first) << "true when it holds, whatever the deadline";
  EXPECT_EQ(clk.pending_timers(), 0u) << "no timer scheduled";
}

TEST(ManualClockWait, WakesOnNotifyAndCancelsItsTimer) {
  manual_clock clk;
  waited w;
  const time_point t0 = clk.now();
  auto result = std::async(std::launch::async, [&] { return w.wait(clk, t0 + 1h); });
  ASSERT_TRUE(clk.wait_for_timers(1));
  w.set();
  const auto [got, at] = result.get();
  EXPECT_TRUE(got);
  EXPECT_EQ(at, t0) << "no time passed";
  EXPECT_EQ(clk.pending_timers(), 0u) << "its timer is cancelled";
}

TEST(ManualClockWait, WithoutADeadlineWaitsForTheNotifyAlone) {
  manual_clock clk;
  waited w;
  auto result = std::async(std::launch::async, [&] { return w.wait(clk, never); });
  clk.advance(24h);
  EXPECT_EQ(result.wait_for(0s), std::future_status::timeout);
  EXPECT_EQ(clk.pending_timers(), 0u) << "never: no timer";
  w.set();
  EXPECT_TRUE(result.get().first);
}

// The deadline's timer runs (on the advancing thread) as the predicate comes
// true: the waiter returns only once the timer is done with the mutex and
// cv, so they may be destroyed at once (ASan, TSan: no use after free).
TEST(ManualClockWait, ATimerRunningAsTheWaitEndsIsDoneBeforeItReturns) {
  for (int round = 0; round < 50; ++round) {
    manual_clock clk;
    auto w = std::make_unique<waited>();
    const time_point deadline = clk.now() + 1ms;
    std::promise<bool> got;
    std::thread waiter([&] { got.set_value(w->wait(clk, deadline).first); });
    EXPECT_TRUE(clk.wait_for_timers(1));
    std::thread advancer;
    {
      std::unique_lock lock(w->mu);
      w->ready = true;
      w->cv.notify_all();
      // The timer is taken out to run and now waits for the mutex we hold.
      advancer = std::thread([&] { clk.advance(1ms); });
      EXPECT_TRUE(test_common::eventually([&] { return clk.pending_timers() == 0; }));
    }
    waiter.join();
    w.reset();  // the waiter returned: its mutex and cv may go
    advancer.join();
    EXPECT_TRUE(got.get_future().get()) << "the predicate held";
  }
}

TEST(SteadyClockWait, TimesOutAtItsDeadlineAndWakesOnNotify) {
  steady_clock_service clk;
  waited w;
  const time_point deadline = clk.now() + 5ms;
  const auto [got, at] = w.wait(clk, deadline);
  EXPECT_FALSE(got);
  EXPECT_GE(at, deadline);
  auto result = std::async(std::launch::async, [&] { return w.wait(clk, clk.now() + 1h); });
  w.set();
  EXPECT_TRUE(result.get().first);
  EXPECT_TRUE(w.wait(clk, clk.now() - 1s).first) << "true at once when it holds";
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
