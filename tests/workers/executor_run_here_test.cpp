// run_here_when_idle: a short job's submitter runs it itself when nothing is
// queued and a worker idles (saving two thread hand-offs), and otherwise the
// job is queued as any other. Either way it is admitted, watched and counted
// the same, and gets exactly one outcome. Real worker threads on a manual
// clock; the only waits are for a worker to reach its idle wait.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>

#include "hourglass/executor.hpp"
#include "manual_executor.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// Until every worker is waiting for a job (real threads: they get there on their own).
void wait_until_idle(const executor& ex) {
  for (int i = 0; i < 200'000 && ex.idle() < ex.workers(); ++i) std::this_thread::yield();
  ASSERT_EQ(ex.idle(), ex.workers()) << "the workers never reached their idle wait";
}

job_options here(job_options o) {
  o.run_here_when_idle = true;
  return o;
}

TEST(ExecutorRunHere, AnIdleWorkersJobRunsOnTheSubmittersThreadBeforeSubmitReturns) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  wait_until_idle(ex);
  std::thread::id ran_on;
  std::thread::id told_on;
  bool told = false;
  ex.submit(
      here(job_options::within(clk, 100ms)),
      [&](const context& ctx) {
        ran_on = std::this_thread::get_id();
        EXPECT_EQ(ctx.deadline(), clk.now() + 100ms);
        EXPECT_EQ(ex.busy(), 1u) << "counted as running";
        EXPECT_EQ(ex.idle(), 0u) << "the idle worker is lent to this job";
        clk.advance(3ms);
        return 7;
      },
      [&](job_result<int>&& r) noexcept {
        told_on = std::this_thread::get_id();
        told = true;
        EXPECT_EQ(r.st, status::ok());
        EXPECT_EQ(r.value(), 7);
        EXPECT_EQ(r.timings.queue_delay, 0ns);
        EXPECT_EQ(r.timings.run_time, 3ms);
        EXPECT_EQ(r.timings.budget, 100ms);
      });
  EXPECT_TRUE(told) << "the outcome arrived before submit returned";
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_EQ(told_on, std::this_thread::get_id());
  EXPECT_EQ(ex.busy(), 0u);
  EXPECT_EQ(ex.idle(), 1u);
  const auto snap = ex.stats().snapshot();
  const auto* h = snap.find("default");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->admitted, 1u);
  EXPECT_EQ(h->finished_ok, 1u);
  EXPECT_EQ(clk.pending_timers(), 1u) << "the guest's watch stays for the next guest job";
}

// A guest slot's watch is not re-armed per job: a later job with a later
// deadline leaves it, and when it fires it moves to that job's deadline if
// one runs, or is gone if none does.
TEST(ExecutorRunHere, AGuestsWatchOutlivesItsJobAndFiresOnceForNothing) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  wait_until_idle(ex);
  EXPECT_TRUE(ex.submit(here(job_options::within(clk, 100ms)), [] { return 0; }).get().ok());
  EXPECT_EQ(clk.pending_timers(), 1u);
  clk.advance(10ms);
  bool stopped_at_own_deadline = false;
  auto second = ex.submit(here(job_options::within(clk, 100ms)), [&](const context& ctx) {
    EXPECT_EQ(clk.pending_timers(), 1u) << "a later deadline leaves the watch where it is";
    clk.advance(90ms);  // the first job's deadline: the watch fires and moves on
    EXPECT_FALSE(ctx.token().stop_requested());
    EXPECT_EQ(clk.pending_timers(), 1u);
    clk.advance(10ms);  // this job's own deadline
    stopped_at_own_deadline = ctx.token().stop_requested();
    return 0;
  });
  EXPECT_TRUE(stopped_at_own_deadline);
  EXPECT_EQ(second.get().st, status::expired(expiry_stage::run));
  EXPECT_TRUE(ex.submit(here(job_options::within(clk, 50ms)), [] { return 0; }).get().ok());
  EXPECT_EQ(clk.pending_timers(), 1u);
  clk.advance(50ms);  // fires with nothing running
  EXPECT_EQ(clk.pending_timers(), 0u) << "a watch with nothing to watch is gone";
  EXPECT_EQ(ex.busy(), 0u);
}

// The guest slot's watch fires the job's deadline as a worker's would: the
// context stops by itself, not only when the job looks at the clock.
TEST(ExecutorRunHere, AGuestJobsContextStopsByItselfAtItsDeadline) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  wait_until_idle(ex);
  bool stopped_before = true, stopped_after = false;
  auto job = ex.submit(here(job_options::within(clk, 50ms)), [&](const context& ctx) {
    clk.advance(50ms - 1ns);
    stopped_before = ctx.token().stop_requested();
    clk.advance(1ns);  // the watch's timer runs here, on the advancing thread
    stopped_after = ctx.token().stop_requested();
    ctx.check();
    return 0;
  });
  ASSERT_TRUE(job.ready());
  const auto r = job.get();
  EXPECT_FALSE(stopped_before);
  EXPECT_TRUE(stopped_after);
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_EQ(r.timings.run_time, 50ms);
}

TEST(ExecutorRunHere, WithEveryWorkerBusyTheJobIsQueuedForAWorker) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  std::latch release(1);
  auto blocker = ex.submit(job_options{}, [&] {
    release.wait();
    return 0;
  });
  for (int i = 0; i < 200'000 && ex.busy() == 0; ++i) std::this_thread::yield();
  ASSERT_EQ(ex.busy(), 1u);
  std::thread::id ran_on;
  auto job = ex.submit(here(job_options::within(clk, 100ms)), [&] {
    ran_on = std::this_thread::get_id();
    return 1;
  });
  EXPECT_FALSE(job.ready());
  EXPECT_EQ(ex.queue().depth(), 1u);
  release.count_down();
  EXPECT_TRUE(job.get().ok());
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(blocker.get().ok());
}

TEST(ExecutorRunHere, AJobQueuedFirstGoesFirst) {
  manual_clock clk;
  executor ex(testing::workers_on(clk, 1, /*paused=*/true));
  std::thread::id ran_on;
  auto first = ex.submit(job_options{}, [] { return 0; });
  // Paused (and then with a job queued): never run here, whatever the workers do.
  auto second = ex.submit(here(job_options{}), [&] {
    ran_on = std::this_thread::get_id();
    return 0;
  });
  EXPECT_FALSE(second.ready());
  EXPECT_EQ(ex.queue().depth(), 2u);
  ex.resume();
  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(second.get().ok());
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(ExecutorRunHere, AdmissionStillRefusesAJobWithoutItsMinimumBudget) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  wait_until_idle(ex);
  job_options o = here(job_options::within(clk, 1ms));
  o.min_budget = 2ms;
  bool ran = false;
  auto job = ex.submit(o, [&] {
    ran = true;
    return 0;
  });
  EXPECT_EQ(job.get().st, status::expired(expiry_stage::admission));
  EXPECT_FALSE(ran);
}

TEST(ExecutorRunHere, AfterShutdownItIsRefused) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  ex.shutdown();
  auto job = ex.submit(here(job_options{}), [] { return 0; });
  EXPECT_EQ(job.get().st, status::rejected(reject_reason::shutting_down));
}

// Two submitters and one idle worker: one guest at a time.
TEST(ExecutorRunHere, OneGuestPerIdleWorker) {
  manual_clock clk;
  executor ex(testing::workers_on(clk));
  wait_until_idle(ex);
  std::latch inside(1), release(1);
  std::thread other([&] {
    ex.submit(
        here(job_options{}),
        [&] {
          inside.count_down();
          release.wait();
          return 0;
        },
        [](job_result<int>&&) noexcept {});
  });
  inside.wait();  // the other thread is running its job as the worker's guest
  EXPECT_EQ(ex.idle(), 0u);
  std::thread::id ran_on;
  auto job = ex.submit(here(job_options{}), [&] {
    ran_on = std::this_thread::get_id();
    return 0;
  });
  EXPECT_TRUE(job.get().ok());  // the worker, not this thread, ran it
  EXPECT_NE(ran_on, std::this_thread::get_id());
  release.count_down();
  other.join();
}

}  // namespace
}  // namespace hourglass
