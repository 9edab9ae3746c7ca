// One log line per interval for a failure that can repeat thousands of
// times a second (accept() out of descriptors, a connection flood past
// --max-connections): the first is logged at once, later ones at most once
// an interval, each saying how many events it stands for. A pure decision
// of (state, now); the caller serialises calls (the acceptor's strand).
#pragma once

#include <cstdint>

#include "hourglass/time.hpp"

namespace hourglass::server::detail {

class log_throttle {
 public:
  explicit log_throttle(duration interval) noexcept : interval_(interval) {}

  // An event at `now`: 0 if its line is held back; otherwise the number of
  // events the line logged now stands for (this one and those held back).
  std::uint64_t admit(time_point now) noexcept {
    ++held_;
    if (now < next_) return 0;
    next_ = now + interval_;
    const std::uint64_t n = held_;
    held_ = 0;
    return n;
  }

 private:
  duration interval_;
  time_point next_ = time_point::min();  // the earliest time the next line may go out
  std::uint64_t held_ = 0;
};

}  // namespace hourglass::server::detail
