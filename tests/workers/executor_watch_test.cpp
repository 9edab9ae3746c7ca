// The worker's deadline watch (executor.cpp, worker_watch): one timer per
// worker fires its running jobs' deadlines, moving from one job's deadline to
// the next, instead of a timer per job. Exact, on a manual clock: a job's
// context still stops at its own deadline to the nanosecond, whether the
// watch was armed for it, for an earlier job, or moved to it; and an idle
// executor holds no timer.
#include <gtest/gtest.h>

#include <optional>

#include "hourglass/executor.hpp"
#include "manual_executor.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

executor_options one_paused_worker(manual_clock& clk) { return testing::workers_on(clk, 1, /*paused=*/true); }

// Blocks until its context stops it; throws the reason.
int sleep_until_stopped(const context& ctx) {
  if (!ctx.sleep_for(1h)) ctx.check();
  return 1;
}

TEST(ExecutorWatch, AJobIsStoppedAtItsDeadlineByAWatchArmedForTheJobBefore) {
  manual_clock clk;
  executor ex(one_paused_worker(clk));
  const time_point t0 = clk.now();
  auto quick = ex.submit(job_options::within(clk, 100ms), [](const context&) { return 0; });
  auto slow = ex.submit(job_options::within(clk, 300ms), sleep_until_stopped);
  ex.resume();
  EXPECT_TRUE(quick.get().ok());
  // The watch armed for the quick job (100 ms) was kept, as the slow one was
  // waiting: it and the slow job's sleep are all the timers there are.
  ASSERT_TRUE(clk.wait_for_timers(2));
  EXPECT_EQ(clk.pending_timers(), 2u);
  clk.advance(100ms);  // the watch fires for a job that is gone, and moves to 300 ms
  EXPECT_EQ(clk.pending_timers(), 2u);
  EXPECT_FALSE(slow.ready());
  clk.advance(200ms - 1ns);
  EXPECT_FALSE(slow.ready());
  clk.advance(1ns);
  const auto r = slow.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_EQ(r.timings.run_time, 300ms);
  EXPECT_EQ(clk.now() - t0, 300ms);
  EXPECT_EQ(clk.pending_timers(), 0u) << "an idle executor keeps no timer";
}

TEST(ExecutorWatch, AJobWithAnEarlierDeadlineMovesTheWatchToIt) {
  manual_clock clk;
  executor ex(one_paused_worker(clk));
  auto quick = ex.submit(job_options::within(clk, 300ms), [](const context&) { return 0; });
  auto slow = ex.submit(job_options::within(clk, 100ms), sleep_until_stopped);
  ex.resume();
  EXPECT_TRUE(quick.get().ok());
  ASSERT_TRUE(clk.wait_for_timers(2));  // the watch, moved from 300 ms to 100 ms, and the sleep
  clk.advance(100ms - 1ns);
  EXPECT_FALSE(slow.ready());
  clk.advance(1ns);
  const auto r = slow.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_EQ(r.timings.run_time, 100ms);
  EXPECT_EQ(clk.pending_timers(), 0u);
}

// A context kept past its job (a copy, here) still stops by itself at its
// deadline: the watch hands it a timer of its own when the job ends.
TEST(ExecutorWatch, AContextKeptPastItsJobStillStopsAtItsDeadline) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  std::optional<context> kept;
  auto job = ex.submit(job_options::within(clk, 50ms), [&kept](const context& ctx) {
    kept = ctx;
    return 0;
  });
  EXPECT_TRUE(job.get().ok());
  ASSERT_TRUE(kept);
  EXPECT_FALSE(kept->token().stop_requested());
  EXPECT_EQ(clk.pending_timers(), 1u) << "its own deadline timer";
  clk.advance(50ms - 1ns);
  EXPECT_FALSE(kept->token().stop_requested());
  clk.advance(1ns);
  EXPECT_TRUE(kept->token().stop_requested());
  EXPECT_EQ(kept->stop_status(), status::expired(expiry_stage::run));
  kept.reset();
  EXPECT_EQ(clk.pending_timers(), 0u);
}

// A context nobody kept costs no timer at the job's end.
TEST(ExecutorWatch, AJobThatEndsBeforeItsDeadlineLeavesNoTimer) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(ex.submit(job_options::within(clk, 50ms), [](const context&) { return 0; }).get().ok());
    EXPECT_EQ(clk.pending_timers(), 0u) << i;
  }
}

}  // namespace
}  // namespace hourglass
