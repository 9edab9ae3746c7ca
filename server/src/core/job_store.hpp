// Where async jobs (Prefer: respond-async) live: this process's memory
// (make_memory_job_store), or with --broker the fleet's durable queue on
// Redis (make_fleet_job_store). One interface, so the HTTP side
// (job_endpoints.hpp) is written once: it asks, the store answers with
// job_view, the job object of the API.
//
// Every call is asynchronous: `done` runs exactly once, from any thread. The
// Redis store never blocks the calling thread on a round trip; the memory
// store completes inline. A store also runs its jobs: the memory one submits
// each to the executor and records its finish; the fleet's consumers start
// and finish theirs on the broker. So "finish" is not a call of this
// interface: only a store knows when its jobs end. Internal to the server.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/child_jobs.hpp"
#include "core/job_view.hpp"
#include "core/queue_view.hpp"
#include "hourglass/exposition.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/support/rfc3339.hpp"

namespace hourglass::server::detail {

struct job_input;
struct core;

// A new async job, as the session read it.
struct new_job {
  std::shared_ptr<const job_input> in;
  time_point headers_at{};               // its freshness counts from here
  duration freshness = duration::max();  // how long it may wait to start (each attempt, from its due time)
  job_retry_policy retry;                // attempts after a retryable error (one: none)
  time_point deadline = never;           // the whole job's, across attempts (Job-Deadline); never: none
  // When its first attempt may start (Job-Delay, Job-Not-Before): `delay`
  // after headers_at, or not before a wall-clock time (in a fleet, the
  // broker's). Its freshness counts from then.
  duration delay = duration::zero();
  std::optional<support::wall_time> not_before;
  // A child job's parent (enqueue_child): cancelling the parent cancels it,
  // and each lists the other. "": none.
  std::string parent;
};

// What create() did.
struct created {
  enum class kind {
    accepted,   // held: `job` is it (id and state)
    duplicate,  // its Idempotency-Key names an earlier job: `job` is that one, in its state now
    refused,    // not held: answer `refusal` (book it, unless `booked`)
    invalid,    // a malformed request (or a child of a parent it cannot have): `http_status` `error`, `message`
  };
  kind verdict = kind::accepted;
  job_view job;
  status refusal;       // refused: rejected (queue_full, broker_unavailable), or expired at admission
  bool booked = false;  // refused: already counted and logged (the executor refused it)
  // Refused at admission by the fleet: the freshness asked for and what was
  // left of it at the broker, for the answer's headers.
  duration budget = duration::max(), remaining = duration::max();
  std::string note;            // refused: for the log only
  std::string error, message;  // invalid
  unsigned http_status = 400;  // invalid
};

// The answer to a child job that cannot join its parent (parent_problem):
// 400 invalid_parent, 409 parent_finished, too_deep or too_many_children.
// Nothing is held.
created parent_refusal(parent_problem why);

// A job's Idempotency-Key (one job per key, in either store) must be 1 to
// 128 printable ASCII characters: else this answer, 400
// invalid_idempotency_key. nullopt: it is, or none was sent.
std::optional<created> idempotency_key_refusal(const job_input& in);

// What find() and cancel() found.
struct found {
  enum class kind { found, not_found, unavailable };
  kind verdict = kind::not_found;
  job_view job;
};

// What a signal did (POST /v1/jobs/{id}/signals/{name}).
struct signal_result {
  enum class kind {
    delivered,    // the job waited for it: resumed (`job` afterwards)
    not_waiting,  // it waits for no such signal now (`job` as it is): nothing changed
    not_found,    // no such job (or its record expired)
    unavailable,  // the store could not be reached
  };
  kind verdict = kind::not_found;
  job_view job;
};

// Jobs by state, a page at a time (job_listing.hpp reads one from a query).
struct list_request {
  // "" any; "finished" any final state; "retrying" scheduled for an attempt
  // after the first; else that state: "queued", "running", "scheduled", "ok", ...
  std::string state;
  std::string cursor;  // "" from the start; else a page's next_cursor
  std::size_t limit = 100;
  std::string handler;  // "" any
};
struct job_page {
  bool unavailable = false;     // the store could not be read: no page
  bool invalid_cursor = false;  // not a cursor this store's walk for the state makes: no page
  bool too_many = false;        // past the store's rate of costly listings (--max-list-scans): no page
  std::vector<job_view> jobs;
  std::string next_cursor;  // "" when there is nothing after this page
};

// What queue_state() found.
struct queue_answer {
  bool unavailable = false;        // the store could not be read: no view
  bool pause_unsupported = false;  // asked to pause or resume a store that cannot: nothing changed
  queue_view view;
};

// What an operator's action on dead-lettered jobs did.
struct dead_result {
  enum class kind {
    done,         // replayed (queued again), deleted, or purged
    refused,      // replay: it could not start in time: 504 at admission, nothing changed
    not_dead,     // the job is in another state (`state`): nothing changed
    not_found,    // no such job (or its record expired)
    unsupported,  // this store has no dead letter (memory)
    unavailable,  // the broker could not be reached
  };
  kind verdict = kind::unsupported;
  job_view job;                                     // replay: the job afterwards
  std::string state;                                // not_dead
  duration budget = duration::max();                // refused: the freshness asked for
  std::optional<duration> predicted_wait;           // refused: what admission judged (nullopt: unbounded)
  std::uint64_t purged = 0, entries = 0, left = 0;  // purge: jobs and entries deleted, entries left
  std::uint64_t replayed = 0, skipped = 0;          // a bulk replay: queued again; no longer dead or gone
};

struct schedule;  // schedules.hpp

// A periodic job's state as its store keeps it (GET /v1/schedules).
struct schedule_state {
  std::optional<support::wall_time> last_fire;  // the latest settled fire (run, skipped or missed)
  std::string last_job;                         // the job of the latest run ("" none)
  std::optional<support::wall_time> next_fire;
};
// What one look at a schedule did.
struct schedule_tick {
  std::uint64_t enqueued = 0, missed = 0, skipped_overlap = 0;
  schedule_state state;
  bool unavailable = false;  // the store could not be reached: nothing settled
};

class job_store {
 public:
  template <class T>
  using callback = std::function<void(T)>;
  virtual ~job_store() = default;

  // Starts taking jobs (fleet: claims the consumer name, starts consuming).
  virtual void start() {}
  virtual void create(new_job job, callback<created> done) = 0;
  // Many jobs at once (POST /v1/jobs:bulk): each judged on its own, every
  // answer in order through one `done`. The fleet's store sends them to the
  // broker in one script call; this default creates them one by one.
  virtual void create_bulk(std::vector<new_job> jobs, callback<std::vector<created>> done);
  // nullopt-like not_found for an unknown or expired id.
  virtual void find(std::string id, callback<found> done) = 0;
  // Asks the job to stop: a queued (or waiting) job is cancelled at once, a
  // running one is marked and stops at its next check. The job as it is
  // afterwards; `cause` is what its outcome says (requested: a DELETE).
  virtual void cancel(std::string id, cancel_cause cause, callback<found> done) = 0;
  // Delivers the signal `name` (with `payload`) to a job waiting for it
  // (handler_result::wait_for_signal): it is resumed, its machine budget
  // what it had left when it began to wait. Delivered once: the first
  // signal resumes it, any other finds it not waiting.
  virtual void signal(std::string id, std::string name, std::string payload, callback<signal_result> done) = 0;
  // A page of jobs in `state`. The memory store walks ids in order; the
  // fleet walks the index that holds the state (job_queue::list_query):
  // either way a job that stays in its state is listed exactly once (the
  // fleet's finished jobs, walked by SCAN, at least once).
  virtual void list(list_request q, callback<job_page> done) = 0;
  // The queue at a glance (GET /v1/queues), after pausing or resuming it
  // when asked. The fleet's pause holds across the fleet: consumers stop
  // reading within one renewal period. The memory store cannot pause.
  virtual void queue_state(queue_action a, callback<queue_answer> done) = 0;
  // Dead-lettered jobs (the fleet's; the memory store has none): a replay
  // admits the job again through admission with `freshness` from now (and
  // its handler's minimum budget), never queued to expire; delete removes
  // one; purge the oldest `limit`.
  virtual void replay_dead(std::string /*id*/, duration /*freshness*/, callback<dead_result> done) { done({}); }
  virtual void delete_dead(std::string /*id*/, callback<dead_result> done) { done({}); }
  virtual void purge_dead(std::size_t /*limit*/, callback<dead_result> done) { done({}); }
  // The oldest `limit` dead jobs replayed one by one as replay_dead does,
  // until one is refused at admission (verdict refused; those replayed
  // before it stay queued): replayed, skipped and left set.
  virtual void replay_oldest_dead(std::size_t /*limit*/, duration /*freshness*/, callback<dead_result> done) {
    done({});
  }
  // Settles a periodic job's fires due by now on the store's clock (memory:
  // the daemon's; fleet: the broker's), each fire at most once however many
  // daemons look (schedules.hpp says which run and which are missed).
  virtual void tick_schedule(const schedule& s, callback<schedule_tick> done) = 0;
  // SIGTERM: stop taking jobs; running ones may finish until `deadline`.
  virtual void drain(time_point /*deadline*/) {}
  // Its own families on /metrics (the memory store's size, the fleet's series).
  virtual void write_metrics(exposition_writer& /*w*/) const {}
};

// Gathers the answers of n calls that complete on any threads: `done` runs
// once, with all of them in order, when the last is put.
class created_gather {
 public:
  created_gather(std::size_t n, job_store::callback<std::vector<created>> done)
      : answers_(n), left_(n), done_(std::move(done)) {}
  void put(std::size_t i, created c) {
    {
      std::lock_guard lock(mu_);
      answers_[i] = std::move(c);
      if (--left_ != 0) return;
    }
    done_(std::move(answers_));
  }

 private:
  std::mutex mu_;
  std::vector<created> answers_;
  std::size_t left_;
  job_store::callback<std::vector<created>> done_;
};

// In this process: at most opts.async_max_jobs (the oldest finished job makes
// room), each finished job kept for opts.async_ttl; run on core's executor.
std::unique_ptr<job_store> make_memory_job_store(core& c);

}  // namespace hourglass::server::detail
