// The executor's per-job fast paths: workers taking short jobs in batches,
// one clock read per job on a busy worker, shutdown bookkeeping by push
// attempts, the queue-depth / workers-busy gauges read at snapshot time, and
// job records carved from reference-counted slabs.
// Real threads and the real clock (batches only form once the mean service
// time is known to be short); runs under TSan and ASan+UBSan.
#include "hourglass/executor.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/eventually.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// Counts outcomes per job id; a second outcome for the same id is a failure.
struct outcome_book {
  explicit outcome_book(std::size_t n) : seen(n) {}
  void record(std::size_t id, const status& st) {
    if (seen[id].fetch_add(1) != 0) twice.fetch_add(1);
    if (st.is_ok()) {
      ok.fetch_add(1);
    } else if (st.code == outcome::cancelled) {
      cancelled.fetch_add(1);
    } else if (st.code == outcome::rejected) {
      rejected.fetch_add(1);
    } else {
      other.fetch_add(1);
    }
    total.fetch_add(1);
  }
  std::vector<std::atomic<int>> seen;
  std::atomic<int> total{0}, ok{0}, cancelled{0}, rejected{0}, other{0}, twice{0};
};

// Makes the service-time estimate short, so that workers take batches. Best
// effort: on a loaded machine a preempted job can hold the estimate up for a
// while (the tests below hold either way; they only cover less).
void warm_up(executor& ex) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    constexpr int kJobs = 2000;
    std::atomic<int> done{0};
    for (int i = 0; i < kJobs; ++i) {
      ex.submit(
          job_options{}, [] {}, [&](job_result<std::monostate>&&) noexcept { done.fetch_add(1); });
    }
    while (done.load() != kJobs) std::this_thread::yield();
    const auto mean = ex.queue().load().mean_service;
    if (mean > duration::zero() && mean < std::chrono::microseconds(2)) return;
  }
}

TEST(ExecutorBatch, ShutdownWithBatchesInHandGivesEveryJobOneOutcome) {
  for (int round = 0; round < 20; ++round) {
    executor_options o;
    o.workers = 2;
    o.queue_capacity = 1 << 16;
    executor ex(o);
    warm_up(ex);
    constexpr std::size_t kJobs = 20000;
    outcome_book book(kJobs);
    std::atomic<int> runs{0};
    for (std::size_t i = 0; i < kJobs; ++i) {
      ex.submit(
          job_options{}, [&] { runs.fetch_add(1); },
          [&book, i](job_result<std::monostate>&& r) noexcept { book.record(i, r.st); });
    }
    ex.shutdown();  // no grace: queued jobs, including those in a worker's batch, are cancelled
    EXPECT_EQ(book.total.load(), static_cast<int>(kJobs));
    EXPECT_EQ(book.twice.load(), 0);
    EXPECT_EQ(book.ok.load() + book.cancelled.load(), static_cast<int>(kJobs));
    EXPECT_EQ(book.ok.load(), runs.load());
    EXPECT_EQ(ex.queue().depth(), 0u);
    EXPECT_EQ(ex.busy(), 0u);
  }
}

TEST(ExecutorBatch, DrainRunsEveryBatchedJob) {
  executor_options o;
  o.workers = 2;
  o.queue_capacity = 1 << 16;
  executor ex(o);
  warm_up(ex);
  constexpr std::size_t kJobs = 50000;
  outcome_book book(kJobs);
  for (std::size_t i = 0; i < kJobs; ++i) {
    ex.submit(
        job_options{}, [] {}, [&book, i](job_result<std::monostate>&& r) noexcept { book.record(i, r.st); });
  }
  ex.shutdown(ex.get_clock().now() + 60s);  // returns once everything ran
  EXPECT_EQ(book.ok.load(), static_cast<int>(kJobs));
  EXPECT_EQ(book.twice.load(), 0);
}

TEST(ExecutorBatch, PauseLeavesNoJobInAWorkersHands) {
  executor_options o;
  o.workers = 2;
  o.queue_capacity = 1 << 16;
  executor ex(o);
  warm_up(ex);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> done{0};
    constexpr int kJobs = 5000;
    for (int i = 0; i < kJobs; ++i) {
      ex.submit(
          job_options{}, [] {}, [&](job_result<std::monostate>&&) noexcept { done.fetch_add(1); });
    }
    ex.pause();  // mid-stream: workers finish the batch in hand, then park
    const int finished = done.load();
    std::this_thread::sleep_for(2ms);
    EXPECT_EQ(done.load(), finished) << "a job ran while every worker was parked";
    EXPECT_EQ(ex.busy(), 0u);
    // Whatever did not run is still queued, counted in the depth.
    EXPECT_EQ(ex.queue().depth(), static_cast<std::size_t>(kJobs - finished));
    EXPECT_EQ(ex.stats().snapshot().queue_depth, kJobs - finished);
    ex.resume();
    while (done.load() != kJobs) std::this_thread::yield();
  }
}

TEST(ExecutorBatch, SubmitsRacingShutdownGetOneOutcomeEach) {
  for (int round = 0; round < 20; ++round) {
    executor_options o;
    o.workers = 2;
    o.queue_capacity = 4096;
    executor ex(o);
    constexpr int kProducers = 3;
    constexpr std::size_t kPerProducer = 20000;
    outcome_book book(kProducers * kPerProducer);
    std::atomic<int> started{0};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        started.fetch_add(1);
        for (std::size_t k = 0; k < kPerProducer; ++k) {
          const std::size_t id = static_cast<std::size_t>(p) * kPerProducer + k;
          ex.submit(
              job_options{}, [] {}, [&book, id](job_result<std::monostate>&& r) noexcept { book.record(id, r.st); });
        }
      });
    }
    while (started.load() != kProducers) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (round % 5)));
    ex.shutdown(ex.get_clock().now() + std::chrono::milliseconds(round % 2));
    // Every job admitted before shutdown() returned has its outcome by then;
    // the producers' later submits are refused on their own thread.
    for (auto& t : producers) t.join();
    EXPECT_EQ(book.total.load(), static_cast<int>(kProducers * kPerProducer));
    EXPECT_EQ(book.twice.load(), 0);
    EXPECT_EQ(book.other.load(), 0);
    EXPECT_EQ(ex.queue().depth(), 0u);
  }
}

TEST(ExecutorBatch, TimingsOfAJobStartedRightAfterAnother) {
  manual_clock clk;
  executor_options o;
  o.workers = 1;
  o.clock = &clk;
  executor ex(o);
  std::atomic<bool> started{false}, release{false};
  auto slow = ex.submit(job_options{}, [&] {
    started = true;
    while (!release.load()) std::this_thread::yield();
    clk.advance(20ms);  // its work, after `quick` is queued
  });
  while (!started.load()) std::this_thread::yield();        // the slow job is running: no guessing how soon
  auto quick = ex.submit(job_options{}, [] { return 1; });  // popped without waiting when `slow` ends
  release = true;
  const auto s = slow.get();
  const auto q = quick.get();
  ASSERT_TRUE(s.st.is_ok());
  ASSERT_TRUE(q.st.is_ok());
  EXPECT_EQ(s.timings.run_time, 20ms);
  // Admitted as `slow` began its 20 ms, started at its end (the worker's
  // last reading, no clock read of its own), ran for no time at all.
  EXPECT_EQ(q.timings.queue_delay, 20ms);
  EXPECT_EQ(q.timings.run_time, duration::zero()) << "not slow's 20 ms";
}

TEST(ExecutorBatch, GaugesAreReadFromTheExecutorAtSnapshotTime) {
  metrics m;
  {
    executor_options o;
    o.workers = 1;
    o.metrics = &m;
    executor ex(o);
    std::atomic<bool> release{false};
    std::atomic<bool> running{false};
    auto blocker = ex.submit(job_options{}, [&] {
      running.store(true);
      while (!release.load()) std::this_thread::yield();
    });
    while (!running.load()) std::this_thread::yield();
    std::vector<job_handle<std::monostate>> queued;
    for (int i = 0; i < 3; ++i) queued.push_back(ex.submit(job_options{}, [] {}));
    auto snap = m.snapshot();
    EXPECT_EQ(snap.queue_depth, 3);
    EXPECT_EQ(snap.workers_busy, 1);
    release.store(true);
    for (auto& h : queued) h.wait();
    blocker.wait();
    ex.shutdown();
    snap = m.snapshot();
    EXPECT_EQ(snap.queue_depth, 0);
    EXPECT_EQ(snap.workers_busy, 0);
  }
  // The executor is gone: the registry no longer reads from it, and keeps its last values.
  const auto snap = m.snapshot();
  EXPECT_EQ(snap.queue_depth, 0);
  EXPECT_EQ(snap.workers_busy, 0);
  m.queue_depth.set(7);
  EXPECT_EQ(m.snapshot().queue_depth, 7);
}

TEST(ExecutorBatch, HandlesOutliveTheExecutor) {
  std::vector<job_handle<int>> handles;
  std::vector<job_ref> refs;
  {
    executor_options o;
    o.workers = 2;
    o.queue_capacity = 4096;
    executor ex(o);
    for (int i = 0; i < 1000; ++i) {
      handles.push_back(ex.submit(job_options{}, [i] { return i; }));
      refs.push_back(ex.submit(
          job_options{}, [] {}, [](job_result<std::monostate>&&) noexcept {}));
    }
  }  // destroyed with no grace: every job has its outcome, the handles still hold their records
  for (auto& h : handles) {
    const auto r = h.get();
    EXPECT_TRUE(r.st.is_ok() || r.st.code == outcome::cancelled) << describe(r.st);
  }
  for (auto& r : refs) (void)r.cancel();  // the job is done: a no-op on a record the executor no longer owns
  handles.clear();
  refs.clear();
}

TEST(ExecutorBatch, KeptRecordsKeepTheirSlabAfterTheExecutorIsGone) {
  std::vector<job_handle<int>> kept;
  {
    executor_options o;
    o.workers = 2;
    o.queue_capacity = 8192;
    executor ex(o);
    for (int i = 0; i < 5000; ++i) {
      auto h = ex.submit(job_options{}, [i] { return i; });
      if (i % 97 == 0) kept.push_back(std::move(h));  // one record kept here and there, in many slabs
    }
    ex.shutdown(ex.get_clock().now() + 60s);
  }
  for (std::size_t k = 0; k < kept.size(); ++k) {
    auto r = kept[k].get();
    ASSERT_TRUE(r.st.is_ok());
    EXPECT_EQ(r.value(), static_cast<int>(k) * 97);
    EXPECT_FALSE(kept[k].cancel());  // it ran
  }
  kept.clear();  // the last records go, and their slabs with them (ASan: no leak, no use after free)
}

TEST(ExecutorBatch, LargeRecordsAndThrowingCopiesAreHandled) {
  executor_options o;
  o.workers = 1;
  executor ex(o);
  std::array<char, 4096> big{};
  big[100] = 'x';
  auto large = ex.submit(job_options{}, [big] { return big[100]; });  // too big for a slab: the heap
  EXPECT_EQ(large.get().value(), 'x');

  struct throws_on_copy {
    bool armed = false;
    throws_on_copy() = default;
    throws_on_copy(const throws_on_copy& o) : armed(o.armed) {
      if (armed) throw std::runtime_error("copy");
    }
    throws_on_copy(throws_on_copy&&) noexcept = default;
    int operator()() const { return 7; }
  };
  throws_on_copy f;
  f.armed = true;
  for (int i = 0; i < 200; ++i) {  // a slab's worth of failed constructions, then normal jobs in the same slab
    EXPECT_THROW((void)ex.submit(job_options{}, f), std::runtime_error);
  }
  f.armed = false;
  std::vector<job_handle<int>> hs;
  for (int i = 0; i < 200; ++i) hs.push_back(ex.submit(job_options{}, f));
  for (auto& h : hs) EXPECT_EQ(h.get().value(), 7);
}

using test_common::eventually;

// Regression: a worker took up to 16 jobs at once, and one slow job among
// them stranded the rest while the other worker idled.
TEST(ExecutorBatch, NoJobWaitsInABatchBehindASlowJobWhileAWorkerIdles) {
  for (int round = 0; round < 5; ++round) {
    executor_options o;
    o.workers = 2;
    executor ex(o);
    warm_up(ex);
    ex.pause();
    std::atomic<bool> release{false};
    std::atomic<int> short_done{0};
    constexpr int kShort = 39;
    std::vector<job_handle<std::monostate>> hs;
    for (int i = 0; i < kShort + 1; ++i) {
      if (i == 3) {  // among the first six: in the first worker's batch
        hs.push_back(ex.submit(job_options{}, [&] {
          while (!release.load()) std::this_thread::sleep_for(100us);
        }));
      } else {
        hs.push_back(ex.submit(job_options{}, [&] { short_done.fetch_add(1); }));
      }
    }
    ex.resume();
    EXPECT_TRUE(eventually([&] { return short_done.load() == kShort; }))
        << "round " << round << ": only " << short_done.load() << " of " << kShort
        << " short jobs ran while one blocked";
    release.store(true);
    for (auto& h : hs) EXPECT_TRUE(h.get().ok());
  }
}

// Jobs a worker holds in its batch still wait: they count in the queue's
// depth, and so in capacity and the predicted wait.
TEST(ExecutorBatch, JobsHeldInABatchCountInTheQueueDepth) {
  executor_options o;
  o.workers = 1;
  executor ex(o);
  warm_up(ex);
  ex.pause();
  std::atomic<bool> started{false}, release{false};
  auto blocker = ex.submit(job_options{}, [&] {
    started.store(true);
    while (!release.load()) std::this_thread::sleep_for(100us);
  });
  constexpr std::size_t kHeld = 10;
  std::vector<job_handle<std::monostate>> hs;
  for (std::size_t i = 0; i < kHeld; ++i) hs.push_back(ex.submit(job_options{}, [] {}));
  ex.resume();
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  EXPECT_EQ(ex.queue().depth(), kHeld);
  EXPECT_EQ(ex.queue().load().depth, kHeld);
  EXPECT_EQ(ex.stats().snapshot().queue_depth, static_cast<std::int64_t>(kHeld));
  release.store(true);
  EXPECT_TRUE(blocker.get().ok());
  for (auto& h : hs) EXPECT_TRUE(h.get().ok());
  EXPECT_EQ(ex.queue().depth(), 0u);
}

}  // namespace
}  // namespace hourglass
