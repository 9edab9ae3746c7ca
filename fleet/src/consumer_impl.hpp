// The consumer's insides, shared by its three parts: delivery
// (consumer_reader.cpp, the reader thread), keeping the lease and writing
// outcomes (consumer_keeper.cpp, the renewer and writer threads), and a
// job's life with start and drain (consumer.cpp). What becomes of a job's
// result is the pure settle() of settlement.hpp.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/freshness.hpp"
#include "hourglass/fleet/lease.hpp"
#include "settlement.hpp"
#include "stream_reply.hpp"

namespace hourglass::fleet {

struct consumer::impl : std::enable_shared_from_this<impl> {
  using field_list = detail::field_list;
  using run_value = detail::run_value;

  // One entry this daemon holds (delivered to it, outcome not yet written).
  struct held {
    std::string job_id;
    std::string handler;     // its metrics label
    bool reclaimed = false;  // taken over from a dead holder: expiry is stage reclaim
    job_ref ref;             // while in the executor
    bool abandoned = false;  // no outcome from us: handed back, fenced or lost
    bool hand_back = false;  // abandoned, and to be handed back at once
    bool started = false;    // the start script said run
    bool writing = false;    // its outcome waits in the outbox (or its hand-back in to_hand_back)
    bool deleted = false;    // its entry was deleted from the stream (loss alarm): nobody else can take it
    duration queued{};       // the broker's age of the job when it started (or expired)
    time_point run_start{};
  };
  struct outcome_to_write {
    std::string entry;
    std::string job_id;
    std::optional<duration> run_time;
    field_list fields;
    std::string handler;
    status recorded;  // counted once the finish says it is the first
  };

  impl(job_queue& q, redis_connection& r, executor& ex, job_runner run, consumer_options o);

  job_queue& queue;
  redis_connection& reader;
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
  std::condition_variable slot_freed;        // the reader waits for room
  std::condition_variable work_ready;        // the writer waits for outcomes to write
  std::map<std::string, held> held_entries;  // by entry id
  std::deque<outcome_to_write> outbox;
  std::vector<job_queue::held_entry> to_hand_back;  // to the fleet at once, by the writer
  lease_value lease_v;
  time_point last_renewed{};
  bool self_fenced = false;
  consumer_stats st;
  std::thread reader_thread;
  std::thread renewer_thread;
  std::thread writer_thread;
  bool running = false;

  void log(const std::string& line) const {
    if (opts.log) opts.log(line);
  }

  // ---- bookkeeping (under mu): consumer.cpp ----
  std::size_t busy_locked() const;
  std::vector<job_queue::held_entry> renewable_locked() const;
  // Gives up jobs without an outcome from us; their refs to cancel, outside the lock.
  std::vector<job_ref> abandon_locked(bool hand_back, bool include_started);
  void push_outcome_locked(const std::string& entry, held& h, std::optional<duration> run, field_list fields,
                           status recorded);
  // An outcome recorded on the broker, counted in opts.metrics.
  void count_recorded(const std::string& handler, const status& st);
  void hand_back_locked(const std::string& entry, held& h);  // to the fleet at once, by the writer
  void forget_locked(const std::string& entry);

  // ---- delivery (the reader thread): consumer_reader.cpp ----
  void deliver(const std::vector<stream_entry>& entries, bool reclaimed);
  std::int64_t broker_time();
  void note_offset(std::int64_t broker_now_us);
  std::size_t wait_for_room();
  void read_loop();

  // ---- a job's life (worker threads): consumer.cpp ----
  void submit(const std::string& entry, const std::string& job_id, const std::string& handler, time_point start_by,
              duration freshness, duration min_budget, stream_id sid);
  run_value start_and_run(const context& ctx, const std::string& entry, const std::string& job_id, duration freshness,
                          duration min_budget, stream_id sid);
  error_record describe(std::exception_ptr e) const;
  void on_done(const std::string& entry, job_result<run_value>&& r) noexcept;

  // ---- the renewer and the writer: consumer_keeper.cpp ----
  bool renew();
  bool flush(const context& ctx);
  void renew_loop();
  void write_loop();

  // ---- start and drain: consumer.cpp ----
  void start(const context& ctx);
  void drain(time_point deadline);
  consumer_stats stats() const;
};

}  // namespace hourglass::fleet
