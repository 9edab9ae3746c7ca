#include "overload/generator.hpp"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <random>

namespace hourglass::bench {

std::vector<time_point> poisson_schedule(const arrival_plan& plan) {
  std::vector<time_point> out;
  const double expected = plan.rate * to_seconds(plan.length);
  out.reserve(static_cast<std::size_t>(expected * 1.1 + 16));
  std::mt19937_64 rng(plan.seed);
  std::exponential_distribution<double> gap(plan.rate);
  const time_point end = plan.start + plan.length;
  double t = 0;
  for (;;) {
    t += gap(rng);
    const time_point at = plan.start + duration(static_cast<duration::rep>(t * 1e9));
    if (at >= end) break;
    out.push_back(at);
  }
  return out;
}

namespace {
void sleep_until_steady(time_point t) {
  timespec ts{};
  const auto ns = t.time_since_epoch().count();  // steady_clock is CLOCK_MONOTONIC on Linux
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
  }
}
}  // namespace

generator_report run_generator(const std::vector<time_point>& schedule, time_point window_end, duration quantum,
                               const std::function<void(std::size_t, time_point)>& send) {
  // The default 50 µs timer slack would turn every short sleep into a long one.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  log_histogram lag(log_histogram::three_digits_precision);
  generator_report r;
  r.scheduled = schedule.size();
  std::size_t i = 0;
  time_point woke = std::chrono::steady_clock::now();
  while (i < schedule.size()) {
    time_point now = std::chrono::steady_clock::now();
    if (now >= window_end) break;
    if (schedule[i] > now) {
      sleep_until_steady(std::min(window_end, std::max(schedule[i], woke + quantum)));
      woke = std::chrono::steady_clock::now();
      continue;
    }
    while (i < schedule.size() && schedule[i] <= now) {
      lag.record(now - schedule[i]);
      send(i, schedule[i]);
      ++i;
      now = std::chrono::steady_clock::now();
    }
  }
  r.sent = i;
  const auto snap = lag.snapshot();
  r.lag_p50 = duration(snap.value_at_quantile(0.5));
  r.lag_p99 = duration(snap.value_at_quantile(0.99));
  r.lag_max = duration(snap.max_ns);
  const time_point now = std::chrono::steady_clock::now();
  if (now < window_end) sleep_until_steady(window_end);
  return r;
}

}  // namespace hourglass::bench
