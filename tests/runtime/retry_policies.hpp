// Retry policies the retry tests share.
#pragma once

#include <chrono>

#include "hourglass/retry.hpp"

namespace hourglass::retry_testing {

// A policy with no backoff and no jitter, so budgets come out exactly.
inline retry_policy exact_policy() {
  retry_policy p;
  p.initial_backoff = std::chrono::milliseconds(0);
  p.jitter = 0.0;
  return p;
}

}  // namespace hourglass::retry_testing
