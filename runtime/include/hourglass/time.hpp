// Time vocabulary shared by every part of hourglass.
//
// Deadlines are absolute points on the monotonic clock; durations are sugar
// converted once, at the edge. `never` is the "no deadline" sentinel, and all
// arithmetic here saturates instead of overflowing, so `now + huge` is `never`
// rather than a time in the past.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace hourglass {

using duration = std::chrono::nanoseconds;
using time_point = std::chrono::steady_clock::time_point;

// "No deadline". Every comparison treats it as later than any real time.
inline constexpr time_point never = time_point::max();

// t + d, clamped to [time_point::min(), never].
constexpr time_point saturating_add(time_point t, duration d) noexcept {
  using rep = duration::rep;
  const rep base = std::chrono::duration_cast<duration>(t.time_since_epoch()).count();
  const rep delta = d.count();
  if (delta > 0 && base > std::numeric_limits<rep>::max() - delta) return never;
  if (delta < 0 && base < std::numeric_limits<rep>::min() - delta) return time_point::min();
  return time_point(duration(base + delta));
}

constexpr time_point saturating_sub(time_point t, duration d) noexcept {
  if (d.count() == std::numeric_limits<duration::rep>::min()) return saturating_add(t, duration::max());
  return saturating_add(t, -d);
}

// How much of a budget is left at `now`: never negative; duration::max() for `never`.
constexpr duration remaining(time_point deadline, time_point now) noexcept {
  if (deadline == never) return duration::max();
  if (deadline <= now) return duration::zero();
  const auto d = deadline.time_since_epoch().count();
  const auto n = now.time_since_epoch().count();
  if (n < 0 && d > std::numeric_limits<duration::rep>::max() + n) return duration::max();
  return duration(d - n);
}

// b - a, clamped at zero (elapsed time between two readings).
constexpr duration elapsed(time_point from, time_point to) noexcept { return remaining(to, from); }

constexpr time_point earliest(time_point a, time_point b) noexcept { return a < b ? a : b; }

// Conversions name their rounding. Floating-point views are for reporting only.
constexpr double to_seconds(duration d) noexcept { return static_cast<double>(d.count()) / 1e9; }
constexpr double to_millis(duration d) noexcept { return static_cast<double>(d.count()) / 1e6; }

template <class To, class Rep, class Period>
constexpr To round_down(std::chrono::duration<Rep, Period> d) noexcept {
  return std::chrono::floor<To>(d);
}

}  // namespace hourglass
