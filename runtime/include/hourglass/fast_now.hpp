// clk.now() for readings taken at a high rate (the executor's admission
// stamps and its workers' start and end times), at a third of the cost.
//
//   const time_point t = hourglass::fast_now(clk, std::chrono::microseconds(100));
//
// On the real steady clock, on x86-64 where the kernel itself keeps time on
// the CPU's invariant time-stamp counter, the result is the thread's last
// reading of the clock plus the counter's ticks since (at the counter's
// measured rate), while that reading is younger than `span`; past that, or
// on any other clock (a manual_clock in tests above all), clk.now() itself.
// A thread's results never go back. Against now() they differ by at most
// half a tight bracket (see below: ~1 us, the counter's value at the
// thread's last reading) plus the rate's error over at most `span`: a few
// ns at 100 us once the rate is measured (its first ~1 ms in the process
// reads the clock every time), up to ~50 ns while NTP slews the clock at
// its 500 ppm limit.
//
// Why: steady_clock::now() costs ~31 ns on this project's machines (the
// vDSO's ordered counter read, seqlock and scaling), and an empty job paid
// it on the submitter and again on the worker; an unordered counter read is
// ~12 ns and overlaps the work around it. At millions of empty jobs a second
// those two readings were a large share of a job's cost.
#pragma once

#include <cstdint>

#include "hourglass/clock.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

time_point fast_now(const clock& clk, duration span) noexcept;

namespace detail {
// The pure parts, tested on their own.
// The counter's period in ns, as a 32.32 fixed-point number, from two
// (ticks, time) samples; 0 if the samples are too close together (under
// 1 ms) or out of order to tell.
std::uint64_t tsc_ns_per_tick_q32(std::uint64_t tsc0, time_point at0, std::uint64_t tsc1, time_point at1) noexcept;
// `ticks` of the counter as time.
duration tsc_ticks_as_duration(std::uint64_t ticks, std::uint64_t ns_per_tick_q32) noexcept;
// True when a reading taken at counter value `then` is younger than `span`
// at counter value `now` (a counter that went back, as on a thread moved to
// a core whose counter lags, is never young; nor is any with no rate yet).
bool tsc_reading_is_young(std::uint64_t then, std::uint64_t now, duration span, std::uint64_t ns_per_tick_q32) noexcept;
// A clock reading is a sample of the counter only when the counter values
// read just before and just after it are close: ~100 ticks normally, and
// 4096 (1-2 us at today's rates) bounds the sample's error at half that.
inline constexpr std::uint64_t tsc_tight_bracket_ticks = 4096;
bool tsc_bracket_is_tight(std::uint64_t before, std::uint64_t after) noexcept;
}  // namespace detail

}  // namespace hourglass
