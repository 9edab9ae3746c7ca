// An open-loop Poisson arrival generator on its own thread.
//
// Arrivals follow a fixed schedule (exponential gaps at `rate`) that does not
// wait for replies, so a slow system cannot slow the offered load down
// (no coordinated omission). The thread sleeps until the next arrival
// (clock_nanosleep with 1 ns timer slack) rather than spinning, and when it
// wakes late it sends every arrival that is due, each stamped with its
// scheduled time. How late it sent is its send lag.
//
// `quantum` bounds how often it wakes: it sleeps until max(next arrival,
// last wake-up + quantum). Every wake-up of a sleeping thread costs a context
// switch on a core that may be running a worker, so at 20,000 arrivals/s
// waking per arrival steals several percent of the workers' time; a quantum
// of budget / 20 keeps that small while the lag it adds (at most one quantum,
// charged to the jobs: their deadlines and latencies run from the scheduled
// time) stays small against the budget. Zero: wake for every arrival.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "hourglass/histogram.hpp"
#include "hourglass/time.hpp"

namespace hourglass::bench {

struct arrival_plan {
  double rate = 1000;  // arrivals per second, > 0
  time_point start{};
  duration length{};  // arrivals are scheduled in [start, start + length)
  std::uint64_t seed = 1;
};

struct generator_report {
  std::uint64_t scheduled = 0;  // arrivals the plan had in [start, start + length)
  std::uint64_t sent = 0;       // arrivals actually submitted before start + length
  duration lag_p50{}, lag_p99{}, lag_max{};
  // sent / scheduled: below 0.99 the generator could not keep up and the run is invalid.
  double send_ratio() const noexcept {
    return scheduled == 0 ? 1.0 : static_cast<double>(sent) / static_cast<double>(scheduled);
  }
  bool valid() const noexcept { return send_ratio() >= 0.99; }
};

// The scheduled arrival times of a plan (deterministic for a seed).
std::vector<time_point> poisson_schedule(const arrival_plan& plan);

// Calls send(i, scheduled_time) for each arrival i, in order, on the calling
// thread, then returns when the plan's window has passed. Arrivals that fall
// due after the window closes are not sent.
generator_report run_generator(const std::vector<time_point>& schedule, time_point window_end, duration quantum,
                               const std::function<void(std::size_t, time_point)>& send);

}  // namespace hourglass::bench
