// job_options::idle_limit: the executor runs a job in a context with an idle
// limit; silence for the limit ends it deadline_exceeded/idle, counted in
// expired_total{stage="idle"}; progress keeps it going. Exact, manual clock.
#include <gtest/gtest.h>

#include "hourglass/executor.hpp"
#include "manual_executor.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

executor_options one_worker(manual_clock& clk) { return testing::workers_on(clk); }

TEST(ExecutorIdle, ASilentJobStopsAtItsIdleLimitWithStageIdle) {
  manual_clock clk;
  executor ex(one_worker(clk));
  job_options o = job_options::within(clk, 10s);
  o.idle_limit = 100ms;
  auto job = ex.submit(o, [](const context& ctx) {
    ctx.progress();
    if (!ctx.sleep_for(1h)) ctx.check();  // no progress while asleep
    return 1;
  });
  ASSERT_TRUE(clk.wait_for_timers(3));  // the worker's deadline watch, the idle timer, the sleep
  clk.advance(100ms - 1ns);
  EXPECT_FALSE(job.ready());
  clk.advance(1ns);
  const auto r = job.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::idle));
  EXPECT_EQ(r.timings.run_time, 100ms);
  EXPECT_FALSE(r.timings.completed_late);
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.find("default")->expired_idle, 1u);
  EXPECT_EQ(snap.find("default")->expired_run, 0u);
  EXPECT_EQ(snap.find("default")->finished_deadline_exceeded, 1u);
}

TEST(ExecutorIdle, AJobThatReportsProgressRunsPastManyIdleLimits) {
  manual_clock clk;
  executor ex(one_worker(clk));
  job_options o = job_options::within(clk, 10s);
  o.idle_limit = 100ms;
  auto job = ex.submit(o, [](const context& ctx) {
    for (int i = 0; i < 10; ++i) {
      if (!ctx.sleep_for(80ms)) ctx.check();  // 80 ms of work, then progress
      ctx.progress();
    }
    return 7;
  });
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(clk.wait_for_timers(3)) << i;  // watch, idle timer, this step's sleep
    clk.advance(80ms);
  }
  auto r = job.get();
  ASSERT_TRUE(r.ok()) << describe(r.st);
  EXPECT_EQ(r.value(), 7);
  EXPECT_EQ(r.timings.run_time, 800ms);
}

TEST(ExecutorIdle, AJobWithoutAnIdleLimitIsNotStoppedBySilence) {
  manual_clock clk;
  executor ex(one_worker(clk));
  auto job = ex.submit(job_options::within(clk, 10s), [](const context& ctx) {
    EXPECT_EQ(ctx.idle_limit(), duration::max());
    return ctx.sleep_for(5s) ? 1 : 0;
  });
  ASSERT_TRUE(clk.wait_for_timers(2));  // the watch and the sleep
  clk.advance(5s);
  auto r = job.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 1);
}

}  // namespace
}  // namespace hourglass
