#include "hourglass/admission_policy.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

constexpr time_point t0 = time_point{} + 1h;
constexpr status kAdmissionExpiry = status::expired(expiry_stage::admission);

TEST(AdmissionPolicy, NoDeadlineAlwaysAdmits) {
  EXPECT_EQ(admit(job_bounds{}, queue_load{1000000, 1, 1s}, t0), status::ok());
}

TEST(AdmissionPolicy, RejectsBelowMinimumUsefulBudget) {
  const job_bounds job{t0 + 10ms, t0 + 10ms, 4ms};
  EXPECT_EQ(admit(job, {}, t0), status::ok());
  EXPECT_EQ(admit(job, {}, t0 + 6ms), status::ok());            // exactly 4 ms left
  EXPECT_EQ(admit(job, {}, t0 + 6ms + 1ns), kAdmissionExpiry);  // less than 4 ms left
}

// Regression: with no minimum budget, a job with exactly zero budget left
// was admitted (now > deadline tested, the context tests >=), so it started
// with a context already done.
TEST(AdmissionPolicy, NothingIsStartedWithZeroBudgetLeft) {
  const job_bounds job{t0 + 10ms, t0 + 10ms, 0ms};
  EXPECT_EQ(admit(job, {}, t0 + 10ms - 1ns), status::ok());  // one tick left
  EXPECT_EQ(admit(job, {}, t0 + 10ms), kAdmissionExpiry);    // nothing left
  EXPECT_FALSE(expired_at_start(job, t0 + 10ms - 1ns));
  EXPECT_TRUE(expired_at_start(job, t0 + 10ms));
  EXPECT_EQ(job.latest_useful_start(), t0 + 10ms - 1ns);
}

TEST(AdmissionPolicy, RejectsWorkThatCannotStartInTime) {
  // 20 queued jobs of 1 ms on 2 busy workers, which free up one every
  // 0.5 ms: a new job waits 20 such intervals, and half of one for the first.
  const queue_load backed_up{20, 2, 1ms};
  EXPECT_EQ(predicted_wait(backed_up), 10250us);
  const job_bounds tight{t0 + 13250us + 1ns, t0 + 13250us + 1ns, 3ms + 2ns};  // 10.25 ms wait + 3 ms > 13.25 ms
  const job_bounds loose{t0 + 13250us, t0 + 13250us, 3ms};                    // exactly enough
  EXPECT_EQ(admit(tight, backed_up, t0), kAdmissionExpiry);
  EXPECT_EQ(admit(loose, backed_up, t0), status::ok());
  // The check can be turned off; the plain budget check stays.
  admission_options no_prediction;
  no_prediction.check_predicted_wait = false;
  EXPECT_EQ(admit(tight, backed_up, t0, no_prediction), status::ok());
}

TEST(AdmissionPolicy, FreshnessBoundsAsyncStarts) {
  // An async job: no caller deadline, worth starting for 5 s, with its
  // minimum budget (one tick when it has none) still left of its freshness,
  // as a fleet judges it at enqueue and at its start.
  const job_bounds async_job{never, t0 + 5s, 0ms};
  EXPECT_EQ(admit(async_job, {}, t0 + 5s - 1ns), status::ok());
  EXPECT_EQ(admit(async_job, {}, t0 + 5s), kAdmissionExpiry);
  EXPECT_FALSE(expired_at_start(async_job, t0 + 5s - 1ns));
  EXPECT_TRUE(expired_at_start(async_job, t0 + 5s));
  const job_bounds needs_20ms{never, t0 + 5s, 20ms};
  EXPECT_FALSE(expired_at_start(needs_20ms, t0 + 5s - 20ms));
  EXPECT_TRUE(expired_at_start(needs_20ms, t0 + 5s - 20ms + 1ns));
  // With an overall deadline too, the earlier bound rules.
  const job_bounds both{t0 + 1s, t0 + 5s, 20ms};
  EXPECT_EQ(both.latest_useful_start(), t0 + 1s - 20ms);
}

// The one inequality (hourglass/job_bounds.hpp) behind admission, the
// checks at dequeue and start, a retry's plan, and the fleet's twin of it.
TEST(StartsInTime, TheWaitAndTheMinimumBudgetMustFitBeforeTheEarlierBound) {
  const job_bounds fresh_1s{never, t0 + 1s, 500ms};
  EXPECT_TRUE(starts_in_time(fresh_1s, t0, 500ms)) << "exactly its minimum budget left";
  EXPECT_FALSE(starts_in_time(fresh_1s, t0, 500ms + 1ns));
  const job_bounds no_minimum{never, t0 + 1s, 0ns};
  EXPECT_FALSE(starts_in_time(no_minimum, t0, 1s)) << "nothing starts with zero time left";
  EXPECT_TRUE(starts_in_time(no_minimum, t0, 1s - 1ns));
  EXPECT_FALSE(starts_in_time(no_minimum, t0, duration::max())) << "a wait nothing ends";
  EXPECT_TRUE(starts_in_time(job_bounds{}, t0, duration::max())) << "no bound: always";
  EXPECT_FALSE(starts_in_time(no_minimum, t0 + 2s)) << "already past";
  EXPECT_TRUE(starts_in_time(no_minimum, t0, -1s)) << "a negative wait counts as none";
}

TEST(AdmissionPolicy, FifoTurnsEveryCheckOff) {
  admission_options fifo;
  fifo.check_budget = false;
  const job_bounds expired{t0 - 1s, t0 - 1s, 1s};
  EXPECT_EQ(admit(expired, {1000, 1, 1s}, t0, fifo), status::ok());
  EXPECT_FALSE(expired_at_start(expired, t0, false));
}

TEST(AdmissionPolicy, UnknownServiceTimePredictsNoWait) {
  EXPECT_EQ(predicted_wait({100, 4, 0ns}), 0ns);
  EXPECT_EQ(predicted_wait({0, 4, 1s}), 0ns) << "an empty queue: a worker may be free";
}

TEST(AdmissionPolicy, ABacklogNoWorkerServesWaitsForEver) {
  // A fleet whose leases all expired: no live slot (its counts on the broker).
  EXPECT_EQ(predicted_wait({1, 0, 1s}), duration::max());
  EXPECT_EQ(predicted_wait({0, 0, 1s}), 0ns) << "nothing to wait behind";
  EXPECT_EQ(predicted_wait({SIZE_MAX, 1, 1h}), duration::max()) << "saturates";
}

TEST(AdmissionPolicy, AWaitIsTheJobsAheadAndHalfAnIntervalForTheFirstWorker) {
  EXPECT_EQ(predicted_wait({1, 1, 100us}), 150us);
  EXPECT_EQ(predicted_wait({9, 1, 100us}), 950us);
  // Four busy workers free up one every 25 us: four jobs ahead, 112.5 us.
  EXPECT_EQ(predicted_wait({4, 4, 100us}), 112500ns);
  EXPECT_EQ(predicted_wait({1, 8, 80us}), 15us);
  // At 10x load with s = 100 us and D = 1 ms, the ninth job in line is the
  // last that can start with its 100 us still left.
  const job_bounds job{t0 + 1ms, t0 + 1ms, 100us};
  EXPECT_EQ(admit(job, {8, 1, 100us}, t0), status::ok());
  EXPECT_EQ(admit(job, {9, 1, 100us}, t0), kAdmissionExpiry);
}

TEST(ServiceTimeEstimator, FollowsTheMean) {
  service_time_estimator est;
  EXPECT_EQ(est.mean(), 0ns);
  est.observe(1ms);
  EXPECT_EQ(est.mean(), 1ms);
  for (int i = 0; i < 200; ++i) est.observe(2ms);
  EXPECT_NEAR(static_cast<double>(est.mean().count()), 2e6, 2e6 * 0.01);
}

// A worker's own mean moves every job; the shared one only when the
// worker's has moved from it by more than 1/32, and then to the worker's.
TEST(ServiceTimeEstimator, AWorkersMeanIsPublishedOnlyWhenItHasMoved) {
  service_time_estimator est;
  service_time_estimator::worker_mean mine;
  est.observe(1600us, mine);
  EXPECT_EQ(est.mean(), 1600us);  // the first sample is published
  est.observe(2400us, mine);      // +50 us: 1/32 exactly, not more
  EXPECT_EQ(mine.ns, 1'650'000);
  EXPECT_EQ(est.mean(), 1600us);
  est.observe(1616us, mine);  // back by 2 us: still within 1/32
  EXPECT_EQ(mine.ns, 1'647'875);
  EXPECT_EQ(est.mean(), 1600us);
  est.observe(3000us, mine);  // 1,732,382 ns: moved by 132 us
  EXPECT_EQ(est.mean(), duration(mine.ns));
  EXPECT_EQ(mine.ns, 1'732'382);
  // A steady stream converges and the shared mean follows to within 1/32.
  for (int i = 0; i < 200; ++i) est.observe(800us, mine);
  EXPECT_NEAR(static_cast<double>(mine.ns), 8e5, 8e5 * 0.01);
  EXPECT_NEAR(static_cast<double>(est.mean().count()), 8e5, 8e5 / 32 + 1);
}

}  // namespace
}  // namespace hourglass
