// Retries of an async job: durable, with backoff, and inside the job's own
// overall deadline. The rule, as a pure function of (policy, state, now):
//
//   a retry is scheduled only when its due time, plus the wait the queue
//   predicts, plus the handler's minimum useful budget, still comes before
//   the job's overall deadline;
//
// otherwise the job ends deadline_exceeded, stage `retry`, at once: nobody
// wants the answer the retry would bring, so it does not wait in the queue
// for nothing. (A retry that waits through its backoff after its caller gave
// up is the bug every job queue has: a Sidekiq job set to expire in a day
// still retrying a week later.)
//
// The caller supplies `now` from the clock that decides: the broker's TIME in
// a fleet (so skewed hosts decide alike), the daemon's clock in memory.
// retry.hpp's retry_call is the same idea for a synchronous call, whose
// retries sleep inside one attempt's context.
#pragma once

#include <cstdint>
#include <string_view>

#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// Attempts (the first included) and an exponential backoff, by default with
// full jitter: the wait before retry n is uniform in [0, min(cap, base *
// 2^(n-1))), so retries of many jobs failing together spread out instead of
// returning in step (AWS's "Exponential Backoff And Jitter"). Without jitter
// it is min(cap, base * 2^(n-1)) exactly: what a partner's rate limit or a
// test needs (base == cap: a fixed wait).
struct job_retry_policy {
  int max_attempts = 1;  // 1: never retried
  duration base = std::chrono::seconds(1);
  duration cap = std::chrono::minutes(5);
  bool jitter = true;  // false: every wait is its ceiling
};

// What ends a job's attempts.
enum class job_retry_verdict : std::uint8_t {
  scheduled,      // a retry is due at `due`
  not_retryable,  // the attempt's outcome is final: ok, a permanent error, deadline_exceeded, cancelled, rejected
  exhausted,      // max_attempts ran
  no_budget,      // the retry would come too late for the job's overall deadline: deadline_exceeded/retry
};

// "scheduled", "not_retryable", "exhausted", "no_budget" (the `result` label
// of hourglass_job_retries_total, but not_retryable, which is not a retry).
constexpr std::string_view to_string(job_retry_verdict v) noexcept {
  switch (v) {
    case job_retry_verdict::scheduled: return "scheduled";
    case job_retry_verdict::not_retryable: return "not_retryable";
    case job_retry_verdict::exhausted: return "exhausted";
    case job_retry_verdict::no_budget: return "no_budget";
  }
  return "unknown";
}

struct job_retry_plan {
  job_retry_verdict verdict = job_retry_verdict::not_retryable;
  time_point due{};  // scheduled: when the retry may start; no_budget: the due time that did not fit
};

// What the planner knows of the attempt that just ended and of the job.
struct job_attempt_end {
  status st;                                        // the attempt's outcome
  bool retryable_error = false;                     // st is `error` and the handler did not mark it permanent
  int attempts_done = 1;                            // attempts that ran, this one included (>= 1)
  time_point overall_deadline = time_point::max();  // the job's deadline across attempts; max: none
  duration predicted_wait = duration::zero();       // how long a due job waits for a worker, as admission predicts
  duration min_budget = duration::zero();           // the least an attempt is worth starting with
};

// The backoff before retry number `retry` (1 = the first): jitter_sample in
// [0, 1) (clamped; NaN counts as 0) times min(cap, base * 2^(retry - 1)),
// saturating; negative policy durations count as zero. Without the policy's
// jitter the sample is ignored and the wait is the ceiling itself.
duration job_retry_backoff(const job_retry_policy& policy, int retry, double jitter_sample) noexcept;

// The next attempt of a job whose attempt just ended at `now`. Checks, in order:
// not_retryable, exhausted, then the deadline rule (starts_in_time, job_bounds.hpp)
//     due + predicted_wait <= overall_deadline - max(min_budget, 1 tick)   (due = now + backoff)
// which a retry landing exactly on the deadline fails.
job_retry_plan plan_job_retry(const job_retry_policy& policy, const job_attempt_end& end, time_point now,
                              double jitter_sample) noexcept;

// Throws std::invalid_argument for a policy that cannot mean what it says:
// max_attempts outside [1, 100], a negative base, cap below base.
void validate(const job_retry_policy& policy);

}  // namespace hourglass
