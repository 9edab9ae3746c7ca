// hourglass-bench cluster: the fleet on a Redis Cluster (docs/fleet.md, "On
// a Redis Cluster"; docs/benchmarks.md). For each queue count K, K queues
// whose hash tags land on K different masters (as far as there are masters),
// each with its own consumers and pipelined producers, all at once, empty
// jobs end to end: the jobs/s of the whole, and each master's commands per
// second and CPU (INFO commandstats and cpu, read from each master) — what
// one Redis core does for the fleet, to project from. With --shards, for
// each shard count K instead one queue over K shards (a sharded_queue whose
// shards land on K masters), the same work as K queues: each consumer
// daemon serves every shard with K times the slots (shared by backlog),
// K times the producers, K times the jobs.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace hourglass::bench {

struct cluster_options {
  std::string broker;                           // redis+cluster://HOST:PORT[,...]
  std::vector<std::size_t> queues = {1, 2, 3};  // one run per count
  std::vector<std::size_t> shards;              // non-empty: one queue over each count of shards, instead
  std::size_t consumers = 1;                    // per queue
  std::size_t slots = 10;                       // worker slots per consumer
  std::uint64_t jobs = 20000;                   // per queue and run
  std::size_t producers = 1;                    // threads enqueueing, per queue
  std::size_t window = 256;                     // each producer's enqueues in flight
};

struct cluster_node_load {
  std::string node;           // host:port
  std::size_t queues = 0;     // of the run's queues (or shards), on this master
  double commands_per_s = 0;  // INFO commandstats, scripts' inner commands included
  double cpu_cores = 0;       // its CPU seconds (user + system) per second
  double cpu_us_per_job = 0;  // per job of its queues (0 when it had none)
};

struct cluster_run {
  std::size_t queues = 0;
  std::size_t shards = 1;  // of each queue
  std::size_t masters_used = 0;
  double jobs_per_s = 0;  // all queues, end to end (enqueue -> recorded outcome)
  std::vector<cluster_node_load> nodes;
};

struct cluster_report {
  std::string broker;
  std::size_t masters = 0;
  std::vector<cluster_run> runs;
};

// Throws std::invalid_argument for a bad option, std::runtime_error when the
// cluster cannot be used.
cluster_report run_cluster(const cluster_options& options, const std::function<void(const std::string&)>& progress);

void print_table(std::ostream& out, const cluster_report& r);
std::string to_json(const cluster_report& r);

}  // namespace hourglass::bench
