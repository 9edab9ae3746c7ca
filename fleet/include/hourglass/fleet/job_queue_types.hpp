// What goes into the fleet's queue and what comes back (job_queue.hpp):
// the queue's options, a job as the producer hands it in, and the answers
// of enqueue, find, list, cancel, signal, the dead letter and finish. Plain
// values: the data contract of fleet/, apart from the calls that move it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/clock.hpp"
#include "hourglass/job_retry.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet {

struct queue_options {
  std::string name = "default";  // --queue
  duration result_ttl = std::chrono::hours(24);
  duration idempotency_ttl = std::chrono::hours(24);
  // A dead-lettered job is kept whole (for a replay) this long, and the dead
  // list holds at most dead_max of them: the oldest beyond it are dropped.
  duration dead_ttl = std::chrono::hours(24 * 7);
  std::size_t dead_max = 10'000;
  // While an operator has the queue paused, refuse enqueues (enqueued::kind::paused)
  // instead of letting jobs wait for the resume.
  bool refuse_while_paused = false;
  // An enqueue is confirmed once the master and this many replicas hold it
  // (WAIT behind each enqueue batch, on the same connection); fewer within
  // replica_timeout fail the batch's calls with redis_unavailable, never
  // confirmed. 0: once the master holds it (Redis replicates asynchronously).
  unsigned replicas = 0;
  duration replica_timeout = std::chrono::seconds(1);
  // One shard of a queue spread over `shards` streams (1 to 64): shard 0's
  // keys carry the hash tag {name}, shard i's {name:i}, so a Redis Cluster
  // spreads them over its masters. A new job's id ends in its shard's
  // number (two hex digits: shard_of_job), 00 in a queue of one shard, so
  // its jobs are found in shard 0 after the queue grows.
  unsigned shard = 0;
  unsigned shards = 1;
  // This shard's hash tag as sharded_queue chose it (shard_layout.hpp); "":
  // {name} for shard 0, {name:shard} otherwise (the layout before tags were chosen).
  std::string tag;
  // What a parent keeps back from its child jobs' deadline (--call-reserve):
  // a child's whole deadline is at most its parent's, less this.
  duration parent_reserve = std::chrono::milliseconds(5);
  // How far a family of child jobs may grow (--max-job-depth,
  // --max-children): a parent at max_job_depth (a job without a parent is
  // at 0), or with max_children already, takes no more
  // (enqueued::kind::too_deep, too_many_children).
  std::size_t max_job_depth = 64;
  std::size_t max_children = 1000;
  hourglass::clock* clock = nullptr;  // times an enqueue's own round trips; nullptr: real_clock()
};

struct job_spec {
  std::string handler;
  std::string payload;
  std::string content_type = "application/octet-stream";
  duration freshness = duration::max();  // how long it may wait to start
  duration min_budget = duration::zero();
  std::string idempotency_key;          // empty: none
  bool admission = true;                // false (--policy fifo): never refused by the fleet's predicted wait
  job_retry_policy retry;               // attempts after a retryable error (the consumer plans them)
  duration deadline = duration::max();  // what is left of the whole job's deadline, across attempts
  duration delay = duration::zero();    // > 0: waits in the delayed set this long (broker's clock) first
  std::int64_t not_before_us = 0;       // > 0: and until this time (us since the epoch, the broker's clock)
  // A child job's parent (its id): the child is written in the parent's
  // queue shard, names it ('parent'), and joins its children set, which
  // cancel() walks. The parent must be held and not finished
  // (enqueued::kind::no_parent, parent_finished); its overall deadline less
  // queue_options::parent_reserve cuts the child's. "": none.
  std::string parent;
};

struct enqueued {
  // paused: refuse_while_paused; no_parent, parent_finished: a child job's
  // parent is not held, or has finished; too_deep, too_many_children: the
  // parent may have no more (queue_options' family bounds). Nothing written.
  enum class kind { accepted, duplicate, refused, paused, no_parent, parent_finished, too_deep, too_many_children };
  kind verdict = kind::accepted;
  std::string id;             // accepted: the new job; duplicate: the first one
  duration predicted_wait{};  // what admission judged
  bool scheduled = false;     // accepted into the delayed set (a delay or a Not-Before), not the stream
};

// A job as the broker holds it, decoded once from its hash
// (docs/reference/fleet-layout.md, "Job hash") by job_queue::find: the
// fields the scripts write, typed. A field the hash lacks is empty, or
// nullopt where "absent" means something of its own.
struct fleet_job {
  std::string id;
  std::string handler;
  // A job state's name (hourglass/jobs/job_state.hpp) as written: one a
  // newer daemon wrote shows as it is.
  std::string state;
  std::string parent;                 // a child job's ("" none)
  unsigned child_count = 0;           // the child jobs it enqueued
  std::vector<std::string> children;  // their ids, in order
  std::string idempotency_key;
  std::string entry;  // its stream entry now ("" none: scheduled, waiting or finished)
  // What it was sent: kept while it is unfinished, and whole when dead.
  std::string payload, content_type;
  // Its attempts: the current one's number (the next, while a retry is
  // scheduled), its policy's most, its deliveries (starts, a worker's death
  // included; nullopt: never written), and the earlier attempts as
  // finish.lua keeps them (a JSON array).
  int attempt = 1;
  int max_attempts = 1;
  std::optional<unsigned> deliveries;
  std::string consumer;  // the daemon that started it last
  std::string attempts_json;
  // Its timeline on the broker's clock: accepted (ms, its entry's), its
  // freshness, its whole deadline (us), its due time, its latest start, its
  // starts ("<ms> <consumer>\n" each, the last 10).
  std::optional<double> accepted_ms, freshness_ms, deadline_us, due_ms, started_ms;
  std::string starts;
  // A wait: what for ("all", "first:<n>", "first_success",
  // "signal:<name>"), its wake time (ms), the person's wait so far (us),
  // and how often and by what it woke.
  std::string wait_rule;
  std::optional<double> wake_ms;
  std::optional<double> human_since_us, human_waited_us;
  int wakes = 0;
  std::string woke_by;
  bool cancel_requested = false;
  // Its outcome.
  std::string stage, cause, reason;  // deadline_exceeded / cancelled, dead / rejected
  std::string error, message;
  unsigned http_status = 0;
  std::optional<double> queued_ms, run_ms;
  bool committed = false;
  std::string result;  // ok, with content_type
};

// What an asynchronous call ends with: its value, or (error set) the
// exception the blocking call throws: redis_unavailable or stopped_error.
template <class T>
struct async_answer {
  T value{};
  std::exception_ptr error;
};
template <class T>
using answer_fn = std::function<void(async_answer<T>)>;

// A cancel's answer: the job as it is afterwards (nullopt: unknown), and
// whether this call recorded its outcome (it was still queued).
struct cancelled_job {
  std::optional<fleet_job> job;
  bool cancelled_here = false;
  // The handler of each descendant the cancel ended on the spot (queued,
  // scheduled or waiting, cause parent): no daemon's run ends those.
  std::vector<std::string> family_cancelled_here;
};

// One page of jobs by state. Queued and running jobs are walked along the
// stream, scheduled (and retrying) ones along the delayed set by due time,
// dead ones along the dead stream: the cursor is a position there, so a job
// that stays in its state for the whole walk is listed exactly once. The
// final states have no index: their walk is Redis's SCAN over the job
// hashes, where a job that changes meanwhile may be listed twice or not at
// all. Either way a page may hold fewer than `count` jobs while more follow.
struct list_query {
  // "" any; "finished" any final state; "retrying" scheduled for an attempt
  // after the first; else that state ("queued", "scheduled", "ok", "dead", ...)
  std::string state;
  std::string cursor;       // "" from the start; else a page's next_cursor
  std::size_t count = 100;  // index positions read (1 to 1000)
  std::string handler;      // "" any
};
struct job_list {
  std::vector<fleet_job> jobs;
  std::string next_cursor;      // "" once the walk is complete
  bool invalid_cursor = false;  // the cursor is not one this state's walk makes: no page
};

// A queue at a glance (fleet/lua/queue.lua), read in one atomic step.
struct queue_state {
  std::int64_t broker_now_us = 0;
  std::uint64_t length = 0;                     // stream entries: waiting and delivered
  std::uint64_t pending = 0;                    // delivered, not finished (running, or held to run)
  std::string oldest_waiting;                   // the first entry not delivered yet ("" none): its id is its enqueue ms
  std::uint64_t scheduled = 0;                  // in the delayed set (delayed jobs, retries and waits)
  std::uint64_t dead_letters = 0;               // entries of the dead stream
  duration mean_run{};                          // the fleet's EWMA of run times
  std::optional<std::int64_t> paused_since_ms;  // the broker's ms when paused; nullopt: running
  struct consumer {
    std::string name;
    std::uint64_t slots = 0;                      // 0: no live slots recorded (left, or died)
    std::optional<std::int64_t> lease_expiry_ms;  // its slots' expiry on the broker's clock
    std::uint64_t held = 0;                       // entries it holds
  };
  std::vector<consumer> consumers;
  std::uint64_t retrying = 0;  // scheduled on an attempt after their first, among the first 1,000 due
  std::uint64_t waiting = 0;   // in the delayed set waiting (children, a wake time, a signal), ditto
  bool retrying_exact = true;  // false: more than 1,000 scheduled, only those were looked at (both counts)
  // The stats hash's counters: "finished:<state>", "expired:<stage>",
  // "retries", "dead_dropped", "duplicate_outcomes" (not mean_run_us).
  std::vector<std::pair<std::string, std::uint64_t>> totals;
};
enum class queue_op { look, pause, resume };

// What an operator's replay or delete of a dead-lettered job did (fleet/lua/dead.lua).
struct dead_answer {
  enum class kind {
    done,      // replayed (queued again under its id) or deleted
    refused,   // replay: it could not start in time (admission): nothing changed
    not_dead,  // its state is another: nothing changed
    unknown,   // no such job (or its record expired)
  };
  kind verdict = kind::unknown;
  std::string state;                       // not_dead: the job's state
  std::optional<duration> predicted_wait;  // replay: what admission judged (nullopt: unbounded)
};

// What a signal did (job_queue::async_signal).
struct signal_answer {
  enum class kind { delivered, not_waiting, unknown };
  kind verdict = kind::unknown;
  std::string state, wait_rule;  // not_waiting: the job's
  bool expired_here = false;     // not_waiting: it came after the wait's limit and ended the job (human_wait)
  std::optional<fleet_job> job;  // the job afterwards (unknown: none)
};

// How a finish was recorded.
enum class finish_result {
  first,      // the job's outcome
  scheduled,  // a retry waits in the delayed set
  no_budget,  // a retry would come too late for the job's deadline: its fallback outcome recorded
  cancelled,  // a retry of a job a DELETE marked while it ran: recorded cancelled (requested) instead
  duplicate,  // an outcome (or a retry) was recorded already
  waiting,    // a parent waits for its children (job_output::wait): no outcome yet
  resumed,    // a parent's wait was over already: back on the stream
  unknown,    // no such job
};

}  // namespace hourglass::fleet
