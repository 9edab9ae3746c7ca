// The fleet's consumer: feeds one daemon's share of a queue into its executor
// (docs/fleet.md, "A job's life" and "Guarantees").
//
//   hourglass::fleet::consumer c(queue, reader_connection, executor,
//                                {.run = [](const context& ctx, const delivered_job& j) { ... }},
//                                {.name = "host-a:8080", .slots = 8});
//   c.start(ctx);                 // claims the name, reads its own pending entries first
//   ...
//   c.drain(clk.now() + 5s);      // SIGTERM: stop reading, finish, hand the rest back
//
// A job goes:
//   delivered (XREADGROUP, or reclaimed from a dead daemon with XAUTOCLAIM)
//     -> judged on the broker's TIME: past its freshness it is recorded
//        deadline_exceeded (stage queue, or reclaim) and never run
//     -> queued in the executor with start_by on our clock (expired there:
//        deadline_exceeded/queue, dropped at dequeue as any job)
//     -> started: the start script checks, atomically, that this daemon still
//        holds it, that no outcome is recorded, and how often it was started
//        (max_deliveries reached: dead-lettered); freshness is judged again
//     -> run; its outcome written with the first-outcome-wins finish.
//
// Three threads of its own: the reader (blocking XREADGROUP on `reader`, a
// connection nobody else uses, and XAUTOCLAIM), the renewer (the lease every
// lease/3, which keeps this daemon's entries from being reclaimed and brings
// DELETE's marks; self-fencing when renewals fail for most of a lease) and
// the writer (outcomes and hand-backs, kept in memory while the broker is
// down). Each blocks only itself: the connections' io_context is run by the
// caller's threads. Every wait of theirs, and drain's, is on the executor's
// clock, woken by the event it waits for: none polls.
//
// Thread safety: stats() and set_slots() from any thread; start, drain and
// stop from one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/context.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/fleet/delivery.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/metrics.hpp"

namespace hourglass::fleet {

struct job_runner {
  std::function<job_output(const context&, const delivered_job&)> run;
  std::function<error_record(std::exception_ptr)> describe_error;  // nullptr: what() as the message
  std::function<duration(std::string_view handler)> run_limit;     // nullptr: no limit
  std::function<duration(std::string_view handler)> idle_limit;    // nullptr: no limit
};

struct consumer_options {
  std::string name;       // --consumer: unique in the fleet
  std::size_t slots = 1;  // jobs run at once: the capacity the fleet's admission counts
  // Entries held beyond `slots`, waiting in the executor for a worker
  // (Celery's prefetch): bigger reads and script batches, so fewer round
  // trips a job; each still judged at its start, on the broker's TIME.
  std::size_t prefetch = 0;
  duration lease = std::chrono::seconds(10);
  unsigned max_deliveries = 3;
  duration read_block = std::chrono::milliseconds(500);  // longest XREADGROUP BLOCK
  std::size_t max_unwritten_outcomes = 10000;            // kept while the broker is down
  bool judge_freshness = true;                           // false (--policy fifo): every job runs, however late
  std::function<void(const std::string&)> log;           // a line per state change; nullptr: silent
  // Where the outcomes this consumer records are counted, as a daemon counts
  // its own jobs (finished_total, expired_total: a job's first outcome only,
  // dead-lettered as error). nullptr: the executor's own counts instead.
  hourglass::metrics* metrics = nullptr;
};

struct consumer_stats {
  std::uint64_t delivered = 0;           // new entries read
  std::uint64_t reclaimed = 0;           // entries taken over from a dead holder (or our own earlier life)
  std::uint64_t started = 0;             // handlers run
  std::uint64_t outcomes_written = 0;    // first outcomes recorded
  std::uint64_t retries_scheduled = 0;   // failed attempts whose retry the finish scheduled
  std::uint64_t duplicate_outcomes = 0;  // a second completion: counted, not stored
  std::uint64_t expired_queue = 0;       // deadline_exceeded/queue, never run
  std::uint64_t expired_reclaim = 0;     // deadline_exceeded/reclaim, never run
  std::uint64_t dead_lettered = 0;
  std::uint64_t dead_dropped = 0;      // of the dead list, entries its dead-letterings dropped past --dead-max
  std::uint64_t handed_back = 0;       // at drain, or refused by the executor
  std::uint64_t fenced_jobs = 0;       // stopped because the lease could not be renewed
  std::uint64_t lost_entries = 0;      // the loss alarm: pending entries whose data was deleted
  std::uint64_t outcomes_dropped = 0;  // more unwritten outcomes than max_unwritten_outcomes, or refused twice
  std::uint64_t outcomes_refused = 0;  // outcomes the broker refused alone, for good (recorded as outcome_refused)
  std::uint64_t broker_errors = 0;
  std::uint64_t negative_ages = 0;          // entries newer than the broker's TIME (its clock stepped back)
  std::size_t held = 0;                     // entries this daemon holds now
  std::size_t unwritten = 0;                // outcomes waiting for the broker
  bool fenced = false;                      // another process took the name: this consumer stopped
  std::int64_t broker_clock_offset_us = 0;  // broker wall clock - ours: informational only
  std::int64_t backlog = 0;                 // the queue's, at the last renewal: not yet delivered
  std::int64_t pending = 0;                 // the queue's, at the last renewal: delivered, not finished
  std::int64_t scheduled = 0;               // the queue's, at the last renewal: delayed jobs and retries waiting
  bool paused = false;                      // the queue is paused (at the last renewal): nothing is read
  std::uint64_t promoted = 0;               // due jobs this daemon moved to the stream
  std::uint64_t expired_admission = 0;      // due jobs this daemon recorded deadline_exceeded/admission
};

// Several consumers' counts as one process's (one consumer per shard of a
// queue): counters, held and unwritten summed, the queue's gauges (backlog,
// pending, scheduled: each shard's at its last renewal) summed, fenced and
// paused when any is; the broker clock offset the first's. Empty: zeros.
consumer_stats sum_of(const std::vector<consumer_stats>& each);

// Another live process renews this consumer name's lease.
class name_taken : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class consumer {
 public:
  // `queue` and its connection carry the scripts; `reader` is used for
  // blocking reads only. The executor's clock is the consumer's.
  consumer(job_queue& queue, redis_client& reader, executor& jobs, job_runner runner, consumer_options options);
  ~consumer();  // stop()
  consumer(const consumer&) = delete;
  consumer& operator=(const consumer&) = delete;

  // Claims the consumer name (waiting one renewal period when another
  // process's lease is there: name_taken if it is renewed meanwhile), then
  // starts reading, this name's own pending entries first. Throws
  // redis_unavailable when the broker cannot be reached.
  void start(const context& ctx);

  // Stops reading now; jobs not started go back at once, running ones may
  // finish until `deadline` (on the executor's clock) and are then stopped
  // and handed back; outcomes are written and the lease released (both
  // bounded by the connection's io_timeout when the broker is down).
  void drain(time_point deadline);
  void stop();  // drain(now)

  // From now on this consumer holds at most `slots` running and `prefetch`
  // waiting entries (a sharded_consumer's share of the process's workers);
  // its next renewal offers `slots` to admission. Entries it already holds
  // beyond them run on: it reads less until it is under. Throws
  // std::invalid_argument for no slots.
  void set_slots(std::size_t slots, std::size_t prefetch);

  consumer_stats stats() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace hourglass::fleet
