// The work an overload job does: CPU spinning for its service time, checking
// for cancellation as it goes (like hourglassd's `spin` handler).
#pragma once

#include <atomic>
#include <time.h>

#include <chrono>

#include "hourglass/context.hpp"
#include "hourglass/time.hpp"

namespace hourglass::bench {

// Burns the CPU until `service` has passed on the steady clock. A job that is
// preempted still ends after `service` of wall time, so the service time, and
// with it the capacity, does not depend on what else the machine runs.
// With a context: ctx->check() about every 10 µs (throws stopped_error).
// With `abandon`: returns early once it is set (the asio pool, which has no
// cancellation of its own, is emptied this way after a run).
inline void spin_for(duration service, const context* ctx, const std::atomic<bool>* abandon = nullptr) {
  using sc = std::chrono::steady_clock;
  const auto start = sc::now();
  const auto end = start + service;
  auto next_check = start;
  for (;;) {
    const auto now = sc::now();
    if (now >= end) return;
    if (now >= next_check) {
      if (ctx != nullptr) ctx->check();
      if (abandon != nullptr && abandon->load(std::memory_order_relaxed)) return;
      next_check = now + std::chrono::microseconds(10);
    }
  }
}

// CPU time of the calling thread.
inline duration thread_cpu_time() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Adds the CPU time of its scope to `into`, however the scope is left: work
// is counted as it was really spent, whatever preemption did to the wall time.
class cpu_meter {
 public:
  explicit cpu_meter(duration& into) noexcept : into_(into), start_(thread_cpu_time()) {}
  ~cpu_meter() { into_ += thread_cpu_time() - start_; }
  cpu_meter(const cpu_meter&) = delete;
  cpu_meter& operator=(const cpu_meter&) = delete;

 private:
  duration& into_;
  duration start_;
};

}  // namespace hourglass::bench
