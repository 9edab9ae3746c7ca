// An executor turned by hand (no threads: the test calls run_pending()) on a
// manual clock, for the workers tests.
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

}  // namespace hourglass::testing
