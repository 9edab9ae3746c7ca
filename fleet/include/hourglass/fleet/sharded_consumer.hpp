// One process's consumers of a sharded queue (docs/fleet.md, "A hot queue
// over shards"): a fleet::consumer per shard, each with its own reader
// connection and lease, all feeding the process's one executor.
//
//   hourglass::fleet::sharded_consumer c(queue, std::move(readers), executor, runner,
//                                        {.name = "host-a:8080", .slots = 8, .prefetch = 8});
//   c.start(ctx);
//   ...
//   c.drain(clk.now() + 5s);
//
// The process's slots (and prefetch) are shared among the shards by their
// demand: each shard's backlog plus its pending entries, as its consumer's
// last renewal read them, shared again every renewal period (lease / 3).
// So the workers follow the work: a shard whose jobs pile up takes the
// slots an idle shard does not use, and admission, which counts a shard's
// consumers' slots as its capacity, sees the same shares. Every shard keeps
// at least one slot, so a job on an idle shard is still read at once.
//
// Thread safety: stats(), shard_stats() and slots() from any thread; start,
// drain and stop from one.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/sharded_queue.hpp"

namespace hourglass::fleet {

class sharded_consumer {
 public:
  // `readers`: one per shard of `queue`, each used for blocking reads only.
  // options.slots and options.prefetch are the process's, over every shard
  // (at least one slot per shard whatever options.slots says).
  sharded_consumer(sharded_queue& queue, std::vector<std::unique_ptr<redis_client>> readers, executor& jobs,
                   job_runner runner, consumer_options options);
  ~sharded_consumer();  // stop()
  sharded_consumer(const sharded_consumer&) = delete;
  sharded_consumer& operator=(const sharded_consumer&) = delete;

  // Every shard's consumer (consumer::start), then the sharing.
  void start(const context& ctx);
  // Every shard's consumer at once, each until `deadline`.
  void drain(time_point deadline);
  void stop();  // drain(now)

  consumer_stats stats() const;  // the shards' as one process's (sum_of)
  std::vector<consumer_stats> shard_stats() const;
  std::vector<std::size_t> slots() const;  // each shard's now

  // Shares the slots again now, by each shard's demand at its consumer's
  // last renewal (the sharing thread does this every renewal period).
  void share_now();

 private:
  void share_loop();
  std::vector<std::unique_ptr<redis_client>> readers_;
  std::vector<std::unique_ptr<consumer>> shards_;
  hourglass::clock& clk_;
  consumer_options options_;
  mutable std::mutex mu_;
  std::condition_variable stopping_;
  bool stop_ = false;
  std::vector<std::size_t> slots_;
  std::thread sharer_;
};

// How `total` is shared among shards by their `demand`: each first gets
// `floor` (while the total lasts, the first shards first), the rest goes in
// proportion to demand (largest remainders, ties to the lower shard); with
// no demand anywhere, evenly (the first shards take the remainder).
// Negative demand counts as none. Sums to `total`.
std::vector<std::size_t> share_by_demand(std::size_t total, const std::vector<std::int64_t>& demand, std::size_t floor);

}  // namespace hourglass::fleet
