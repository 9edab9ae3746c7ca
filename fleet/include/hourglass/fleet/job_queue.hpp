// The fleet's durable queue on Redis Streams: the producer side (enqueue with
// admission and idempotency, a job's record by id, cancel by id), the
// first-outcome-wins finish, and the consumer's scripts (start, renew, hand
// back). Every key and script of the layout is here (docs/fleet.md).
//
//   hourglass::fleet::job_queue q(redis, {.name = "default"});
//   q.ensure_group(ctx);
//   enqueued e = q.enqueue(ctx, {.handler = "resize", .payload = body, .freshness = 30s});
//   if (e.verdict == enqueued::kind::accepted) ... e.id ...
//
// Each call is one round trip on the given connection (cancel two) and
// throws redis_unavailable when the broker cannot be used, or stopped_error
// when `ctx` stopped. An enqueue that throws was not confirmed: answer 503,
// never 202. (The broker may still have applied it, when the connection
// broke after the write: a retry with the same idempotency key finds it.)
//
// Enqueues are batched: the jobs that arrive while one batch is at the
// broker go together in the next, one script call (group commit), each
// admitted on its own against the fleet's counts read in that same atomic
// step. enqueue_bulk hands many jobs in at once (Sidekiq's push_bulk).
//
// The producer's calls (enqueue, find, cancel, list) also come without
// blocking: async_*(..., done) runs `done` once, with the value or the error
// the blocking call would have thrown: on the connection's strand, or (an
// enqueue whose `ctx` stopped first) on the thread that stopped it. The
// blocking ones wait for the asynchronous ones: one path to the broker.
// Never wait for one on the connection's own strand. The queue must outlive
// the calls it has in flight.
//
// Thread safety: as the redis_client it uses; the object itself holds
// constants and the enqueues waiting for their batch (guarded).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/context.hpp"
#include "hourglass/fleet/delivery.hpp"
#include "hourglass/fleet/job_queue_types.hpp"
#include "hourglass/fleet/lease.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/job_retry.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet {

namespace detail {
struct liveness;     // fleet/src/batch_lane.hpp
struct script_call;  // fleet/src/scripts.hpp
struct queue_keys;
template <class Call>
class batch_lane;
}  // namespace detail

class job_queue {
 public:
  job_queue(redis_client& redis, queue_options options);
  // A batch still at the broker (a call answered early, its context stopped,
  // may be in one) is only answered when it completes. Never destroy a
  // queue inside one of its own callbacks.
  ~job_queue();
  // Calls in flight hold `this`: a queue stays where it was made.
  job_queue(const job_queue&) = delete;
  job_queue& operator=(const job_queue&) = delete;

  // Creates the stream and its consumer group if missing (idempotent).
  void ensure_group(const context& ctx);

  enqueued enqueue(const context& ctx, const job_spec& job);
  // Each job's own answer, in order: its verdict, or the error that left it
  // unconfirmed. Never throws.
  std::vector<async_answer<enqueued>> enqueue_bulk(const context& ctx, std::vector<job_spec> jobs);
  std::optional<fleet_job> find(const context& ctx, std::string_view id);
  // Cancels a queued job at once or marks a running one; the job as it is
  // afterwards. *cancelled_here: this call recorded its outcome (it was queued).
  std::optional<fleet_job> cancel(const context& ctx, std::string_view id, bool* cancelled_here = nullptr);
  job_list list(const context& ctx, const list_query& q);

  // The same without blocking (`ctx` is copied; `done` runs on the connection's strand).
  void async_enqueue(const context& ctx, job_spec job, answer_fn<enqueued> done);
  void async_enqueue_bulk(const context& ctx, std::vector<job_spec> jobs,
                          std::function<void(std::vector<async_answer<enqueued>>)> done);
  void async_find(const context& ctx, std::string id, answer_fn<std::optional<fleet_job>> done);
  // `cause`: what the job's outcome says stopped it (parent: its parent's
  // wait ended without it).
  void async_cancel(const context& ctx, std::string id, answer_fn<cancelled_job> done,
                    cancel_cause cause = cancel_cause::requested);
  // A person's signal `name` for a job waiting for it (fleet/lua/signal.lua):
  // delivered once, the job back on the stream with its deadline moved on
  // by its wait; the job as it is afterwards.
  void async_signal(const context& ctx, std::string id, std::string name, std::string payload,
                    answer_fn<signal_answer> done);
  void async_list(const context& ctx, list_query q, answer_fn<job_list> done);
  // The queue's state, after pausing or resuming it when asked: a paused
  // queue's consumers stop reading at their next renewal (running jobs
  // finish; waiting ones keep ageing); producers still enqueue.
  void async_queue_state(const context& ctx, queue_op op, answer_fn<queue_state> done);
  // A dead-lettered job admitted again as a new one (`freshness` from now,
  // `min_budget`; `admission` false: never refused), or deleted with its
  // dead entry.
  void async_replay(const context& ctx, std::string id, duration freshness, duration min_budget, bool admission,
                    answer_fn<dead_answer> done);
  void async_delete_dead(const context& ctx, std::string id, answer_fn<dead_answer> done);
  // The oldest `count` dead entries, each with its job if still dead.
  struct purged {
    std::uint64_t jobs = 0, entries = 0, left = 0;
  };
  void async_purge_dead(const context& ctx, std::size_t count, answer_fn<purged> done);

  // Records the job's outcome (`fields`: state and the outcome's details)
  // unless one is recorded already. `run_time`: how long it ran, for the
  // fleet's mean run time (nullopt: it did not run).
  finish_result finish(const context& ctx, std::string_view id, std::optional<duration> run_time,
                       const std::vector<std::pair<std::string, std::string>>& fields);
  // Many at once, in one script call: each recorded on its own, answers in
  // order. With a `token` (the consumer's lease token) and each outcome's
  // entry, the same batch sent again after its reply was lost gets the
  // first answers again, not duplicates.
  struct outcome {
    std::string job_id;
    std::optional<duration> run_time;
    std::vector<std::pair<std::string, std::string>> fields;  // the outcome (a retry's: if it does not fit)
    std::string entry;  // the stream entry that ran it; "" any. An earlier attempt's: a duplicate
    // A failed attempt to retry: scheduled `delay` from the broker's TIME
    // when due + `need` (predicted wait + min budget) is before the job's
    // deadline, else `fields` are recorded (finish_result::no_budget).
    struct retry_request {
      duration delay{};
      duration need{};
      std::string error, message;  // the failed attempt, for the job's `attempts`
      duration run_time{};
    };
    std::optional<retry_request> retry;
    // A parent's run that ended waiting for its children: recorded as
    // waiting (no `fields`), resumed when they finish or at its deadline
    // less wait->keep on the broker's clock (fleet/lua/finish.lua).
    std::optional<wait_request> wait;
  };
  // A wait a finish ends (a child's outcome met its parent's rule) cancels
  // the parent's children still unfinished: the handlers of those cancelled
  // on the spot go into *cancelled (when given), for the caller to count.
  std::vector<finish_result> finish_batch(const context& ctx, const std::vector<outcome>& outcomes,
                                          std::string_view token = {}, std::vector<std::string>* cancelled = nullptr);

  // ---- the consumer's side (fleet::consumer) ----

  // A stream entry and the job it carries.
  struct held_entry {
    std::string entry;
    std::string job_id;
  };

  // The last check before a worker starts a delivered job, atomic with
  // marking it running (fleet/lua/start.lua).
  struct start_answer {
    enum class verdict { run, not_owner, finished, cancelled, gone, dead };
    verdict v = verdict::gone;
    std::int64_t broker_now_us = 0;  // the broker's TIME, in the same script
    unsigned deliveries = 0;         // starts so far, this one included
    std::string handler, payload, content_type, idempotency_key;
    // The job's retry policy (max_attempts 1: none), this attempt's number,
    // and its overall deadline on the broker's clock (nullopt: none).
    job_retry_policy retry;
    int attempt = 1;
    std::optional<std::int64_t> deadline_us;
    std::string woke_by;         // resumed after a wait: "children", "deadline" or "signal"; "" otherwise
    std::string wait_rule;       // the wait it resumes from ("signal:<name>" for a person's)
    std::string signal_payload;  // woke_by "signal": what the signaller sent
    unsigned dead_dropped = 0;   // dead: the dead list's oldest entries this one pushed past --dead-max
  };
  // `token` names this delivery (e.g. the consumer's lease token and the
  // entry): called again with it after a lost reply, the start is counted once.
  // Workers that ask at once share one script call, each judged on its own.
  start_answer start(const context& ctx, const held_entry& e, std::string_view consumer, unsigned max_deliveries,
                     std::string_view token);
  void async_start(const context& ctx, const held_entry& e, std::string_view consumer, unsigned max_deliveries,
                   std::string_view token, answer_fn<start_answer> done);

  // A reader with free workers: up to `count` new entries read and started
  // in one step (start.lua, taken), one round trip instead of a read and a
  // start. Each entry comes with its fields and its start answer, or none
  // when `judge_late` and the script found it too late to start: not started,
  // its expiry is the caller's to record. Start tokens are
  // "<lease_token>/<entry id>", as a worker's start of the same entry.
  struct taken_entry {
    std::string id;
    std::vector<std::pair<std::string, std::string>> fields;
    std::optional<start_answer> started;
  };
  struct taken {
    std::int64_t broker_now_us = 0;  // the script's TIME
    std::vector<taken_entry> entries;
  };
  taken take(const context& ctx, std::string_view consumer, std::size_t count, unsigned max_deliveries,
             std::string_view lease_token, bool judge_late);
  void async_take(const context& ctx, std::string_view consumer, std::size_t count, unsigned max_deliveries,
                  std::string_view lease_token, bool judge_late, answer_fn<taken> done);

  struct renew_answer {
    bool fenced = false;               // another process holds the consumer name
    std::vector<std::string> marked;   // entries whose job a DELETE marked
    std::vector<std::string> lost;     // entries this consumer no longer holds
    std::vector<std::string> deleted;  // held entries deleted from the stream: the loss alarm
    std::int64_t broker_now_us = 0;
    std::int64_t backlog = 0;  // the queue's entries not yet delivered
    std::int64_t pending = 0;  // delivered, not finished
    duration mean_run{};       // the fleet's mean run time
    std::int64_t live_slots = 0;
    std::int64_t scheduled = 0;  // jobs in the delayed set
    bool paused = false;         // the queue is paused: stop reading
  };
  renew_answer renew(const context& ctx, std::string_view consumer, const lease_value& lease_v, duration lease,
                     std::size_t slots, const std::vector<held_entry>& held);

  // Drain: the held entries back for immediate reclaim; how many were still held.
  // A delivery whose start ran under this lease token (its reply may have been
  // lost) is uncounted: the broker's record decides, not the caller's memory.
  std::size_t hand_back(const context& ctx, std::string_view consumer, std::string_view lease_token,
                        const std::vector<held_entry>& held);
  // The consumer name's lease and slots, if `token` still holds them.
  void release(const context& ctx, std::string_view consumer, std::string_view token);
  // The lease key's value ("" when there is none).
  std::string lease_of(const context& ctx, std::string_view consumer);

  // ---- the delayed set (delayed jobs and retries) ----

  // The earliest jobs of the delayed set, by due time (ms on the broker's clock).
  struct delayed_job {
    std::string job_id;
    std::int64_t due_ms = 0;
  };
  std::vector<delayed_job> first_delayed(const context& ctx, std::size_t count);
  // Moves those of `job_ids` that are due to the stream (fleet/lua/promote.lua),
  // each admitted again against `predicted_wait` (nullopt: not judged, --policy fifo).
  struct promoted {
    std::size_t moved = 0;
    std::vector<std::string> expired_handlers;     // recorded deadline_exceeded/admission
    std::vector<std::string> human_wait_handlers;  // recorded deadline_exceeded/human_wait
    std::vector<std::string> cancelled_handlers;   // children recorded cancelled/parent as their parent woke
    std::optional<std::int64_t> next_due_ms;       // the set's earliest left
    std::int64_t broker_now_us = 0;
  };
  promoted promote(const context& ctx, const std::vector<std::string>& job_ids, std::optional<duration> predicted_wait);

  // ---- periodic jobs' records (fleet/lua/schedule.lua) ----

  struct schedule_record {
    std::int64_t settled_ms = 0;    // fires up to here are settled (run or missed)
    std::int64_t last_fire_ms = 0;  // 0: none yet
    std::string last_job;           // the job of the latest run; "" none
    std::uint64_t missed = 0;       // fires never run, fleet-wide
    std::int64_t broker_now_us = 0;
    bool queue_paused = false;  // the queue is paused: a due fire is missed, not run
  };
  // The record of schedule `name`, made on first sight (settled at the broker's TIME).
  schedule_record look_schedule(const context& ctx, std::string_view name);
  // Settles the fires up to `fire_ms` and counts `missed`, unless the record
  // moved since `looked` (its settled_ms): true when this call did (then it
  // runs the fire, if any).
  bool settle_schedule(const context& ctx, std::string_view name, const schedule_record& looked, std::int64_t fire_ms,
                       std::uint64_t missed);
  void schedule_ran(const context& ctx, std::string_view name, std::string_view job_id);

  // ---- a sharded queue's record of its shards' tags (fleet/lua/shards.lua), in shard 0 ----
  // The record ("" none); and `desired` written in place of `expected`
  // only while the record still is that: the record in force afterwards.
  std::string shard_tags(const context& ctx);
  std::string exchange_shard_tags(const context& ctx, const std::string& expected, const std::string& desired);

  // "hg:{tag}:suffix": every key of this queue (shard), in one hash slot.
  std::string key(std::string_view suffix) const;
  detail::queue_keys keys() const;  // what the scripts' encoders name keys with
  const queue_options& options() const noexcept { return options_; }
  redis_client& connection() const noexcept { return redis_; }
  static constexpr std::string_view group = "hourglass";

 private:
  // EVALSHA of one of scripts.hpp's scripts (SCRIPT LOAD first, and again
  // after NOSCRIPT); an error reply throws redis_unavailable.
  redis_reply eval(const context& ctx, const detail::script_call& call);
  struct eval_call;
  void async_eval(const context& ctx, detail::script_call call, answer_fn<redis_reply> done, bool replicated = false);
  static void send_eval(std::shared_ptr<eval_call> call);
  static void load_script(std::shared_ptr<eval_call> call);
  void async_ensure_group(const context& ctx, answer_fn<bool> done);
  // Enqueues wait in their lane while a batch is at the broker (job_queue_enqueue.cpp).
  struct enqueue_call;
  using enqueue_lane = detail::batch_lane<enqueue_call>;
  static std::shared_ptr<enqueue_lane> new_enqueue_lane();
  void submit_enqueues(std::vector<std::shared_ptr<enqueue_call>> calls);
  void send_enqueues(std::vector<std::shared_ptr<enqueue_call>> batch, bool group_ensured);
  void next_enqueues();
  // Start checks, likewise (job_queue_start.cpp).
  struct start_call;
  using start_lane = detail::batch_lane<start_call>;
  static std::shared_ptr<start_lane> new_start_lane();
  void send_starts(std::vector<std::shared_ptr<start_call>> batch);

  redis_client& redis_;
  queue_options options_;
  std::string tag_;                          // the hash tag of this queue's (or shard's) keys
  std::shared_ptr<detail::liveness> alive_;  // completions check it: see batch_lane.hpp
  std::shared_ptr<enqueue_lane> enqueue_lane_;
  std::shared_ptr<start_lane> start_lane_;
};

// Whether a listing of `state` walks the job hashes by SCAN (no index of its
// own: a final state, "finished", "waiting", "" any), reading up to 10,000
// keys a call, rather than the stream, the delayed set or the dead letter.
bool listed_by_scan(std::string_view state) noexcept;

// The shard a job id names in a queue of `shards` shards: its last two hex
// digits, 0 with one shard, or when they name no shard. (An id made before
// the queue was sharded may name a wrong one: look in shard 0 too.)
unsigned shard_of_job(std::string_view id, unsigned shards) noexcept;

// A new job id: 32 hex digits from a CSPRNG-seeded generator.
std::string new_job_id();

}  // namespace hourglass::fleet
