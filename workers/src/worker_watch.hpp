// The worker's deadline watch (see worker_watch). Internal to workers/.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "hourglass/clock.hpp"
#include "hourglass/detail/job_record.hpp"

namespace hourglass {

// A worker's running job, and the one timer that fires its deadline: the
// watch. Each job that starts with a deadline earlier than the watch's arms it
// there; one with a later deadline (the usual case: equal budgets, FIFO)
// leaves it, and when it fires it expires the job then running if its
// deadline has come, or moves to that job's deadline. So a loaded worker arms
// about one timer per budget, not one per job, and a job's context still
// stops by itself at its deadline. Shared with the timer's callback, which
// may run after the executor is gone (it then finds nothing running).
struct worker_watch {
  std::mutex mu;
  detail::job_record* current = nullptr;  // running, with a context
  timer_id timer;                         // the watch, at armed_at
  time_point armed_at = never;
  std::uint64_t generation = 0;  // of the timer armed last: an older one that fires does nothing
  bool closed = false;           // shut down: arm no more
};

// Both with w.mu held. arm: the watch fires at `at` (an older timer is
// cancelled); disarm: no timer.
void arm_watch(const std::shared_ptr<worker_watch>& w, clock& clk, time_point at);
void disarm_watch(worker_watch& w, clock& clk) noexcept;

}  // namespace hourglass
