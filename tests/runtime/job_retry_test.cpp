// The durable retry rule of async jobs, as a pure function: which attempts
// end a job, when a retry is due, and the deadline rule at its edges.
#include "hourglass/job_retry.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

// Its own namespace: a unity build puts it beside files with constants of the same names.
namespace hourglass::job_retry_tests {
namespace {

using namespace std::chrono_literals;

const time_point t0 = time_point{} + 1h;

job_attempt_end failed(int attempts_done, time_point deadline = time_point::max()) {
  job_attempt_end e;
  e.st = status::error();
  e.retryable_error = true;
  e.attempts_done = attempts_done;
  e.overall_deadline = deadline;
  return e;
}

TEST(JobRetryBackoff, FullJitterUnderAnExponentialCeiling) {
  const job_retry_policy p{.max_attempts = 10, .base = 100ms, .cap = 1s};
  EXPECT_EQ(job_retry_backoff(p, 1, 0.0), 0ms) << "full jitter reaches zero";
  EXPECT_EQ(job_retry_backoff(p, 1, 0.5), 50ms);
  EXPECT_EQ(job_retry_backoff(p, 2, 0.5), 100ms);
  EXPECT_EQ(job_retry_backoff(p, 3, 0.5), 200ms);
  EXPECT_EQ(job_retry_backoff(p, 4, 0.5), 400ms);
  EXPECT_EQ(job_retry_backoff(p, 5, 0.5), 500ms) << "capped at 1 s before the jitter";
  EXPECT_EQ(job_retry_backoff(p, 60, 0.25), 250ms) << "no overflow far along";
  EXPECT_EQ(job_retry_backoff(p, 1, 1.5), 100ms) << "samples clamp into [0, 1]";
  EXPECT_EQ(job_retry_backoff(p, 1, std::nan("")), 0ms);
  EXPECT_EQ(job_retry_backoff(p, 0, 0.5), 50ms) << "retry numbers below 1 count as the first";
  const job_retry_policy huge{.max_attempts = 2, .base = duration::max(), .cap = duration::max()};
  EXPECT_EQ(job_retry_backoff(huge, 3, 1.0), duration::max()) << "saturates";
}

TEST(JobRetryBackoff, WithoutJitterEveryWaitIsItsCeiling) {
  const job_retry_policy p{.max_attempts = 10, .base = 100ms, .cap = 1s, .jitter = false};
  for (const double sample : {0.0, 0.5, 0.999, std::nan("")}) {
    EXPECT_EQ(job_retry_backoff(p, 1, sample), 100ms) << "the sample is ignored: " << sample;
    EXPECT_EQ(job_retry_backoff(p, 2, sample), 200ms);
    EXPECT_EQ(job_retry_backoff(p, 4, sample), 800ms);
    EXPECT_EQ(job_retry_backoff(p, 5, sample), 1s) << "capped";
  }
  const job_retry_policy fixed{.max_attempts = 5, .base = 2s, .cap = 2s, .jitter = false};
  EXPECT_EQ(job_retry_backoff(fixed, 1, 0.1), 2s) << "base == cap: a fixed wait";
  EXPECT_EQ(job_retry_backoff(fixed, 4, 0.9), 2s);
  const job_retry_policy huge{.max_attempts = 2, .base = duration::max(), .cap = duration::max(), .jitter = false};
  EXPECT_EQ(job_retry_backoff(huge, 3, 0.0), duration::max()) << "saturates";
}

TEST(PlanJobRetry, WithoutJitterTheDueTimeIsExact) {
  const job_retry_policy p{.max_attempts = 3, .base = 1s, .cap = 1s, .jitter = false};
  const job_retry_plan plan = plan_job_retry(p, failed(1), t0, 0.0);
  EXPECT_EQ(plan.verdict, job_retry_verdict::scheduled);
  EXPECT_EQ(plan.due, t0 + 1s);
  EXPECT_EQ(plan_job_retry(p, failed(1, t0 + 1s), t0, 0.0).verdict, job_retry_verdict::no_budget)
      << "a fixed wait landing on the deadline does not fit, whatever a jitter sample would have drawn";
}

TEST(PlanJobRetry, OnlyARetryableErrorIsRetried) {
  const job_retry_policy p{.max_attempts = 5, .base = 1s, .cap = 10s};
  for (const status st : {status::ok(), status::expired(expiry_stage::run), status::cancelled(cancel_cause::requested),
                          status::rejected(reject_reason::circuit_open)}) {
    job_attempt_end e = failed(1);
    e.st = st;
    EXPECT_EQ(plan_job_retry(p, e, t0, 0.5).verdict, job_retry_verdict::not_retryable) << to_string(st.code);
  }
  job_attempt_end permanent = failed(1);
  permanent.retryable_error = false;  // a 4xx, or marked permanent by the handler
  EXPECT_EQ(plan_job_retry(p, permanent, t0, 0.5).verdict, job_retry_verdict::not_retryable);
  const job_retry_plan again = plan_job_retry(p, failed(1), t0, 0.5);
  EXPECT_EQ(again.verdict, job_retry_verdict::scheduled);
  EXPECT_EQ(again.due, t0 + 500ms);
}

TEST(PlanJobRetry, AtMostMaxAttemptsRun) {
  const job_retry_policy p{.max_attempts = 3, .base = 1s, .cap = 10s};
  EXPECT_EQ(plan_job_retry(p, failed(1), t0, 0.5).verdict, job_retry_verdict::scheduled);
  EXPECT_EQ(plan_job_retry(p, failed(2), t0, 0.5).verdict, job_retry_verdict::scheduled);
  EXPECT_EQ(plan_job_retry(p, failed(3), t0, 0.5).verdict, job_retry_verdict::exhausted);
  EXPECT_EQ(plan_job_retry(job_retry_policy{}, failed(1), t0, 0.5).verdict, job_retry_verdict::exhausted)
      << "by default a job is not retried";
}

// Admission's rule (starts_in_time): at least its minimum budget left.
TEST(PlanJobRetry, ARetryStartingWithExactlyItsMinimumBudgetIsScheduledOneNanosecondLessIsNot) {
  const job_retry_policy p{.max_attempts = 5, .base = 2s, .cap = 10s};
  job_attempt_end e = failed(1);
  e.predicted_wait = 300ms;
  e.min_budget = 200ms;
  // due = t0 + 1 s (2 s x 0.5); + 300 ms wait + 200 ms budget = t0 + 1.5 s.
  e.overall_deadline = t0 + 1500ms - 1ns;
  const job_retry_plan short_by_1ns = plan_job_retry(p, e, t0, 0.5);
  EXPECT_EQ(short_by_1ns.verdict, job_retry_verdict::no_budget);
  EXPECT_EQ(short_by_1ns.due, t0 + 1s) << "the due time that did not fit, for the record";
  e.overall_deadline = t0 + 1500ms;
  const job_retry_plan exactly = plan_job_retry(p, e, t0, 0.5);
  EXPECT_EQ(exactly.verdict, job_retry_verdict::scheduled);
  EXPECT_EQ(exactly.due, t0 + 1s);
}

TEST(PlanJobRetry, ARetryLandingExactlyOnTheDeadlineIsNotScheduled) {
  const job_retry_policy p{.max_attempts = 5, .base = 2s, .cap = 10s};
  job_attempt_end e = failed(1, t0 + 1s);  // due t0 + 1 s, no wait, no minimum budget: nothing left
  EXPECT_EQ(plan_job_retry(p, e, t0, 0.5).verdict, job_retry_verdict::no_budget);
  e.overall_deadline = t0 + 1s + 1ns;  // one tick left
  EXPECT_EQ(plan_job_retry(p, e, t0, 0.5).verdict, job_retry_verdict::scheduled);
}

TEST(PlanJobRetry, TheQueuesPredictedWaitCountsAgainstTheDeadline) {
  const job_retry_policy p{.max_attempts = 5, .base = 100ms, .cap = 100ms};
  job_attempt_end e = failed(1, t0 + 1s);
  EXPECT_EQ(plan_job_retry(p, e, t0, 1.0).verdict, job_retry_verdict::scheduled);
  e.predicted_wait = 900ms;
  EXPECT_EQ(plan_job_retry(p, e, t0, 1.0).verdict, job_retry_verdict::no_budget) << "100 ms + 900 ms reaches it";
  e.predicted_wait = duration::max();
  EXPECT_EQ(plan_job_retry(p, e, t0, 0.0).verdict, job_retry_verdict::no_budget) << "an unbounded wait never fits";
  e.overall_deadline = time_point::max();
  EXPECT_EQ(plan_job_retry(p, e, t0, 0.0).verdict, job_retry_verdict::scheduled) << "no deadline: attempts bound it";
  e.overall_deadline = t0;
  e.predicted_wait = 0ms;
  EXPECT_EQ(plan_job_retry(p, e, t0, 0.0).verdict, job_retry_verdict::no_budget) << "already past";
}

TEST(JobRetryPolicy, ValidateRefusesWhatCannotMeanAnything) {
  EXPECT_NO_THROW(validate(job_retry_policy{}));
  EXPECT_NO_THROW(validate(job_retry_policy{.max_attempts = 100, .base = 0ms, .cap = 0ms}));
  EXPECT_THROW(validate(job_retry_policy{.max_attempts = 0}), std::invalid_argument);
  EXPECT_THROW(validate(job_retry_policy{.max_attempts = 101}), std::invalid_argument);
  EXPECT_THROW(validate(job_retry_policy{.max_attempts = 2, .base = -1ms}), std::invalid_argument);
  EXPECT_THROW(validate(job_retry_policy{.max_attempts = 2, .base = 2s, .cap = 1s}), std::invalid_argument);
}

}  // namespace
}  // namespace hourglass::job_retry_tests
