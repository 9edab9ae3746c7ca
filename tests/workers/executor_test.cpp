#include "hourglass/executor.hpp"
#include "manual_executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

using testing::manual_executor;

TEST(Executor, RunsAJobAndReportsItsTimings) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  auto h = ex.submit(job_options::within(clk, 100ms), [&](const context& ctx) {
    EXPECT_EQ(ctx.remaining(), 70ms);
    clk.advance(20ms);
    return 42;
  });
  clk.advance(30ms);
  EXPECT_EQ(ex.run_pending(), 1u);
  auto r = h.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(r.timings.budget, 100ms);
  EXPECT_EQ(r.timings.queue_delay, 30ms);
  EXPECT_EQ(r.timings.remaining_at_dispatch, 70ms);
  EXPECT_EQ(r.timings.run_time, 20ms);
  EXPECT_FALSE(r.timings.completed_late);
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.find("default")->admitted, 1u);
  EXPECT_EQ(snap.find("default")->finished_ok, 1u);
}

TEST(Executor, RejectsBelowMinimumUsefulBudget) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  job_options o = job_options::within(clk, 5ms);
  o.min_budget = 10ms;
  bool ran = false;
  auto h = ex.submit(o, [&] { ran = true; });
  auto r = h.get();  // ready at once: refused at admission
  EXPECT_EQ(r.st, status::expired(expiry_stage::admission));
  EXPECT_EQ(ex.run_pending(), 0u);
  EXPECT_FALSE(ran);
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.find("default")->rejected_insufficient_budget, 1u);
}

TEST(Executor, ExpiredInQueueNeverRuns) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  bool ran = false;
  auto h = ex.submit(job_options::within(clk, 50ms), [&] { ran = true; });
  clk.advance(51ms);
  ex.run_pending();
  auto r = h.get();
  EXPECT_FALSE(ran);
  EXPECT_EQ(r.st, status::expired(expiry_stage::queue));
  EXPECT_EQ(r.timings.queue_delay, 51ms);
  EXPECT_FALSE(r.timings.ran);
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.find("default")->expired_queue, 1u);
}

TEST(Executor, HandlerErrorIsCaptured) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  auto h = ex.submit(job_options{}, []() -> int { throw std::invalid_argument("bad input"); });
  ex.run_pending();
  auto r = h.get();
  EXPECT_EQ(r.st, status::error());
  EXPECT_THROW(r.value(), std::invalid_argument);
}

TEST(Executor, CompletedLateIsDiscardedAndCounted) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  auto h = ex.submit(job_options::within(clk, 10ms), [&](const context&) {
    clk.advance(15ms);  // overran, ignoring its context
    return 7;
  });
  ex.run_pending();
  auto r = h.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_FALSE(r.result.has_value());
  EXPECT_TRUE(r.timings.completed_late);
  EXPECT_EQ(r.timings.run_time, 15ms);
  const auto snap = ex.stats().snapshot();
  const auto* hs = snap.find("default");
  EXPECT_EQ(hs->completed_late, 1u);
  EXPECT_EQ(hs->completed_late_ns, static_cast<std::uint64_t>(duration(15ms).count()));
  EXPECT_EQ(hs->expired_run, 1u);
}

TEST(Executor, CancelBeforeStartMeansNeverRuns) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  bool ran = false;
  auto h = ex.submit(job_options{}, [&] { ran = true; });
  EXPECT_TRUE(h.cancel());
  EXPECT_TRUE(h.cancel());  // still true: it never ran
  ex.run_pending();
  EXPECT_FALSE(ran);
  EXPECT_EQ(h.get().st, status::cancelled(cancel_cause::requested));
}

TEST(Executor, QueueFullWithPausedWorkers) {
  manual_clock clk;
  executor_options o;
  o.clock = &clk;
  o.workers = 2;
  o.queue_capacity = 8;
  o.start_paused = true;
  executor ex(o);
  ex.pause();
  std::atomic<int> ran{0};
  std::vector<status> refused;
  for (int i = 0; i < 8 + 5; ++i) {
    ex.submit(
        job_options{}, [&] { ran++; },
        [&](job_result<std::monostate>&& r) noexcept {
          if (!r.ok()) refused.push_back(r.st);
        });
  }
  EXPECT_EQ(refused.size(), 5u);
  for (const auto& s : refused) EXPECT_EQ(s, status::rejected(reject_reason::queue_full));
  ex.resume();
  ex.shutdown(clk.now() + 1h);  // drain: everything admitted runs
  EXPECT_EQ(ran.load(), 8);
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.find("default")->rejected_queue_full, 5u);
}

TEST(Executor, RunningJobIsCancelledAtItsDeadline) {
  manual_clock clk;
  executor_options o;
  o.clock = &clk;
  o.workers = 1;
  executor ex(o);
  auto h = ex.submit(job_options::within(clk, 200ms), [](const context& ctx) {
    if (!ctx.sleep_for(1h)) ctx.check();  // throws: stopped by the deadline
    return 1;
  });
  ASSERT_TRUE(clk.wait_for_timers(2));  // the job's deadline and its sleep
  clk.advance(200ms);
  auto r = h.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_FALSE(r.timings.completed_late);
  EXPECT_TRUE(r.timings.ran);
}

}  // namespace
}  // namespace hourglass

namespace hourglass {
namespace {

using namespace std::chrono_literals;

executor_options threaded(manual_clock& clk, std::size_t workers = 1) {
  executor_options o;
  o.clock = &clk;
  o.workers = workers;
  return o;
}

TEST(ExecutorAsync, FreshnessBoundsTheStartNotTheRun) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  // Worth starting for 5 s; once started, its own limit of 1 s applies.
  auto fresh = ex.submit(job_options::async(clk, 5s, 1s), [&](const context& ctx) { return ctx.remaining(); });
  clk.advance(4s);
  ex.run_pending();
  auto r = fresh.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), 1s) << "the run is bounded by the job's own limit, not the freshness bound";
  EXPECT_EQ(r.timings.budget, duration::max()) << "no caller deadline";

  auto expired = ex.submit(job_options::async(clk, 5s, 1s), [] { return 2; });
  clk.advance(5s + 1ns);
  ex.run_pending();
  EXPECT_EQ(expired.get().st, status::expired(expiry_stage::queue));
}

TEST(ExecutorAsync, ExpiredFreshnessIsRefusedAtAdmission) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  job_options o = job_options::async(clk, 0s, 1s);
  clk.advance(1ms);
  auto h = ex.submit(o, [] { return 1; });
  EXPECT_EQ(h.get().st, status::expired(expiry_stage::admission));
}

TEST(Executor, ParentCancellationFlowsIntoTheJob) {
  manual_clock clk;
  executor ex(threaded(clk));
  context_source caller = context_source::with_timeout(clk, 10s);
  job_options o;
  o.parent = &caller.get();
  o.deadline = caller.get().deadline();
  auto h = ex.submit(o, [](const context& ctx) {
    ctx.sleep_for(1h);
    ctx.check();
    return 0;
  });
  ASSERT_TRUE(clk.wait_for_timers(2));  // caller's deadline + the job's sleep
  caller.cancel(cancel_cause::caller_gone);
  EXPECT_EQ(h.get().st, status::cancelled(cancel_cause::caller_gone));
}

TEST(Executor, ParentStoppedWhileQueuedIsDroppedAtDequeue) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  context_source caller(clk);
  job_options o;
  o.parent = &caller.get();
  bool ran = false;
  auto h = ex.submit(o, [&] { ran = true; });
  caller.cancel(cancel_cause::caller_gone);
  ex.run_pending();
  EXPECT_FALSE(ran);
  EXPECT_EQ(h.get().st, status::cancelled(cancel_cause::caller_gone));
}

TEST(Executor, JobContextGetsCapAndReserve) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  job_options o = job_options::within(clk, 300ms);
  o.reserve = 80ms;
  auto h = ex.submit(o, [](const context& ctx) { return ctx.remaining(); });
  ex.run_pending();
  EXPECT_EQ(h.get().value(), 220ms);
}

TEST(Executor, CancelRunningJobStopsItAndReportsItRan) {
  manual_clock clk;
  executor ex(threaded(clk));
  std::atomic<bool> started{false};
  auto h = ex.submit(job_options{}, [&](const context& ctx) {
    started = true;
    ctx.sleep_for(1h);
    ctx.check();
    return 0;
  });
  ASSERT_TRUE(clk.wait_for_timers(1));
  EXPECT_TRUE(started.load());
  EXPECT_FALSE(h.cancel()) << "it is running: cancel cannot promise it never ran";
  auto r = h.get();
  EXPECT_EQ(r.st, status::cancelled(cancel_cause::requested));
  EXPECT_TRUE(r.timings.ran);
  EXPECT_FALSE(r.timings.completed_late);
}

TEST(Executor, DrainLetsRunningJobsFinishThenCancelsTheRest) {
  manual_clock clk;
  executor ex(threaded(clk, 1));
  auto sleeper = [](duration d) {
    return [d](const context& ctx) {
      ctx.sleep_for(d);
      ctx.check();
      return d;
    };
  };
  auto quick = ex.submit(job_options{}, sleeper(10ms));  // finishes inside the drain
  ASSERT_TRUE(clk.wait_for_timers(1));
  auto queued = ex.submit(job_options{}, sleeper(1h));  // starts during the drain, cut at its end
  std::thread drainer([&] { ex.shutdown(clk.now() + 100ms); });
  // Wait for shutdown to start: new work is refused once it has.
  while (ex.accepting()) std::this_thread::yield();
  auto late = ex.submit(job_options{}, sleeper(1ms));
  EXPECT_EQ(late.get().st, status::rejected(reject_reason::shutting_down));
  clk.advance(10ms);
  EXPECT_TRUE(quick.get().ok());
  // The queued job starts (its sleep + the drain timer), then the drain deadline passes.
  ASSERT_TRUE(clk.wait_for_timers(2));
  clk.advance(90ms);
  drainer.join();
  EXPECT_EQ(queued.get().st, status::cancelled(cancel_cause::shutdown));
  EXPECT_EQ(ex.queue().depth(), 0u);
}

TEST(Executor, DestroyingWithWorkQueuedGivesEveryJobItsOutcome) {
  manual_clock clk;
  std::vector<status> outcomes;
  std::mutex mu;
  {
    executor_options o = threaded(clk, 1);
    o.start_paused = true;
    executor ex(o);
    for (int i = 0; i < 10; ++i) {
      ex.submit(
          job_options{}, [] {},
          [&](job_result<std::monostate>&& r) noexcept {
            std::lock_guard lock(mu);
            outcomes.push_back(r.st);
          });
    }
  }
  ASSERT_EQ(outcomes.size(), 10u);
  for (const auto& s : outcomes) EXPECT_EQ(s, status::cancelled(cancel_cause::shutdown));
}

TEST(Executor, FifoPolicyRunsExpiredWorkAndCountsItLate) {
  manual_clock clk;
  executor_options o = manual_executor(clk);
  o.deadline_checks = false;
  executor ex(o);
  job_options jo = job_options::within(clk, 10ms);
  jo.min_budget = 50ms;  // would be refused by the hourglass policy
  bool ran = false;
  auto h = ex.submit(jo, [&] {
    ran = true;
    return 1;
  });
  clk.advance(20ms);
  ex.run_pending();
  auto r = h.get();
  EXPECT_TRUE(ran);
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_TRUE(r.timings.completed_late);
}

}  // namespace
}  // namespace hourglass

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// A job that finds, as it starts, that it must not run (its caller was
// already answered) may say so: the outcome keeps stage `queue`.
TEST(Executor, AJobMayReportItNeverReallyStarted) {
  manual_clock clk;
  executor ex(manual_executor(clk));
  auto h = ex.submit(job_options::within(clk, 10ms), [&](const context&) -> int {
    clk.advance(20ms);  // the deadline passed as it was being started
    throw stopped_error(status::expired(expiry_stage::queue));
  });
  ex.run_pending();
  EXPECT_EQ(h.get().st, status::expired(expiry_stage::queue));
  const auto snap = ex.stats().snapshot();
  EXPECT_EQ(snap.find("default")->expired_queue, 1u);
  EXPECT_EQ(snap.find("default")->expired_run, 0u);
}

}  // namespace
}  // namespace hourglass

namespace hourglass {
namespace {

// Workers record their jobs' histograms in shards of the registry; a later
// executor on the same registry adds to the same totals.
TEST(Executor, WorkersHistogramsReachTheRegistryAcrossExecutors) {
  manual_clock clk;
  metrics registry;
  constexpr int per_executor = 50;
  for (int round = 0; round < 2; ++round) {
    executor_options o;
    o.workers = 1;  // one job advances the clock at a time: every run takes exactly 1 ms
    o.clock = &clk;
    o.metrics = &registry;
    executor ex(o);
    std::vector<job_handle<int>> jobs;
    for (int i = 0; i < per_executor; ++i) {
      jobs.push_back(ex.submit(job_options::within(clk, 1h), [&clk](const context&) {
        clk.advance(1ms);
        return 1;
      }));
    }
    for (auto& j : jobs) EXPECT_TRUE(j.get().ok());
  }
  const auto s = registry.snapshot();
  EXPECT_EQ(s.find("default")->finished_ok, 2u * per_executor);
  EXPECT_EQ(s.queue_delay.count, 2u * per_executor);
  EXPECT_EQ(s.remaining_budget_at_dispatch.count, 2u * per_executor);
  EXPECT_EQ(s.run_duration.count, 2u * per_executor);
  EXPECT_EQ(s.run_duration.sum_ns, 2u * per_executor * 1'000'000);
}

}  // namespace
}  // namespace hourglass
