// One queue spread over several shards (docs/fleet.md, "A hot queue over
// shards"): each shard a job_queue of its own (its own stream, group,
// delayed set and dead set under its own hash tag: {name} for shard 0, a
// chosen one for each other, recorded in shard 0), so a Redis Cluster
// sliced evenly serves them from different masters.
//
//   hourglass::fleet::sharded_queue q(redis, {.name = "orders", .shards = 4});
//   q.async_enqueue(ctx, {.handler = "ship", .idempotency_key = "order-17"}, done);
//
// A new job goes to its parent's shard when it is a child job (so the
// parent's cancel reaches it atomically; a child's Idempotency-Key is
// looked up there), else to the shard its Idempotency-Key hashes to (so a
// repeat finds the first job), else to the next shard in turn; admission judges it
// on that shard's own backlog and consumers. A job id names its shard, so
// GET, DELETE and the dead letter's operations go straight there (an id from
// before the queue was sharded is looked up in shard 0 too). A consumer
// serves one shard: a daemon runs one per shard (fleet::consumer on
// shard(i)).
//
// Thread safety: as job_queue.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "hourglass/fleet/job_queue.hpp"

namespace hourglass::fleet {

class sharded_queue {
 public:
  // options.shards shards (1 to 64), all on `redis`. With more than one,
  // reads the queue's record of its shards' tags (hg:{name}:shards), and
  // the first daemon with more shards than it lists extends it: the tags of
  // a queue laid out anew put its shards an even step apart in the slot
  // space (shard_layout.hpp); shards added later go into the widest gaps;
  // a queue sharded before the record keeps its {name:i} tags. Throws
  // redis_unavailable when the broker cannot be read, std::invalid_argument
  // for fewer shards than the record lists.
  sharded_queue(redis_client& redis, queue_options options);

  std::size_t size() const noexcept { return shards_.size(); }
  job_queue& shard(std::size_t i) noexcept { return *shards_[i]; }
  // Where a new job goes: its parent's shard, else its Idempotency-Key's, else the next in turn.
  job_queue& for_new(const job_spec& job) noexcept;
  // The shard a job id names.
  job_queue& of_id(std::string_view id) noexcept;
  const queue_options& options() const noexcept { return options_; }

  void ensure_groups(const context& ctx);

  void async_enqueue(const context& ctx, job_spec job, answer_fn<enqueued> done);
  // Each job to its own shard, one bulk call per shard; answers in order.
  void async_enqueue_bulk(const context& ctx, std::vector<job_spec> jobs,
                          std::function<void(std::vector<async_answer<enqueued>>)> done);
  void async_find(const context& ctx, std::string id, answer_fn<std::optional<fleet_job>> done);
  void async_cancel(const context& ctx, std::string id, answer_fn<cancelled_job> done,
                    cancel_cause cause = cancel_cause::requested);
  void async_signal(const context& ctx, std::string id, std::string name, std::string payload,
                    answer_fn<signal_answer> done);
  void async_replay(const context& ctx, std::string id, duration freshness, duration min_budget, bool admission,
                    answer_fn<dead_answer> done);
  void async_delete_dead(const context& ctx, std::string id, answer_fn<dead_answer> done);
  // Shard by shard: a cursor "<shard>/<shard's cursor>" with more than one shard.
  void async_list(const context& ctx, list_query q, answer_fn<job_list> done);
  // Every shard's state, in shard order (each on its own node's clock).
  void async_queue_states(const context& ctx, queue_op op, answer_fn<std::vector<queue_state>> done);
  // The oldest `count` dead entries of shard 0, then of shard 1, ...; `left`: every shard's.
  void async_purge_dead(const context& ctx, std::size_t count, answer_fn<job_queue::purged> done);

 private:
  std::size_t index_for_new(const job_spec& job) noexcept;
  void purge_from(const context& ctx, std::size_t shard, std::size_t count, job_queue::purged sum,
                  answer_fn<job_queue::purged> done);
  queue_options options_;
  std::vector<std::unique_ptr<job_queue>> shards_;
  std::atomic<std::size_t> turn_{0};
};

// The shard an Idempotency-Key goes to among `shards` (FNV-1a: the same in
// every process and build).
unsigned shard_of_key(std::string_view idempotency_key, unsigned shards) noexcept;

// The shards' states as one queue's: counts and totals summed; each consumer
// once, its slots and held entries summed, its lease the soonest to expire;
// the oldest waiting entry the one that has waited longest on its own
// shard's clock; paused when any shard is. Times are on shard 0's clock:
// each shard's are moved onto it by the difference of the two TIMEs read
// with them, so no decision compares two nodes' clocks. Empty: a default state.
queue_state merge_states(std::vector<queue_state> shards);

}  // namespace hourglass::fleet
