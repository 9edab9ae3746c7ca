// hourglass-bench fleet: jobs through a Redis broker (docs/reference/cli.md,
// "fleet"; docs/fleet.md).
//
// Three measurements on the same Redis, in one run:
//  - the broker's own limit: raw XADD + XREADGROUP + XACK per second, with
//    the same number of consumers, every client pipelined as hourglass's is;
//  - hourglass's throughput through it for each consumer count (empty jobs:
//    enqueue with admission, delivery, start check, first-outcome finish):
//    end to end (enqueue and consume at once), enqueue alone (one job per
//    call, and in bulks), drain alone (N enqueued first), with the Redis
//    commands (INFO commandstats) and Redis CPU (INFO cpu) each job costs,
//    and enqueue-to-start latency at half the end-to-end rate (or --latency-rate);
//  - goodput within freshness under overload (2x and 5x the consumers'
//    capacity, service time spent waiting, as I/O-bound jobs do), for
//    hourglass against a naive consumer that runs everything it reads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hourglass/time.hpp"

namespace hourglass::bench {

struct fleet_options {
  std::string broker = "redis://127.0.0.1:6379";
  std::vector<std::size_t> consumers = {1, 2, 4};  // throughput runs
  std::size_t slots = 4;                           // worker slots per consumer
  std::size_t prefetch = 0;                        // entries each consumer holds beyond its slots
  std::uint64_t jobs = 5000;                       // per throughput run
  std::size_t producers = 2;                       // threads enqueueing
  std::size_t window = 256;                        // each producer's enqueues in flight
  std::size_t bulk = 100;                          // jobs per enqueue_bulk call
  bool fsync_always = false;  // appendonly yes + appendfsync always for the throughput runs (a 202 on disk)
  double latency_rate = 0;    // jobs/s of the start-latency runs; 0: half the end-to-end rate
  // Overload: `overload_consumers` consumers of `slots` each, jobs of
  // `service_time`, offered at `loads` x capacity (or `rate` jobs/s) for `length`.
  std::size_t overload_consumers = 1;
  std::vector<double> loads = {2, 5};
  double rate = 0;  // jobs/s; 0: from loads
  duration length = std::chrono::seconds(5);
  duration freshness = std::chrono::milliseconds(500);
  duration service_time = std::chrono::milliseconds(10);
};

struct fleet_throughput {
  std::size_t consumers = 0;
  double raw_jobs_per_s = 0;        // XADD + XREADGROUP + XACK, pipelined
  double hourglass_jobs_per_s = 0;  // end to end: enqueue -> recorded outcome, both at once
  double enqueue_jobs_per_s = 0;    // enqueue alone, one job per call
  double bulk_jobs_per_s = 0;       // enqueue alone, `bulk` jobs per call
  double drain_jobs_per_s = 0;      // consumers alone, on a queue enqueued first
  double redis_calls_per_job = 0;   // end to end: Redis commands per job, scripts' inner ones included
  double redis_cpu_us_per_job = 0;  // end to end: Redis's CPU (user + system) per job
  double raw_calls_per_job = 0;
  std::string commands;       // end to end: each command's calls and Redis time per job, costliest first
  double latency_p50_ms = 0;  // enqueue -> start at half the end-to-end rate
  double latency_p99_ms = 0;
  double latency_rate = 0;  // jobs/s offered in that run
};

struct fleet_goodput {
  std::string consumer;      // "hourglass" or "naive"
  double load = 0;           // offered / capacity
  double offered_per_s = 0;  // as sent (below the schedule when the producers could not keep up)
  std::uint64_t offered = 0;
  std::uint64_t refused = 0;       // hourglass: 504 at enqueue
  std::uint64_t ran = 0;           // handlers run
  std::uint64_t ran_in_time = 0;   // started within freshness and finished
  std::uint64_t ran_too_late = 0;  // started after its freshness: wasted work
  double goodput_per_s = 0;        // ran_in_time / how long the offering took
};

struct fleet_report {
  std::string broker;
  bool fsync_always = false;
  double capacity_per_s = 0;  // overload consumers x slots / service time
  std::vector<fleet_throughput> throughput;
  std::vector<fleet_goodput> goodput;
};

// Throws std::invalid_argument for a bad option, std::runtime_error when the
// broker cannot be used.
fleet_report run_fleet(const fleet_options& options, const std::function<void(const std::string&)>& progress);

void print_table(std::ostream& out, const fleet_report& r);
std::string to_json(const fleet_report& r);

}  // namespace hourglass::bench
