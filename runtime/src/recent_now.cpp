#include "hourglass/recent_now.hpp"

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

__extension__ typedef unsigned __int128 wide;  // products of ticks and ns overflow 64 bits

std::uint64_t tsc_ticks_per_1024ns(std::uint64_t tsc0, time_point at0, std::uint64_t tsc1, time_point at1) noexcept {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at1 - at0).count();
  if (ns < 1'000'000 || tsc1 <= tsc0) return 0;
  const auto ticks = static_cast<wide>(tsc1 - tsc0);
  return static_cast<std::uint64_t>(ticks * 1024 / static_cast<std::uint64_t>(ns));
}

bool tsc_reading_is_young(std::uint64_t then, std::uint64_t now, duration max_age,
                          std::uint64_t ticks_per_1024ns) noexcept {
  if (now < then || ticks_per_1024ns == 0 || max_age <= duration::zero()) return false;
  const auto age_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(max_age).count();
  const auto window = static_cast<wide>(age_ns) * ticks_per_1024ns / 1024;
  return now - then < window;
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

// The counter's rate, measured once per process from the first reading and
// the first one at least 1 ms after it (until then, no reading is reused).
struct tsc_rate {
  std::atomic<std::uint64_t> ticks_per_1024ns{0};

  // Only until the rate is known (the first millisecond of readings).
  void learn(std::uint64_t tsc, time_point at) noexcept {
    std::lock_guard lock(mu);
    if (!started) {
      tsc0 = tsc;
      at0 = at;
      started = true;
      return;
    }
    if (const std::uint64_t r = detail::tsc_ticks_per_1024ns(tsc0, at0, tsc, at); r != 0) {
      ticks_per_1024ns.store(r, std::memory_order_relaxed);
    }
  }

  std::mutex mu;
  bool started = false;
  std::uint64_t tsc0 = 0;
  time_point at0{};
};

constinit tsc_rate rate;

struct last_reading {
  std::uint64_t tsc = 0;
  time_point at{};
  bool valid = false;
};
thread_local last_reading last;

}  // namespace
#endif

time_point recent_now(const clock& clk, duration max_age) noexcept {
#if defined(__x86_64__)
  static const bool usable = kernel_keeps_time_on_tsc();
  // Every steady clock reads the same std::chrono::steady_clock, so one
  // reading per thread serves them all.
  if (usable && clk.is_steady_clock()) {
    const std::uint64_t t = __rdtsc();  // before now(): the age is counted from no later than the reading
    const std::uint64_t r = rate.ticks_per_1024ns.load(std::memory_order_relaxed);
    if (last.valid && detail::tsc_reading_is_young(last.tsc, t, max_age, r)) return last.at;
    const time_point at = clk.now();
    last = {t, at, true};
    if (r == 0) rate.learn(t, at);
    return at;
  }
#else
  (void)max_age;
#endif
  return clk.now();
}

}  // namespace hourglass
