#include "hourglass/executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/eventually.hpp"

// This file replaces the global operator new/delete; GCC cannot see that the
// pair matches once inlined into library code.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Counts allocations on this thread while a test asks it to: refusal at
// admission must not allocate.
namespace {
thread_local bool g_counting = false;
thread_local long g_allocations = 0;
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace hourglass {
namespace {

using namespace std::chrono_literals;

struct count_allocations {
  count_allocations() {
    g_allocations = 0;
    g_counting = true;
  }
  ~count_allocations() { g_counting = false; }
  long count() const { return g_allocations; }
};

TEST(ExecutorAdmission, RefusalAllocatesNothing) {
  manual_clock clk;
  executor_options o;
  o.manual_mode = true;
  o.clock = &clk;
  o.queue_capacity = 1;
  executor ex(o);
  handler_metrics& h = ex.handler("refusals");
  ex.submit(
      job_options{}, [] {}, [](job_result<std::monostate>&&) noexcept {});  // fills the queue

  status seen;
  auto on_done = [&seen](job_result<std::monostate>&& r) noexcept { seen = r.st; };
  job_options full;
  full.metrics = &h;
  job_options starved = job_options::within(clk, 1ms);
  starved.metrics = &h;
  starved.min_budget = 2ms;
  {
    count_allocations counter;
    ex.submit(
        full, [] {}, on_done);
    EXPECT_EQ(seen, status::rejected(reject_reason::queue_full));
    ex.submit(
        starved, [] {}, on_done);
    EXPECT_EQ(seen, status::expired(expiry_stage::admission));
    EXPECT_EQ(counter.count(), 0);
  }
  ex.run_pending();
  ex.shutdown();
  {
    count_allocations counter;
    ex.submit(
        full, [] {}, on_done);
    EXPECT_EQ(seen, status::rejected(reject_reason::shutting_down));
    EXPECT_EQ(counter.count(), 0);
  }
}

// What a job costs a worker is more than its run: the worker also delivers
// the outcome (here a callback that takes 2 ms) before it takes the next job.
// Admission's mean follows that cost, so the wait it predicts is the time the
// queue really takes to drain (at 100 us jobs the bookkeeping was 2-3 % more
// per job, and admission let in jobs that expired in the queue).
TEST(ExecutorAdmission, MeanServiceIsWhatAJobCostsAWorkerBackToBack) {
  manual_clock clk;
  executor_options o;
  o.workers = 1;
  o.clock = &clk;
  o.start_paused = true;
  executor ex(o);
  constexpr int kJobs = 64;
  std::atomic<int> done{0};
  std::atomic<long> run_ns{0};
  for (int i = 0; i < kJobs; ++i) {
    // With a deadline, so the worker reads the clock when each job starts
    // (a job with no time bound may take the last job's end as its start).
    ex.submit(
        job_options::within(clk, 1h), [&] { clk.advance(10ms); },
        [&](job_result<std::monostate>&& r) noexcept {
          run_ns.fetch_add(r.timings.run_time.count());
          clk.advance(2ms);  // the caller's completion, on the worker
          done.fetch_add(1);
        });
  }
  ex.resume();
  ASSERT_TRUE(test_common::eventually([&] { return done.load() == kJobs; }));
  EXPECT_EQ(run_ns.load(), kJobs * std::chrono::nanoseconds(10ms).count()) << "each run itself took 10 ms";
  // The first job came after a wait (10 ms: its run); every later one came
  // straight after the last (12 ms). An EWMA with alpha 1/16 after 63 steps
  // is within 2 ms x (15/16)^63 = 34 us of 12 ms, and the worker publishes
  // it once it is more than 1/32 from the shared mean, so the shared mean is
  // within 1/33 of it: 11.6-12 ms, and not the 10 ms of the runs alone.
  const duration mean = ex.queue().load().mean_service;
  EXPECT_GT(mean, (12ms - 40us) * 32 / 33);
  EXPECT_LE(mean, 12ms);
}

// A worker that waited reports the job's run time: an idle hour before it is
// not what the job cost (worker_clock::valid is cleared before every wait).
TEST(ExecutorAdmission, AnIdleGapIsNotAJobsCost) {
  manual_clock clk;
  executor_options o;
  o.workers = 1;
  o.clock = &clk;
  executor ex(o);
  const auto ten_ms_job = [&] { clk.advance(10ms); };
  ASSERT_TRUE(ex.submit(job_options::within(clk, 24h), ten_ms_job).get().ok());
  EXPECT_EQ(ex.queue().load().mean_service, 10ms);
  ex.pause();  // returns once the worker is parked
  auto next = ex.submit(job_options::within(clk, 24h), ten_ms_job);
  clk.advance(1h);
  ex.resume();
  ASSERT_TRUE(next.get().ok());
  EXPECT_EQ(ex.queue().load().mean_service, 10ms);
}

TEST(ExecutorAdmission, RejectsByPredictedWait) {
  manual_clock clk;
  executor_options o;
  o.manual_mode = true;  // one consumer for the prediction: the crank
  o.clock = &clk;
  o.queue_capacity = 100;
  executor ex(o);
  // Teach the estimator that a job takes 10 ms.
  for (int i = 0; i < 4; ++i) ex.submit(job_options{}, [&] { clk.advance(10ms); });
  ex.run_pending();
  EXPECT_EQ(ex.queue().load().mean_service, 10ms);
  // Five queued jobs, and half a job for the worker to free up (the rule
  // assumes one is running): 55 ms before a new one starts.
  for (int i = 0; i < 5; ++i) ex.submit(job_options{}, [] {});
  job_options tight = job_options::within(clk, 40ms);
  tight.min_budget = 5ms;
  EXPECT_EQ(ex.submit(tight, [] {}).get().st, status::expired(expiry_stage::admission));
  job_options roomy = job_options::within(clk, 60ms);  // exactly 55 ms + 5 ms
  roomy.min_budget = 5ms;
  auto admitted = ex.submit(roomy, [] {});
  ex.run_pending();
  EXPECT_TRUE(admitted.get().ok());

  // The check can be turned off: the same job is then admitted (and expires in the queue).
  executor_options off = o;
  off.predicted_wait_admission = false;
  executor ex2(off);
  for (int i = 0; i < 4; ++i) ex2.submit(job_options{}, [&] { clk.advance(10ms); });
  ex2.run_pending();
  for (int i = 0; i < 5; ++i) ex2.submit(job_options{}, [&] { clk.advance(10ms); });
  job_options tight2 = job_options::within(clk, 40ms);
  tight2.min_budget = 5ms;
  auto h = ex2.submit(tight2, [] {});
  ex2.run_pending();
  EXPECT_EQ(h.get().st, status::expired(expiry_stage::queue));
}

}  // namespace
}  // namespace hourglass
