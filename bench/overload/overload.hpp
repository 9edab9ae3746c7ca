// The in-process overload experiment (docs/reference/cli.md, "overload").
//
// 1. Capacity: closed loop, saturating. The `hourglass` executor is kept busy
//    with 2 jobs per worker in flight (each completion submits the next) and
//    the completion rate, best of three windows, is the capacity. Jobs carry
//    the same budget as in the runs, so capacity includes everything the
//    runtime does per job. It is measured again after the load runs; a big
//    difference says the machine's load changed during the experiment.
// 2. Runs: for each load multiple m and each policy, open-loop Poisson
//    arrivals at m x capacity for `run_length`, generated on a thread of their
//    own. Every job gets deadline = scheduled arrival + budget.
//      hourglass  executor with every deadline check on: admission by budget
//                 and predicted wait, expiry at dequeue, cancellation at the
//                 deadline; min useful budget = the service time.
//      fifo       the same executor and queue with every deadline check off.
//      asio       boost::asio::thread_pool::post, runs everything.
//    A job is *good* when it finished `ok` inside its deadline. After the
//    window, the harness waits budget + service time (no job that arrived in
//    the window can still be good after that), then stops the policy: the
//    executor is shut down (queued jobs cancelled), the asio pool abandons
//    what it still holds. goodput = good jobs / window length.
// 3. Step: 0.5x -> 5x -> 0.5x of capacity, goodput per 100 ms, and how long
//    after the drop every arrival is good again.
//
// Thread safety: run_overload is a plain blocking call; it starts and joins
// all its threads itself.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hourglass/time.hpp"

namespace hourglass::bench {

struct overload_options {
  std::vector<std::string> policies{"hourglass", "fifo", "asio"};
  std::vector<double> loads{0.5, 1, 2, 5, 10};
  duration service_time = std::chrono::milliseconds(1);
  duration budget{};      // zero: 10 x service_time
  duration min_budget{};  // zero: service_time (hourglass only)
  duration run_length = std::chrono::seconds(2);
  duration capacity_length = std::chrono::seconds(1);
  std::size_t workers = 0;  // zero: cores - 1 (the generator keeps a core), at least 1
  std::size_t queue_capacity = 1024;
  // The generator wakes at most once per quantum (see generator.hpp).
  // Negative: 0 (every arrival on time) when the generator has a core of its
  // own (workers < cores), else budget / 20.
  duration send_quantum = duration(-1);
  bool step = true;
  duration step_phase = std::chrono::seconds(1);
  std::vector<double> step_loads{0.5, 5, 0.5};
  duration step_bin = std::chrono::milliseconds(100);
  std::uint64_t seed = 42;
  // A CPU hog on the workers' cores (noise.hpp): the share of each core it
  // takes, in slices of noise_period. 0: none.
  double noise = 0;
  duration noise_period = std::chrono::milliseconds(10);
};

// Counts of what happened to the jobs of one run.
struct outcome_counts {
  std::uint64_t offered = 0;         // jobs sent (arrived in the window)
  std::uint64_t good = 0;            // ok inside the deadline
  std::uint64_t completed_late = 0;  // ran to the end, after the deadline (wasted)
  std::uint64_t cancelled_run = 0;   // stopped mid-run at the deadline (wasted)
  std::uint64_t expired_queue = 0;   // dropped at dequeue, never ran
  std::uint64_t rejected_queue_full = 0;
  std::uint64_t rejected_budget = 0;  // deadline_exceeded/admission (insufficient budget)
  std::uint64_t rejected_other = 0;   // shutting_down
  std::uint64_t cut_off = 0;          // still queued or running when the run was stopped
  std::uint64_t errors = 0;
};

struct run_result {
  std::string policy;
  double load = 0;
  double offered_rps = 0;  // jobs sent / window
  double nominal_rps = 0;  // load x capacity (the Poisson rate asked for)
  double goodput_rps = 0;
  double goodput_ratio = 0;  // goodput / capacity
  // Worker CPU time on jobs that did not end ok inside their deadline / all
  // worker CPU time in jobs. CPU time, so that a job preempted by a neighbour
  // counts the work it did, not the time it waited for a core.
  double wasted_work_ratio = 0;
  double wasted_wall_ratio = 0;                            // the same with wall time
  double busy_s = 0;                                       // CPU seconds in jobs
  double wasted_s = 0;                                     // CPU seconds in jobs that were not good
  double p50_ms = 0, p99_ms = 0, p999_ms = 0, max_ms = 0;  // latency of good jobs, from scheduled arrival
  outcome_counts counts;
  double send_lag_p99_ms = 0, send_lag_max_ms = 0;
  double send_ratio = 1;  // sent / scheduled
  bool valid = true;      // false: the generator fell below 99 % of the offered rate
};

struct step_series {
  std::string policy;
  std::vector<double> offered_rps;      // per bin: arrivals in the bin / bin length
  std::vector<double> goodput_rps;      // per bin: good completions in the bin / bin length
  std::optional<double> recovery_ms;    // after the drop; nullopt: not within the phase
  double goodput_after_drop_ratio = 0;  // good / offered over the last phase
  double wasted_work_ratio = 0;
  outcome_counts counts;      // the whole step run
  outcome_counts after_drop;  // arrivals after the drop
  bool valid = true;
};

struct overload_report {
  overload_options options;         // with defaults resolved
  double capacity_rps = 0;          // best of three closed-loop windows, before the runs
  double capacity_after_rps = 0;    // the same, after the load runs (drift = noisy machine)
  double nominal_capacity_rps = 0;  // workers / service time
  std::vector<run_result> runs;
  std::vector<step_series> steps;
  double step_bin_ms = 100;
  double step_drop_s = 0;  // time of the drop from the run's start
};

// Fills the defaults in (budget, min_budget, workers) and checks the options;
// throws std::invalid_argument on an unknown policy or a load <= 0.
overload_options resolve(overload_options o);

// Runs the experiment. `progress` receives one human line per finished step.
overload_report run_overload(const overload_options& options, const std::function<void(const std::string&)>& progress);

}  // namespace hourglass::bench
