// Executors on a manual clock for the workers tests: turned by hand (no
// threads: the test calls run_pending()), or with real worker threads.
#pragma once

#include <cstddef>

#include "hourglass/clock.hpp"
#include "hourglass/executor.hpp"

namespace hourglass::testing {

inline executor_options manual_executor(manual_clock& clk, std::size_t capacity = 16) {
  executor_options o;
  o.manual_mode = true;
  o.clock = &clk;
  o.queue_capacity = capacity;
  return o;
}

// Real worker threads on a manual clock (deadlines and sleeps move only when
// the test advances it).
inline executor_options workers_on(manual_clock& clk, std::size_t workers = 1, bool paused = false) {
  executor_options o;
  o.clock = &clk;
  o.workers = workers;
  o.start_paused = paused;
  return o;
}

}  // namespace hourglass::testing
