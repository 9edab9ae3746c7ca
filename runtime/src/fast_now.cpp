#include "hourglass/fast_now.hpp"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace hourglass {

namespace detail {

__extension__ using wide = unsigned __int128;  // products of ticks and ns overflow 64 bits

std::uint64_t tsc_ns_per_tick_q32(std::uint64_t tsc0, time_point at0, std::uint64_t tsc1, time_point at1) noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at1 - at0).count();
  if (ns < 1'000'000 || tsc1 <= tsc0) return 0;
  return static_cast<std::uint64_t>((static_cast<wide>(ns) << 32) / (tsc1 - tsc0));
}

duration tsc_ticks_as_duration(std::uint64_t ticks, std::uint64_t ns_per_tick_q32) noexcept {
  // One 64x64 multiply, no division: this runs on every reading.
  const auto ns = (static_cast<wide>(ticks) * ns_per_tick_q32) >> 32;
  return std::chrono::duration_cast<duration>(std::chrono::nanoseconds(static_cast<std::int64_t>(ns)));
}

bool tsc_reading_is_young(std::uint64_t then, std::uint64_t now, duration span,
                          std::uint64_t ns_per_tick_q32) noexcept {
  if (now < then || ns_per_tick_q32 == 0) return false;
  return tsc_ticks_as_duration(now - then, ns_per_tick_q32) < span;
}

bool tsc_bracket_is_tight(std::uint64_t before, std::uint64_t after) noexcept {
  return after >= before && after - before <= tsc_tight_bracket_ticks;
}

}  // namespace detail

#if defined(__x86_64__)
namespace {

// The kernel keeps time on the TSC only once it has found it invariant and
// in step across CPUs: its judgement is the one worth trusting here.
bool kernel_keeps_time_on_tsc() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) == 0 || ((edx >> 8) & 1u) == 0) return false;
  std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == nullptr) return false;
  char name[32] = {};
  const bool ok = std::fgets(name, sizeof name, f) != nullptr && std::strncmp(name, "tsc\n", 4) == 0;
  std::fclose(f);
  return ok;
}

// The counter's rate against the clock, from the first reading in the
// process and later ones: usable once they are 1 ms apart, refined on each
// fresh reading until they are 1 s apart, then fixed.
struct tsc_rate {
  std::atomic<std::uint64_t> ns_per_tick_q32{0};
  std::atomic<bool> settled{false};

  void learn(std::uint64_t tsc, time_point at) noexcept {
    std::lock_guard lock(mu);
    if (!started) {
      tsc0 = tsc;
      at0 = at;
      started = true;
      return;
    }
    if (const std::uint64_t r = detail::tsc_ns_per_tick_q32(tsc0, at0, tsc, at); r != 0) {
      ns_per_tick_q32.store(r, std::memory_order_relaxed);
    }
    if (at - at0 >= std::chrono::seconds(1)) settled.store(true, std::memory_order_relaxed);
  }

  std::mutex mu;
  bool started = false;
  std::uint64_t tsc0 = 0;
  time_point at0{};
};

constinit tsc_rate rate;

struct thread_reading {
  std::uint64_t tsc = 0;  // the counter at `at`
  time_point at{};        // the last fresh reading
  time_point given{};     // the latest result given: results never go back
  bool valid = false;
};
thread_local thread_reading last;

}  // namespace
#endif

time_point fast_now(const clock& clk, duration span) noexcept {
#if defined(__x86_64__)
  static const bool usable = kernel_keeps_time_on_tsc();
  // Every steady clock reads the same std::chrono::steady_clock, so one
  // reading per thread serves them all.
  if (usable && clk.is_steady_clock()) {
    const std::uint64_t t = __rdtsc();
    const std::uint64_t r = rate.ns_per_tick_q32.load(std::memory_order_relaxed);
    time_point at;
    if (last.valid && detail::tsc_reading_is_young(last.tsc, t, span, r)) {
      at = last.at + detail::tsc_ticks_as_duration(t - last.tsc, r);
    } else {
      at = clk.now();
      const std::uint64_t t2 = __rdtsc();
      // A reading the thread was preempted in (or one on a core whose
      // counter lags) is used once but never extrapolated from or learnt
      // from: the counter's value at `at` is only known to within the
      // bracket, and a 200 us stall there would put every later result
      // 100 us out, and the rate by 20 % (the CI failure of 2026-12-02).
      last.valid = detail::tsc_bracket_is_tight(t, t2);
      if (last.valid) {
        last.tsc = t + (t2 - t) / 2;  // the counter halfway through the reading
        last.at = at;
        if (!rate.settled.load(std::memory_order_relaxed)) rate.learn(last.tsc, at);
      }
    }
    if (at < last.given) at = last.given;  // a rate a few ppm fast must not turn time back
    last.given = at;
    return at;
  }
#else
  (void)span;
#endif
  return clk.now();
}

}  // namespace hourglass
