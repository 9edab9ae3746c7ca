// The one rule every admission, expiry and retry check applies: a job is
// worth starting only while it can start with at least its minimum useful
// budget left (one tick when that is zero) before its deadline and before
// its freshness runs out. The executor's admission and dequeue checks
// (admission_policy.hpp), a retry's plan (job_retry.hpp) and the fleet's
// judgement at a start (fleet/src/consumer.cpp) all call starts_in_time;
// the fleet's scripts apply its Lua twin (fleet/lua/lib/admission.lua,
// held to it by tests/fleet/lua_twins_test.cpp).
#pragma once

#include "hourglass/time.hpp"

namespace hourglass {

// The time bounds a job is stamped with.
//  - deadline: the caller waits until then (sync jobs; an async job's
//    overall deadline across its attempts); `never`: none.
//  - start_by: when its freshness runs out (async jobs); for a sync job its
//    deadline.
//  - min_budget: the least run time that can still produce a useful result.
//    A job is never started with nothing left: at least one tick must
//    remain even when min_budget is zero ("if r <= 0, fail at once").
struct job_bounds {
  time_point deadline = never;
  time_point start_by = never;
  duration min_budget = duration::zero();

  // The last instant at which starting the job is still useful (inclusive):
  // the earlier of its deadline and its freshness, less max(min_budget, 1 tick).
  constexpr time_point latest_useful_start() const noexcept {
    const time_point bound = earliest(deadline, start_by);
    if (bound == never) return never;
    const duration need = min_budget > duration::zero() ? min_budget : duration(1);
    return saturating_sub(bound, need);
  }
};

// Whether a job that would wait `wait` from `now` (a predicted wait, a
// retry's backoff) still starts in time. duration::max(): a wait nothing
// will end (no worker serves the queue), in time only for a job without bounds.
constexpr bool starts_in_time(const job_bounds& job, time_point now, duration wait = duration::zero()) noexcept {
  const time_point latest = job.latest_useful_start();
  if (latest == never) return true;
  if (wait == duration::max() || now > latest) return false;
  return saturating_add(now, wait < duration::zero() ? duration::zero() : wait) <= latest;
}

}  // namespace hourglass
