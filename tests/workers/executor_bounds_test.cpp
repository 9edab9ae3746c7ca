// A job's effective bounds, exactly, on a manual clock: nothing is started
// with zero budget left, a parent's deadline bounds admission, expiry and
// timings like the job's own, and every job offered is counted once:
// offered = admitted + rejected, admitted = finished (when quiet).
#include "hourglass/executor.hpp"
#include "manual_executor.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// Regression: a zero budget was admitted and started with a
// context already done, then reported as run and completed late.
TEST(ExecutorBounds, AZeroBudgetIsRefusedAtAdmission) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk, 8));
  bool ran = false;
  auto h = ex.submit(job_options::within(clk, 0ns), [&] { ran = true; });
  EXPECT_EQ(ex.run_pending(), 0u);
  const auto r = h.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::admission));
  EXPECT_FALSE(ran);
  EXPECT_FALSE(r.timings.completed_late);
  const auto s = *ex.stats().snapshot().find("default");
  EXPECT_EQ(s.admitted, 0u);
  EXPECT_EQ(s.rejected_insufficient_budget, 1u);
  EXPECT_EQ(s.completed_late, 0u);
}

TEST(ExecutorBounds, AJobWhoseDeadlineIsReachedExactlyInTheQueueNeverStarts) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk, 8));
  bool ran = false;
  auto h = ex.submit(job_options::within(clk, 10ms), [&] { ran = true; });
  clk.advance(10ms);  // remaining: exactly zero
  EXPECT_EQ(ex.run_pending(), 1u);
  const auto r = h.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::queue));
  EXPECT_FALSE(ran);
  EXPECT_FALSE(r.timings.ran);
  EXPECT_FALSE(r.timings.completed_late);
  EXPECT_EQ(ex.stats().snapshot().find("default")->completed_late, 0u);
}

TEST(ExecutorBounds, OneTickLeftStillStarts) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk, 8));
  auto h = ex.submit(job_options::within(clk, 10ms), [] { return 1; });
  clk.advance(10ms - 1ns);
  ex.run_pending();
  EXPECT_TRUE(h.get().ok());
}

// Regression: with only a parent set, admission, expiry and the timings
// ignored the parent's deadline, so a child could be queued and run past it.
TEST(ExecutorBounds, AParentsDeadlineBoundsAdmission) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk, 8));
  context_source caller(clk, clk.now() + 10ms);
  job_options o;
  o.parent = &caller.get();
  o.min_budget = 20ms;
  bool ran = false;
  auto h = ex.submit(o, [&] { ran = true; });
  EXPECT_EQ(ex.run_pending(), 0u);
  const auto r = h.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::admission));
  EXPECT_EQ(r.timings.budget, 10ms);
  EXPECT_FALSE(ran);
}

TEST(ExecutorBounds, AParentsDeadlineBoundsExpiryAtDequeueAndTheTimings) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk, 8));
  context_source caller(clk, clk.now() + 50ms);
  job_options o;
  o.parent = &caller.get();
  o.deadline = clk.now() + 1s;  // the job's own deadline is later: the parent's wins
  auto ok = ex.submit(o, [](const context& ctx) { return ctx.remaining(); });
  clk.advance(20ms);
  ex.run_pending();
  auto r = ok.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 30ms);
  EXPECT_EQ(r.timings.budget, 50ms);
  EXPECT_EQ(r.timings.remaining_at_dispatch, 30ms);
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.request_budget.count, 1u);
  EXPECT_EQ(snap.remaining_budget_at_dispatch.count, 1u);

  bool ran = false;
  auto late = ex.submit(o, [&] { ran = true; });
  clk.advance(30ms);  // the parent's deadline, exactly; the parent's timer fires too
  ex.run_pending();
  EXPECT_EQ(late.get().st, status::expired(expiry_stage::queue));
  EXPECT_FALSE(ran);
}

// Regression: refusals for insufficient budget were counted in
// finished_total too, so sum(finished) exceeded admitted.
TEST(ExecutorBounds, EveryJobOfferedIsCountedOnceAdmittedOrRejected) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk, 8));
  std::vector<job_handle<int>> hs;
  const auto offer = [&](job_options o) { hs.push_back(ex.submit(o, [] { return 0; })); };
  job_options tight = job_options::within(clk, 5ms);
  tight.min_budget = 10ms;
  offer(tight);                          // insufficient budget
  offer(job_options::within(clk, 0ns));  // zero budget
  context_source cancelled(clk);
  cancelled.cancel(cancel_cause::caller_gone);
  job_options child;
  child.parent = &cancelled.get();
  offer(child);                                                        // the parent is already cancelled
  for (int i = 0; i < 8; ++i) offer(job_options::within(clk, 100ms));  // fills the queue
  offer(job_options::within(clk, 100ms));                              // queue_full
  ex.run_pending();
  auto expiring = ex.submit(job_options::within(clk, 5ms), [] { return 0; });
  clk.advance(5ms);
  ex.run_pending();  // expired in the queue: admitted, finished
  const auto s = *ex.stats().snapshot().find("default");
  const std::uint64_t offered = hs.size() + 1;
  const std::uint64_t rejected = s.rejected_queue_full + s.rejected_insufficient_budget + s.rejected_invalid_timeout +
                                 s.rejected_shutting_down + s.rejected_cancelled;
  const std::uint64_t finished = s.finished_ok + s.finished_error + s.finished_deadline_exceeded + s.finished_cancelled;
  EXPECT_EQ(s.rejected_insufficient_budget, 2u);
  EXPECT_EQ(s.rejected_cancelled, 1u);
  EXPECT_EQ(s.rejected_queue_full, 1u);
  EXPECT_EQ(s.admitted + rejected, offered);
  EXPECT_EQ(finished, s.admitted);
  EXPECT_EQ(s.finished_ok, 8u);
  EXPECT_EQ(s.finished_deadline_exceeded, 1u);
  EXPECT_EQ(s.expired_queue, 1u);
  EXPECT_EQ(expiring.get().st, status::expired(expiry_stage::queue));
}

}  // namespace
}  // namespace hourglass
