// The consumer's insides, shared by its three parts: delivery
// (consumer_reader.cpp, the reader thread), keeping the lease and writing
// outcomes (consumer_keeper.cpp, the renewer and writer threads), and a
// job's life with start and drain (consumer.cpp). The decisions are pure
// functions these threads ask: a held entry's life (held_entry.hpp), what a
// job's result becomes (settlement.hpp), what a renewal's answer means
// (renewal.hpp). Every timed wait is on the executor's clock (`clk`).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "held_entry.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/freshness.hpp"
#include "hourglass/fleet/lease.hpp"
#include "reading_room.hpp"
#include "settlement.hpp"
#include "stream_reply.hpp"

namespace hourglass::fleet {

struct consumer::impl : std::enable_shared_from_this<impl> {
  using field_list = detail::field_list;
  using run_value = detail::run_value;

  // One entry this daemon holds, from its delivery until it is forgotten:
  // its life is the state machine of held_entry.hpp; the rest are facts.
  struct held {
    std::string job_id;
    std::string handler;     // its metrics label
    bool reclaimed = false;  // taken over from a dead holder: expiry is stage reclaim
    bool deleted = false;    // its entry was deleted from the stream (loss alarm): not renewed, nobody can take it
    // A take's start said run: the broker counts it running before a worker
    // has it (reading waits until one does; reading_room.hpp).
    bool started_by_take = false;
    detail::held_state state = detail::held_state::queued;
    job_ref ref;        // while its job is in the executor
    duration queued{};  // the broker's age of the job when it started (or expired)
    time_point run_start{};
    // From its start (the start script): what the retry rule needs at its end.
    detail::retry_facts retry;
    time_point start_sent{};  // when the start script went, on our clock; retry.now was the broker's then
  };
  using held_map = std::map<std::string, held>;  // by entry id
  struct outcome_to_write {
    std::string entry;
    std::string job_id;
    std::optional<duration> run_time;
    field_list fields;
    std::string handler;
    status recorded;  // counted once the finish says it is the first
    std::optional<job_queue::outcome::retry_request> retry;
    std::optional<wait_request> wait;  // no outcome: the job waits for its children
    bool refused_once = false;         // the broker refused it: `fields` now say so (refuse_front_locked)
  };
  // An outcome for feed_locked's write.
  struct outcome_parts {
    std::optional<duration> run_time;
    field_list fields;
    status recorded;
    std::optional<job_queue::outcome::retry_request> retry;  // a failed attempt to retry
    std::optional<wait_request> wait;                        // the job waits for its children
  };
  // A job an action stops, cancelled outside the lock.
  struct job_stop {
    job_ref ref;
    cancel_cause cause;
  };
  using stop_list = std::vector<job_stop>;

  impl(job_queue& q, redis_client& r, executor& ex, job_runner run, consumer_options o);

  job_queue& queue;
  redis_client& reader;
  executor& jobs;
  hourglass::clock& clk;
  job_runner runner;
  consumer_options opts;
  lease_timing timing;
  context_source stop_reading;
  context_source stop_keeping;
  // With opts.metrics, the executor counts fleet jobs here, unrendered: the
  // outcomes recorded on the broker are what opts.metrics counts.
  hourglass::metrics in_executor;

  mutable std::mutex mu;
  std::condition_variable slot_freed;  // reading waits for room, drain for the jobs' ends
  std::condition_variable work_ready;  // the writer waits for outcomes to write
  held_map held_entries;
  // Takes in flight (asynchronous: their replies are delivered on the
  // connection's thread) and the new entries they asked for, counted as
  // busy so that reading never asks for more than there is room for.
  std::size_t takes_in_flight = 0;
  std::size_t taking = 0;
  bool take_failed = false;             // a take's reply was lost: the reader reads its own pending entries again
  std::size_t takes_failed_in_row = 0;  // since a take was answered well: how long the reader waits
  bool backlog_likely = true;           // the last read of new entries took all it asked for
  std::deque<outcome_to_write> outbox;
  std::vector<job_queue::held_entry> to_hand_back;  // to the fleet at once, by the writer
  lease_value lease_v;
  time_point last_renewed{};
  duration predicted_wait{};  // the fleet's, at the last renewal: for the retry rule
  bool self_fenced = false;
  // Set when a drain begins: renewals then offer no slots, so admission
  // stops counting this daemon and the queue view shows it draining (a
  // live lease with no slots) while its running jobs finish.
  bool draining = false;
  consumer_stats st;
  std::thread reader_thread;
  std::thread renewer_thread;
  std::thread writer_thread;
  bool running = false;

  void log(const std::string& line) const {
    if (opts.log) opts.log(line);
  }

  // ---- bookkeeping (under mu): consumer.cpp ----
  detail::holding holding_locked() const;
  std::size_t busy_locked() const { return holding_locked().busy; }
  detail::holding_limits reading_limits() const { return {opts.slots, opts.prefetch, max_takes_in_flight}; }
  std::vector<job_queue::held_entry> renewable_locked() const;
  // Feeds `e` to the entry's state machine and does under mu what it says
  // about the entry: queues `outcome` (for outcome_ready) or its hand-back,
  // forgets it (`it` is then invalid), and adds the job to stop to `stops`
  // (the events that stop one: submitted, drain_*, fenced, lost,
  // delete_marked). Wakes drain when the entry frees its slot, and reading
  // when it may take (no take in flight; room() depends on it).
  detail::held_action feed_locked(held_map::iterator it, detail::held_event e, stop_list* stops = nullptr,
                                  outcome_parts* outcome = nullptr);
  // Feeds `e` to every held entry; how many of them it stopped.
  std::size_t feed_all_locked(detail::held_event e, stop_list& stops);
  static void stop_jobs(stop_list& stops) noexcept;
  // An outcome recorded on the broker, counted in opts.metrics.
  void count_recorded(const std::string& handler, const status& st);
  // The retry rule's verdict on a failed attempt (hourglass_job_retries_total).
  void count_retry(const std::string& handler, job_retry_verdict v);
  // Microseconds of the broker's clock since the epoch, as the retry rule takes them.
  // Saturating: a deadline centuries ahead is no deadline, never one in the past.
  static time_point broker_time_point(std::int64_t us) {
    constexpr std::int64_t most = std::chrono::duration_cast<std::chrono::microseconds>(duration::max()).count();
    return us >= most ? never : time_point(std::chrono::microseconds(us));
  }
  // Stops reading (drain, or the name taken): the reader wakes if it waits for room.
  void stop_reading_locked();

  // ---- delivery (the reader thread): consumer_reader.cpp ----
  // Our clock and the broker's TIME, read together.
  struct timed_now {
    time_point sent;
    std::int64_t broker_us = 0;
  };
  struct timed_read {
    std::vector<stream_entry> entries;
    timed_now now;
  };
  // A start the reader's take did with the read: the worker runs it without
  // a round trip of its own. `sent`: our clock when the take went.
  struct prestart {
    job_queue::start_answer answer;
    time_point sent;
  };
  using prestart_ptr = std::shared_ptr<prestart>;  // its answer is moved to the worker
  // `now`: when the entries were read, if known; else the broker's TIME is
  // asked. `started`: the take's starts, by entry (none: the workers start them).
  void deliver(const std::vector<stream_entry>& entries, bool reclaimed, std::optional<timed_now> now = std::nullopt,
               const std::map<std::string, prestart_ptr>& started = {});
  timed_read read_new(const context& ctx, std::vector<std::string> xreadgroup);
  // New entries read and started at once (job_queue::take) for `count` free
  // workers, without waiting: on_taken delivers them on the connection's
  // thread when the reply comes, one thread hop fewer a take. One at a
  // time: with two in flight each asked for fewer entries, 8.0 commands a
  // job against 7.9, for no more jobs a second (docs/benchmarks.md).
  static constexpr std::size_t max_takes_in_flight = 1;
  void start_take(std::size_t count);
  void on_taken(std::size_t count, time_point sent, async_answer<job_queue::taken> a) noexcept;
  std::int64_t broker_time();
  std::int64_t time_of(const redis_reply& t);
  void note_offset(std::int64_t broker_now_us);
  std::size_t wait_for_room(time_point until);  // 0: no room by then, or reading stopped
  time_point promote_due(const context& ctx);   // when to look again
  void read_loop();

  // ---- a job's life (worker threads): consumer.cpp ----
  // What deliver() read of an entry: how its job is judged.
  struct entry_terms {
    time_point start_by = never;  // on our clock
    time_point deadline = never;  // the whole job's, on our clock
    duration freshness = duration::max();
    duration min_budget{};
    stream_id counted_from;  // its freshness counts from here: its due time, else its entry id
  };
  void submit(const std::string& entry, const std::string& job_id, const std::string& handler, const entry_terms& t,
              prestart_ptr started);
  run_value start_and_run(const context& ctx, const std::string& entry, const std::string& job_id, const entry_terms& t,
                          const prestart_ptr& started);
  error_record describe(std::exception_ptr e) const;
  void on_done(const std::string& entry, job_result<run_value>&& r) noexcept;

  // ---- the renewer and the writer: consumer_keeper.cpp ----
  // One renewal: whether it was answered (renewed, or the name is taken),
  // and when to send the next.
  struct renewal {
    bool answered = false;
    time_point next;
  };
  renewal renew();
  bool flush(const context& ctx);
  // The broker refused the oldest waiting outcome, alone, for good (`why`):
  // the first time it is replaced by an error that says so, the second it
  // is dropped (its entry reclaimed as any dropped one). Never retried as
  // it was: one outcome the broker will not take must not hold back the rest.
  void refuse_front_locked(const std::string& why);
  void renew_loop(time_point first);
  void write_loop();

  // ---- start and drain: consumer.cpp ----
  void start(const context& ctx);
  void drain(time_point deadline);
  consumer_stats stats() const;
};

}  // namespace hourglass::fleet
