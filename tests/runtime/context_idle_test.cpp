// The idle limit (docs/guards.md, "Idle limits"): a second clock
// beside the deadline, reset by ctx.progress(). Exact, on a manual clock.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "hourglass/context.hpp"

// Its own namespace: a unity build puts it beside files with constants of the same names.
namespace hourglass::context_idle_tests {
namespace {

using namespace std::chrono_literals;

constexpr status kIdle = status::expired(expiry_stage::idle);
constexpr status kDeadline = status::expired(expiry_stage::run);

TEST(ContextIdle, ProgressJustInTimeKeepsItAlive) {
  manual_clock clk;
  context_source ctx(clk, clk.now() + 1h, 100ms);
  EXPECT_EQ(ctx.get().idle_limit(), 100ms);
  for (int i = 0; i < 20; ++i) {
    clk.advance(100ms - 1ns);
    EXPECT_FALSE(ctx.get().done()) << i;
    ctx.get().progress();
  }
  EXPECT_FALSE(ctx.get().token().stop_requested());
  EXPECT_EQ(ctx.get().idle_deadline(), clk.now() + 100ms);
}

TEST(ContextIdle, SilenceForTheLimitStopsItWithStageIdleWhileTheDeadlineIsFar) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source ctx(clk, t0 + 1h, 100ms);
  clk.advance(60ms);
  ctx.get().progress();  // at 60 ms: the limit now runs out at 160 ms
  clk.advance(100ms - 1ns);
  EXPECT_FALSE(ctx.get().done());
  EXPECT_FALSE(ctx.get().token().stop_requested());
  clk.advance(1ns);  // 160 ms: the timer, armed for 100 ms, moved to 160 ms, fires
  EXPECT_TRUE(ctx.get().token().stop_requested());
  EXPECT_EQ(ctx.get().stop_status(), kIdle);
  EXPECT_THROW(ctx.get().check(), stopped_error);
  EXPECT_GT(ctx.get().remaining(), 59min);  // the deadline was far
}

TEST(ContextIdle, ProgressNeverExtendsTheAbsoluteDeadline) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source ctx(clk, t0 + 250ms, 100ms);
  for (int i = 0; i < 4; ++i) {
    clk.advance(50ms);
    ctx.get().progress();
    EXPECT_FALSE(ctx.get().done()) << i;
  }
  clk.advance(50ms);  // 250 ms: the deadline, though progress came 50 ms ago
  EXPECT_TRUE(ctx.get().token().stop_requested());
  EXPECT_EQ(ctx.get().stop_status(), kDeadline);
}

TEST(ContextIdle, AChildTakesTheTighterLimitAndItsProgressIsItsParentsToo) {
  manual_clock clk;
  context_source parent(clk, never, 100ms);
  context_source tighter = parent.get().child({.idle = 40ms});
  context_source looser = parent.get().child({.idle = 1s});
  context_source plain = parent.get().child();
  EXPECT_EQ(tighter.get().idle_limit(), 40ms);
  EXPECT_EQ(looser.get().idle_limit(), 100ms);
  EXPECT_EQ(plain.get().idle_limit(), 100ms);
  EXPECT_EQ(context_source(clk).get().child({.idle = 5ms}).get().idle_limit(), 5ms);
  EXPECT_EQ(context_source(clk).get().child().get().idle_limit(), duration::max());

  // Progress in a child keeps the parent alive; the parent's does not keep
  // an idle child alive.
  clk.advance(90ms);
  looser.get().progress();
  plain.get().progress();
  EXPECT_TRUE(tighter.get().token().stop_requested()) << "40 ms without progress of its own";
  EXPECT_EQ(tighter.get().stop_status(), kIdle);
  EXPECT_FALSE(parent.get().token().stop_requested()) << "a child stopping leaves the parent alive";
  clk.advance(90ms);
  EXPECT_FALSE(parent.get().done());
  clk.advance(10ms);  // 100 ms after the children's progress
  EXPECT_TRUE(parent.get().token().stop_requested());
  EXPECT_EQ(parent.get().stop_status(), kIdle);
  EXPECT_EQ(looser.get().stop_status(), kIdle) << "the parent's stop reaches its children";
}

TEST(ContextIdle, ASleepIsCutShortByTheIdleLimit) {
  manual_clock clk;
  context_source ctx(clk, never, 200ms);
  std::atomic<int> result{-1};
  std::thread sleeper([&] { result = ctx.get().sleep_for(1h) ? 1 : 0; });
  ASSERT_TRUE(clk.wait_for_timers(2));  // the idle timer and the sleep
  clk.advance(200ms);
  sleeper.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(ctx.get().stop_status(), kIdle);
}

TEST(ContextIdle, OnTheSteadyClockASleeperWakesAtTheIdleLimit) {
  const auto t0 = std::chrono::steady_clock::now();  // before the idle clock starts
  context_source ctx(real_clock(), real_clock().now() + 1h, 30ms);
  EXPECT_FALSE(ctx.get().sleep_for(1h));
  const auto slept = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(slept, 30ms);
  EXPECT_LT(slept, 30s);
  EXPECT_EQ(ctx.get().stop_status(), kIdle);
}

TEST(ContextIdle, NoLimitMeansNoIdleClock) {
  manual_clock clk;
  context_source ctx(clk, never);
  EXPECT_EQ(ctx.get().idle_limit(), duration::max());
  EXPECT_EQ(ctx.get().idle_deadline(), never);
  ctx.get().progress();  // harmless
  clk.advance(24h);
  EXPECT_FALSE(ctx.get().done());
  EXPECT_EQ(clk.pending_timers(), 0u);
}

}  // namespace
}  // namespace hourglass::context_idle_tests
