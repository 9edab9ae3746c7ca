// How long the consumer's reader waits before it asks the broker again after
// failures in a row: pure functions of the count, tested without a broker or
// threads (tests/fleet/read_backoff_test.cpp).
#pragma once

#include <chrono>
#include <cstddef>

#include "hourglass/retry.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet::detail {

// After `in_row` failed reads (the broker down, a reply we cannot read):
// 50 ms, doubling to 2 s. No jitter: one reader a daemon, and daemons fail
// at different moments.
inline duration after_failed_reads(std::size_t in_row) noexcept {
  if (in_row == 0) return duration::zero();
  retry_policy p;
  p.initial_backoff = std::chrono::milliseconds(50);
  p.max_backoff = std::chrono::seconds(2);
  p.backoff_multiplier = 2.0;
  p.jitter = 0.0;
  constexpr std::size_t enough = 64;  // far past the cap; keeps the count an int
  return retry_backoff(p, static_cast<int>(in_row < enough ? in_row : enough), 0.0);
}

// After `in_row` failed takes since one was answered well. The first goes on
// at once: its reply may have been lost on its way with entries it started
// for us, which the reader's own pending list then runs now, not after a
// lease. A take that fails again (a script's error with the broker up)
// waits as failed reads do, so it is not sent again in a loop.
inline duration after_failed_takes(std::size_t in_row) noexcept {
  return in_row <= 1 ? duration::zero() : after_failed_reads(in_row - 1);
}

}  // namespace hourglass::fleet::detail
