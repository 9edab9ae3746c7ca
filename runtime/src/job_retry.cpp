#include "hourglass/job_retry.hpp"

#include <cmath>
#include <stdexcept>

#include "hourglass/job_bounds.hpp"
#include "hourglass/retry.hpp"

namespace hourglass {

namespace {

double unit_interval(double x) noexcept {
  if (!(x > 0.0)) return 0.0;  // NaN too
  return x > 1.0 ? 1.0 : x;
}

}  // namespace

duration job_retry_backoff(const job_retry_policy& p, int retry, double jitter_sample) noexcept {
  // The ceiling is retry.hpp's exponential backoff without its jitter.
  const retry_policy ceiling{.initial_backoff = p.base, .max_backoff = p.cap, .backoff_multiplier = 2.0, .jitter = 0.0};
  const duration b = retry_backoff(ceiling, retry, 0.0);
  if (!p.jitter) return b;
  const double ns = static_cast<double>(b.count()) * unit_interval(jitter_sample);
  if (!(ns < 9223372036854775808.0)) return duration::max();  // 2^63: saturate
  return duration(std::llround(ns));
}

job_retry_plan plan_job_retry(const job_retry_policy& p, const job_attempt_end& end, time_point now,
                              double jitter_sample) noexcept {
  job_retry_plan plan;
  if (!end.st.retryable() || !end.retryable_error) return plan;  // not_retryable
  const int done = end.attempts_done < 1 ? 1 : end.attempts_done;
  if (done >= p.max_attempts) {
    plan.verdict = job_retry_verdict::exhausted;
    return plan;
  }
  plan.due = saturating_add(now, job_retry_backoff(p, done, jitter_sample));
  const job_bounds next{.deadline = end.overall_deadline, .min_budget = end.min_budget};
  plan.verdict = starts_in_time(next, plan.due, end.predicted_wait) ? job_retry_verdict::scheduled
                                                                    : job_retry_verdict::no_budget;
  return plan;
}

void validate(const job_retry_policy& p) {
  if (p.max_attempts < 1 || p.max_attempts > 100) throw std::invalid_argument("retry attempts must be from 1 to 100");
  if (p.base < duration::zero()) throw std::invalid_argument("retry backoff base must not be negative");
  if (p.cap < p.base) throw std::invalid_argument("retry backoff cap must not be below its base");
}

}  // namespace hourglass
