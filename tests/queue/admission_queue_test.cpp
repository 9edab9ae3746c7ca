#include "hourglass/admission_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

// Its own namespace: a unity build puts it beside files with constants of the same names.
namespace hourglass::admission_queue_tests {
namespace {

using namespace std::chrono_literals;

constexpr time_point t0 = time_point{} + 1h;

TEST(AdmissionQueue, CapacityIsAHardBound) {
  admission_queue q({.capacity = 4});
  std::vector<queued_job> jobs(6);
  int admitted = 0;
  int full = 0;
  for (auto& j : jobs) {
    const status s = q.try_push(&j, t0);
    if (s.is_ok()) admitted++;
    if (s == status::rejected(reject_reason::queue_full)) full++;
  }
  EXPECT_EQ(admitted, 4);
  EXPECT_EQ(full, 2);
  EXPECT_EQ(q.depth(), 4u);
  EXPECT_EQ(q.try_pop(), &jobs[0]);  // FIFO within one producer
  EXPECT_EQ(q.try_push(&jobs[4], t0), status::ok());
}

// Producers check capacity against their own copy of the pop count, which
// goes stale as workers pop: stale, it may only refuse, never admit past
// capacity, and a refusal looks again so pops are seen at once.
TEST(AdmissionQueue, ProducersSeePopsAtOnceAndBulkTakenJobsStillCount) {
  admission_queue q({.capacity = 4});
  std::vector<queued_job> jobs(4);
  for (int cycle = 0; cycle < 3; ++cycle) {
    for (auto& j : jobs) ASSERT_TRUE(q.try_push(&j, t0).is_ok());
    EXPECT_TRUE(q.full());
    EXPECT_EQ(q.try_push(&jobs[0], t0), status::rejected(reject_reason::queue_full));
    ASSERT_NE(q.try_pop(), nullptr);
    ASSERT_NE(q.try_pop(), nullptr);
    EXPECT_FALSE(q.full());
    EXPECT_EQ(q.depth(), 2u);
    ASSERT_TRUE(q.try_push(&jobs[0], t0).is_ok());
    ASSERT_TRUE(q.try_push(&jobs[1], t0).is_ok());
    EXPECT_EQ(q.try_push(&jobs[2], t0), status::rejected(reject_reason::queue_full));
    // Taken in bulk, not yet started: still waiting, still in capacity.
    queued_job* taken[4];
    ASSERT_EQ(q.try_pop_bulk(taken, 4), 4u);
    EXPECT_EQ(q.depth(), 4u);
    EXPECT_TRUE(q.full());
    EXPECT_EQ(q.try_push(&jobs[2], t0), status::rejected(reject_reason::queue_full));
    q.dequeued(3);
    EXPECT_EQ(q.depth(), 1u);
    EXPECT_FALSE(q.full());
    q.dequeued(1);
    EXPECT_EQ(q.depth(), 0u);
  }
}

TEST(AdmissionQueue, StampsAdmissionTime) {
  admission_queue q({.capacity = 4});
  queued_job j;
  ASSERT_TRUE(q.try_push(&j, t0 + 5ms).is_ok());
  EXPECT_EQ(j.admitted_at, t0 + 5ms);
}

TEST(AdmissionQueue, ClosedRefusesWithShuttingDownButDrains) {
  admission_queue q({.capacity = 4});
  queued_job a, b;
  ASSERT_TRUE(q.try_push(&a, t0).is_ok());
  q.close();
  EXPECT_EQ(q.try_push(&b, t0), status::rejected(reject_reason::shutting_down));
  EXPECT_EQ(q.try_pop(), &a);
  EXPECT_EQ(q.try_pop(), nullptr);
}

TEST(AdmissionQueue, RejectsInsufficientBudgetBeforeTakingASlot) {
  admission_queue q({.capacity = 1});
  queued_job late;
  late.bounds = {t0, t0, 1ms};
  EXPECT_EQ(q.try_push(&late, t0), status::expired(expiry_stage::admission));
  EXPECT_EQ(q.depth(), 0u);
}

TEST(AdmissionQueue, PredictedWaitUsesObservedServiceTimes) {
  admission_queue q({.capacity = 100, .workers = 1});
  for (int i = 0; i < 10; ++i) q.observe_service_time(2ms);
  std::vector<queued_job> backlog(5);
  for (auto& j : backlog) ASSERT_TRUE(q.try_push(&j, t0).is_ok());
  // 5 queued x 2 ms, plus half of the running one: 11 ms predicted wait.
  queued_job tight;
  tight.bounds = {t0 + 13ms - 1ns, t0 + 13ms - 1ns, 2ms};
  queued_job ok;
  ok.bounds = {t0 + 13ms, t0 + 13ms, 2ms};
  EXPECT_EQ(q.try_push(&tight, t0), status::expired(expiry_stage::admission));
  EXPECT_EQ(q.try_push(&ok, t0), status::ok());
}

// A run resumed after its wait is admitted work continuing: its bounds judge
// it, the predicted wait does not (as a fleet puts it straight back on its
// stream). The same job, not continuing, is refused on the guess.
TEST(AdmissionQueue, AContinuingJobIsJudgedByItsBoundsNotByThePredictedWait) {
  admission_queue q({.capacity = 100, .workers = 1});
  for (int i = 0; i < 10; ++i) q.observe_service_time(5s);
  std::vector<queued_job> backlog(2);
  for (auto& j : backlog) ASSERT_TRUE(q.try_push(&j, t0).is_ok());  // 12.5 s predicted
  queued_job fresh, resumed;
  fresh.bounds = resumed.bounds = {t0 + 100ms, t0 + 100ms, 0ns};
  resumed.continuing = true;
  EXPECT_EQ(q.try_push(&fresh, t0), status::expired(expiry_stage::admission));
  EXPECT_EQ(q.try_push(&resumed, t0), status::ok());
  queued_job too_late;  // its bounds still hold: nothing left is nothing left
  too_late.bounds = {t0, t0, 0ns};
  too_late.continuing = true;
  EXPECT_EQ(q.try_push(&too_late, t0), status::expired(expiry_stage::admission));
}

// admission() skips reading the depth when a full queue could not make the
// job late: its answers must be admit()'s with the real depth, at every
// depth and around every edge of the budget.
TEST(AdmissionQueue, AdmissionAnswersAsAdmitWithTheRealDepthDoes) {
  admission_queue q({.capacity = 8, .workers = 2});
  service_time_estimator::worker_mean mine;
  q.observe_service_time(1ms, mine);
  std::vector<queued_job> backlog(8);
  for (std::size_t depth = 0;; ++depth) {
    ASSERT_EQ(q.depth(), depth);
    for (const duration min_budget : {duration(0ns), duration(100us), duration(2ms)}) {
      for (duration slack = -1ms; slack <= 8ms; slack += 250us) {
        for (const duration nudge : {duration(-1ns), duration(0ns), duration(1ns)}) {
          const time_point deadline = t0 + min_budget + slack + nudge;
          const job_bounds job{deadline, deadline, min_budget};
          EXPECT_EQ(q.admission(job, t0), admit(job, q.load(), t0))
              << "depth " << depth << ", slack " << (slack + nudge).count() << " ns";
        }
      }
    }
    if (depth == backlog.size()) break;
    ASSERT_TRUE(q.try_push(&backlog[depth], t0).is_ok());
  }
  const job_bounds async_job{never, t0 + 1ns, 0ns};  // freshness bound only
  EXPECT_EQ(q.admission(async_job, t0), admit(async_job, q.load(), t0));
  EXPECT_EQ(q.admission(job_bounds{}, t0), status::ok());
}

// Many producers and consumers: nothing lost, nothing twice, never over capacity.
TEST(AdmissionQueue, ConcurrentProducersAndConsumers) {
  constexpr std::size_t kCapacity = 64;
  constexpr int kPerProducer = 20000;
  admission_queue q({.capacity = kCapacity, .workers = 2});
  std::vector<std::vector<queued_job>> jobs(3, std::vector<queued_job>(kPerProducer));
  std::atomic<int> admitted{0}, rejected{0}, popped{0};
  std::atomic<bool> producers_done{false};
  std::vector<std::atomic<int>> seen(3 * kPerProducer);
  std::vector<std::thread> threads;
  for (int p = 0; p < 3; ++p) {
    threads.emplace_back([&, p] {
      for (auto& j : jobs[static_cast<std::size_t>(p)]) {
        if (q.try_push(&j, t0).is_ok()) admitted++;
        else rejected++;
        EXPECT_LE(q.depth(), kCapacity);
      }
    });
  }
  std::vector<std::thread> consumers;
  for (int c = 0; c < 2; ++c) {
    consumers.emplace_back([&] {
      for (;;) {
        queued_job* j = q.try_pop();
        if (j == nullptr) {
          if (producers_done.load() && q.depth() == 0) return;
          std::this_thread::yield();
          continue;
        }
        for (int p = 0; p < 3; ++p) {
          auto& v = jobs[static_cast<std::size_t>(p)];
          if (j >= v.data() && j < v.data() + v.size())
            seen[static_cast<std::size_t>(p * kPerProducer + (j - v.data()))]++;
        }
        popped++;
      }
    });
  }
  for (auto& t : threads) t.join();
  producers_done = true;
  for (auto& t : consumers) t.join();
  EXPECT_EQ(admitted.load() + rejected.load(), 3 * kPerProducer);
  EXPECT_EQ(popped.load(), admitted.load());
  for (auto& s : seen) EXPECT_LE(s.load(), 1);
  EXPECT_EQ(q.depth(), 0u);
}

}  // namespace
}  // namespace hourglass::admission_queue_tests
