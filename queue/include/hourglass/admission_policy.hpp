// Admission and expiry decisions: pure functions of (job, load, now).
//
// They read no clock and touch no queue, so they are tested exactly, with no
// threads; the queue and the executor call them with the time they read once.
#pragma once

#include <atomic>
#include <cstdint>

#include "hourglass/job_bounds.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// What admission knows about the load when it decides.
struct queue_load {
  std::size_t depth = 0;                     // jobs waiting now
  std::size_t workers = 1;                   // workers draining the queue
  duration mean_service = duration::zero();  // what a job costs a worker, observed mean (0: unknown)
};

// Expected wait before a job admitted now would start: (depth + 1/2) x
// service / workers. With jobs waiting every worker is busy (workers never
// idle beside a queue), and busy workers free up one every service / workers
// on average: the newcomer waits one such interval per job ahead of it, and
// half of one for the first worker to free up (it arrives at a random point
// in that interval). Without the half, admission under overload filled the
// queue to the edge of every budget, and jobs started with too little left
// and ended late (seen in overload runs with 100 us jobs). An empty queue
// predicts no wait: a worker may well be free. A backlog that no worker
// serves (a fleet with no live slot) waits for ever: duration::max(). The
// fleet predicts its wait with this too, on the broker's counts (backlog,
// mean run, live slots), and its scripts with the Lua twin
// (fleet/lua/lib/fleet_wait.lua).
constexpr duration predicted_wait(const queue_load& load) noexcept {
  if (load.depth == 0) return duration::zero();
  if (load.workers == 0) return duration::max();
  if (load.mean_service <= duration::zero()) return duration::zero();
  const auto per_worker = (static_cast<double>(load.depth) + 0.5) / static_cast<double>(load.workers);
  const double ns = per_worker * static_cast<double>(load.mean_service.count());
  return ns >= 9.2e18 ? duration::max() : duration(static_cast<duration::rep>(ns));
}

struct admission_options {
  bool check_budget = true;          // false: the naive `fifo` policy, no deadline checks
  bool check_predicted_wait = true;  // reject work that cannot plausibly start in time
};

// status::ok() admits; otherwise deadline_exceeded/admission. Capacity and
// shutdown are the queue's own checks, made before this one.
constexpr status admit(const job_bounds& job, const queue_load& load, time_point now,
                       const admission_options& options = {}) noexcept {
  if (!options.check_budget) return status::ok();
  const duration wait = options.check_predicted_wait ? predicted_wait(load) : duration::zero();
  return starts_in_time(job, now, wait) ? status::ok() : status::expired(expiry_stage::admission);
}

// At dequeue and again when the job starts: still worth running?
constexpr bool expired_at_start(const job_bounds& job, time_point now, bool check_budget = true) noexcept {
  return check_budget && !starts_in_time(job, now);
}

// Exponentially weighted mean of observed service times, lock-free. Updated
// by workers after each run, read by admission. A worker that ran jobs back
// to back reports the time between their ends: what a job costs it, so the
// mean follows throughput and not just run time.
class service_time_estimator {
 public:
  // A worker's own running mean, kept where only it writes. The shared mean
  // is written only when the worker's has moved from it by more than 1/32
  // (3 %): written after every job, its line was taken from every submitter
  // that read it for admission and back, a cross-core miss per job with a
  // deadline, the larger part of what a deadline added to an empty job.
  // Empty jobs publish ~5 % of the time (1/64: 16 %); admission's error
  // from the lag stays under the 3 %, less than the mean of 16 jobs moves
  // by itself.
  struct worker_mean {
    duration::rep ns = 0;
  };

  void observe(duration cost, worker_mean& mine) noexcept {
    mine.ns = next_mean(mine.ns, cost);
    const auto shown = mean_ns_.load(std::memory_order_relaxed);
    const auto drift = mine.ns > shown ? mine.ns - shown : shown - mine.ns;
    if (drift > shown / 32) mean_ns_.store(mine.ns, std::memory_order_relaxed);
  }
  // For an observer with no mean of its own: the shared mean moves every time.
  void observe(duration cost) noexcept {
    mean_ns_.store(next_mean(mean_ns_.load(std::memory_order_relaxed), cost), std::memory_order_relaxed);
  }  // lost updates between observers only blur the mean
  duration mean() const noexcept { return duration(mean_ns_.load(std::memory_order_relaxed)); }

 private:
  // alpha = 1/16: smooth enough to ignore one slow job, quick enough to follow a change.
  static constexpr duration::rep next_mean(duration::rep old, duration cost) noexcept {
    const auto sample = cost.count() < 0 ? 0 : cost.count();
    return old == 0 ? sample : old + (sample - old) / 16;
  }
  std::atomic<duration::rep> mean_ns_{0};
};

}  // namespace hourglass
