// A clock reading for stamps taken at a high rate, where a microsecond of
// staleness is of no account (the executor's admission time).
//
//   const time_point admitted = hourglass::recent_now(clk, std::chrono::microseconds(1));
//
// Returns clk.now(), or a reading of the real steady clock that this thread
// took less than about `max_age` ago: never a later time than now(), and
// never older than max_age (plus the error of the counter's measured rate,
// a few parts per million). Only steady_clock_service on x86-64, with the
// kernel itself keeping time on the CPU's invariant time-stamp counter, takes
// the shortcut; every other clock (a manual_clock in tests) is read each time.
//
// Why: steady_clock::now() is ~31 ns on this project's machines (a vDSO call
// with an ordered counter read), and the submitter of an empty job paid it on
// every submit; an unordered counter read to check the age is ~12 ns and
// overlaps with the work around it (issue 12).
#pragma once

#include <cstdint>

#include "hourglass/clock.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

time_point recent_now(const clock& clk, duration max_age) noexcept;

namespace detail {
// The pure parts, tested on their own.
// Counter ticks per 1024 ns from two (ticks, time) samples; 0 if the samples
// are too close together (under 1 ms) or out of order to tell.
std::uint64_t tsc_ticks_per_1024ns(std::uint64_t tsc0, time_point at0, std::uint64_t tsc1, time_point at1) noexcept;
// True when a reading taken at counter value `then` is younger than
// `max_age` at counter value `now` (a counter that went back, as on a
// thread moved to a core whose counter lags, is never young).
bool tsc_reading_is_young(std::uint64_t then, std::uint64_t now, duration max_age,
                          std::uint64_t ticks_per_1024ns) noexcept;
}  // namespace detail

}  // namespace hourglass
