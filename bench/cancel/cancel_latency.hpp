// hourglass-bench cancel: how late past its deadline a job learns it expired.
//
// In process: jobs on the embedded executor, each with a deadline a little
// after its submission, block until their context stops them, waiting
// either in ctx.sleep_for or on a Boost.Asio timer aborted through
// asio_cancellation. Each records the time from its context's deadline to the
// moment its wait returned (sleep_for) or its timer's handler ran (asio):
// the timer thread's wake-up, the cancellation callbacks and the worker's
// wake-up, everything a real job pays before it can stop. `concurrency` jobs
// wait at once, with their deadlines spread over `budget`. Beside them, in
// the same run, the floor: as many plain threads waiting on a condition
// variable until deadlines drawn the same way (what timers cost without us).
// With --spin-floor M, one more floor: the same plain waits woken M early and
// spinning to the deadline, with the CPU each spent: what a waiter that never
// lets its CPU idle near its deadline would get (hourglass does not spin).
//
// Over HTTP (with --url): hourglass-bench http against the daemon's sleep
// handler with a budget far shorter than the sleep: each request's 504 is
// timed from its deadline (its write began + the budget) to the answer read.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "hourglass/histogram.hpp"
#include "hourglass/time.hpp"
#include "http/http_load.hpp"

namespace hourglass::bench {

struct cancel_options {
  std::size_t jobs = 20'000;                       // per kind of wait
  std::size_t concurrency = 32;                    // jobs waiting at once (the executor's workers)
  duration budget = std::chrono::milliseconds(1);  // deadline = submission + budget + U(0, budget)
  std::string url;                                 // hourglassd's base URL: also the HTTP measurement
  std::size_t requests = 500;                      // over HTTP
  std::size_t connections = 100;                   // over HTTP: requests in flight at once
  duration http_budget = std::chrono::milliseconds(50);
  duration spin_margin = duration::zero();  // > 0: also the spin floor, woken this early
};

struct cancel_report {
  cancel_options options;
  // ns from the deadline to the wait ending
  histogram_snapshot bare_wait{log_bucket_layout::three_digits_precision};  // the floor: plain threads, no hourglass
  histogram_snapshot sleep_for{log_bucket_layout::three_digits_precision};
  histogram_snapshot asio_timer{log_bucket_layout::three_digits_precision};
  histogram_snapshot spin_wait{log_bucket_layout::three_digits_precision};  // empty unless spin_margin > 0
  duration spin_per_wait = duration::zero();                                // mean CPU spent spinning, per wait
  std::uint64_t early = 0;         // waits that ended before the deadline (a bug if not 0)
  std::uint64_t not_measured = 0;  // jobs of both kinds that expired before they started (not a wait)
  std::optional<http_report> http;
};

// Throws std::invalid_argument for a bad option or URL.
cancel_report run_cancel(const cancel_options& options, const std::function<void(const std::string&)>& progress);

void print_table(std::ostream& out, const cancel_report& r);
std::string to_json(const cancel_report& r);

}  // namespace hourglass::bench
