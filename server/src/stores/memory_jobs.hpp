// The memory job store's table (job_store.hpp, make_memory_job_store): id ->
// state, timings and result, bounded in count and in how long finished jobs
// are kept. Internal to the server.
//
// A job's state moves only as the lifecycle rule says
// (hourglass/jobs/lifecycle.hpp, on_job_event): each method below is one
// event, given with what the event carries (an outcome, a due time, a
// wait); the rule decides the next state and what comes with it, and one
// place (move_locked) does the table's part of it. What the rule leaves to
// the store's caller comes back: a run to submit, a timer to arm.
// cancel() is a request that reaches a queued or running job through its
// job_ref: in memory the executor holds both, and ends a queued one at once.
//
// Every event on an id the store no longer holds (evicted, expired,
// removed) does nothing: a job may outlive its record.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/child_jobs.hpp"
#include "core/job_view.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/jobs/lifecycle.hpp"
#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

// One attempt that ended in a retry, as the job object lists it.
struct attempt_summary {
  status st;
  std::string error_code;  // error: the handler's code
  std::string error_message;
  duration run_time{};
};
inline constexpr std::size_t max_attempts_listed = 10;  // the most recent ones

// A job as the store reports it: a copy, taken under the store's lock.
struct async_record {
  std::string id;
  std::string handler;
  time_point created{};
  jobs::job_state state = jobs::job_state::queued;  // final: its outcome is `st`
  bool cancel_requested = false;
  int attempt = 0;                          // attempts started so far
  int max_attempts = 1;                     // its retry policy's
  std::vector<attempt_summary> attempts;    // earlier attempts, the last max_attempts_listed
  time_point due{};                         // scheduled: when the next attempt may start
  time_point started{};                     // when its latest attempt started
  duration freshness = duration::max();     // how long an attempt may wait from its due time
  time_point deadline = time_point::max();  // the whole job's (Job-Deadline)
  std::string parent;                       // a child job's parent ("" none)
  std::string idempotency_key;              // "" none
  std::size_t depth = 0;                    // its parent's + 1 (0: no parent)
  std::vector<std::string> children;        // the child jobs it enqueued
  // What it was sent (sharing its request's buffer), until its outcome.
  std::shared_ptr<const std::string> payload;
  std::string payload_type;
  std::size_t children_done = 0;  // of them, those with an outcome (kept as each ends: no walk)
  std::size_t children_ok = 0;    // of those, ok
  // A parent waiting for its children (handler_result::wait_for): what for,
  // and when the wait ends at the latest (time_point::max(): no deadline).
  std::optional<fan_in> wait;
  time_point wake_at = time_point::max();
  jobs::woke_by woke_by = jobs::woke_by::none;  // its latest wake (none: its first run, and after a retry)
  int wakes = 0;
  // A person's wait (handler_result::wait_for_signal): the signal it waits
  // for (or last waited for), when that wait began and must end, its earlier
  // waits summed, and the payload of the signal that resumed it.
  std::string signal;
  time_point human_since{};
  time_point human_limit_at = time_point::max();
  duration human_waited{};
  std::string signal_payload;
  // Once finished:
  status st;
  job_timings timings;
  time_point finished_at{};
  handler_result result;    // when ok
  unsigned error_http = 0;  // when error
  std::string error_code;
  std::string error_message;
};

// What a job ended with, as finish() records it.
struct async_outcome {
  status st;
  job_timings timings;
  handler_result result;  // when ok
  unsigned error_http = 0;
  std::string error_code;
  std::string error_message;
};

// What the submitter does once the executor has the job (submitted()).
struct after_submit {
  bool cancel_now = false;                       // a DELETE came first: cancel the job_ref
  cancel_cause cause = cancel_cause::requested;  // cancel_now: why (parent: its parent was cancelled)
  std::optional<status> refused;                 // refused at admission: the record is gone, answer this
};

// The memory store's bounds besides its count and TTL: a family grows
// within `family` (child_jobs.hpp); the results held add up to at most
// `max_result_bytes` (past it the oldest finished jobs are forgotten first,
// as a new job past the count makes room); jobs delayed or waiting for a
// retry (state scheduled) are at most `max_scheduled`, held apart from the
// count: jobs due far ahead cannot refuse work that could start now. An
// Idempotency-Key names its job for `idempotency_ttl`, or while the job is
// held if that is shorter: the keys are bounded by the jobs.
struct memory_bounds {
  family_limits family;
  duration idempotency_ttl = duration::max();  // how long an Idempotency-Key names its job, at most
  std::size_t max_result_bytes = SIZE_MAX;
  std::size_t max_scheduled = SIZE_MAX;
};

class memory_jobs {
 public:
  // At most `max_jobs` (the oldest finished job is evicted for a new one),
  // each finished job kept for `ttl`.
  // Within `b` (memory_bounds) besides its count and TTL.
  memory_jobs(std::size_t max_jobs, duration ttl, memory_bounds b = {}) : max_jobs_(max_jobs), ttl_(ttl), bounds_(b) {}

  // A new queued job's id (scheduled, when a `due` time is given: a delayed
  // job), or nullopt when the table is full and no finished job can be
  // evicted to make room (a delayed job: when max_scheduled are scheduled;
  // any other: when max_jobs are held besides the scheduled), or when a
  // child cannot join its parent (then *refused, when given, says why).
  // `freshness` and `deadline` are kept for its timeline. A child job names
  // its `parent`, which must be held, unfinished and within the family
  // limits, and which lists it while the parent is held. A job with an
  // `idempotency_key` that names a job held is not created: that job's id,
  // and *duplicate (when given) set.
  std::optional<std::string> create(std::string_view handler, time_point now, int max_attempts = 1,
                                    std::optional<time_point> due = std::nullopt, duration freshness = duration::max(),
                                    time_point deadline = time_point::max(), std::string_view parent = {},
                                    std::optional<parent_problem>* refused = nullptr,
                                    std::string_view idempotency_key = {}, bool* duplicate = nullptr);
  // What a new child needs of its parent, without copying the parent's
  // record (a parent may list thousands of children): nullopt when not held.
  struct parent_facts {
    jobs::job_state state = jobs::job_state::queued;  // final: its outcome is `st`
    time_point deadline = time_point::max();
  };
  std::optional<parent_facts> parent_of_child(const std::string& id, time_point now);
  // The executor has the job: DELETE reaches it through `ref` from now on.
  // A job refused at admission (its outcome already in) is removed here,
  // unless an earlier attempt ran or it was delayed (a 202 was given: the
  // refusal is its outcome).
  after_submit submitted(const std::string& id, job_ref ref);
  // What the job was sent, shown by its view until its outcome drops it.
  void hold_payload(const std::string& id, std::shared_ptr<const std::string> payload, std::string content_type);
  // queued -> running (the job's function started): attempt one more,
  // unless it resumes after a wait (the same attempt). Its woke_by: none
  // on an attempt's first run.
  jobs::woke_by started(const std::string& id, time_point now);
  // running -> scheduled: `ended` failed and a retry is due at `due`. False
  // (nothing changed) when the job is gone or a cancel was asked meanwhile
  // (then *cancelled, when given, says why): finish it instead, cancelled
  // when a cancel was asked (a cancel that reached a run is never retried).
  bool retry_scheduled(const std::string& id, attempt_summary ended, time_point due,
                       std::optional<cancel_cause>* cancelled = nullptr);
  // scheduled -> queued, to be submitted again. False when the job is no
  // longer waiting for its retry (cancelled meanwhile, or gone).
  bool retry_due(const std::string& id);
  // The job's one outcome: starts its TTL. A child's outcome may complete
  // its waiting parent's wait: take_woken() then names the parent.
  void finish(const std::string& id, async_outcome outcome, time_point now);
  // running -> waiting for its children (handler_result::wait_for), until
  // `wake_at` at the latest. What became of it:
  enum class wait_verdict {
    waiting,    // waits: wake(id) at wake_at, unless take_woken() names it first
    resume,     // already satisfied (or wake_at has come): queued again, to be submitted
    cancelled,  // a cancel was asked while it ran: finish it cancelled instead (*cause: why)
    gone,       // no such job
  };
  wait_verdict wait_for_children(const std::string& id, fan_in f, time_point wake_at, time_point now,
                                 cancel_cause* cause = nullptr);
  // waiting -> queued at its wake time `wake_at` (woke_by "deadline"). False
  // when it no longer waits with that wake time (woken by its children,
  // cancelled, gone, or waiting again since).
  bool wake(const std::string& id, time_point wake_at);
  // running -> waiting for a person's signal `name` until `limit_at`; its
  // machine budget stands still meanwhile (waiting or cancelled, as above).
  wait_verdict wait_for_signal(const std::string& id, const std::string& name, time_point limit_at, time_point now,
                               cancel_cause* cause = nullptr);
  // The signal `name` for job `id`: delivered once, to a job waiting for it
  // (waiting -> queued, woke_by "signal", its deadline moved on by the
  // wait: resumed_deadline). The job afterwards.
  struct signalled {
    enum class kind { delivered, not_waiting, not_found };
    kind verdict = kind::not_found;
    async_record job;
  };
  signalled signal(const std::string& id, std::string_view name, std::string payload, time_point now);
  // A person's wait at its limit `now`: finished deadline_exceeded/human_wait
  // (nullopt: it no longer waits with that limit: signalled, cancelled,
  // gone, or waiting again since).
  std::optional<async_record> human_wait_over(const std::string& id, time_point now);
  // The waiting parents that finishes and cancels since the last call have
  // satisfied (now queued again, woke_by "children"), to be submitted.
  std::vector<std::string> take_woken();
  // Requests cancellation (not for a finished job) and returns the job as it
  // is afterwards: a queued job is finished (cancelled) at once. Its
  // children are cancelled with it (cause parent), and theirs: the whole
  // family is walked without recursion (a chain may be as deep as the
  // family limits allow) and marked under one lock, then the executor's
  // jobs are cancelled deepest first, so a queued descendant has ended
  // before a running ancestor's cancel frees a worker that could take it.
  // The jobs it ended in the table, which no executor run ends (scheduled
  // or waiting, the whole family's), are added to *ended_here when given:
  // their outcomes are the caller's to count and log.
  struct ended_in_table {
    std::string id, handler;
    status st;
  };
  std::optional<async_record> cancel(const std::string& id, time_point now,
                                     cancel_cause cause = cancel_cause::requested,
                                     std::vector<ended_in_table>* ended_here = nullptr);
  // nullopt for an unknown or expired id.
  std::optional<async_record> find(const std::string& id, time_point now);
  // Up to `limit` jobs whose state matches `state` ("" any, "finished", or a
  // state's name), in id order from just after `after` ("" from the start).
  // Ids are fixed, so a job held throughout a walk is listed exactly once.
  std::vector<async_record> list(std::string_view state, const std::string& after, std::size_t limit, time_point now,
                                 std::string_view handler = {});
  std::size_t size() const;
  // The bytes of the results held now.
  std::size_t result_bytes() const;
  // Jobs by state now, and when the oldest queued one was created.
  struct state_counts {
    std::uint64_t queued = 0, running = 0, scheduled = 0, waiting = 0, finished = 0;
    std::uint64_t retrying = 0;  // of the scheduled: an attempt after the first
    std::optional<time_point> oldest_queued;
  };
  state_counts counts(time_point now);

 private:
  struct entry {
    async_record rec;
    job_ref ref;  // set once submitted
    bool submitted = false;
    cancel_cause cancel_cause_asked = cancel_cause::requested;  // with rec.cancel_requested
  };

  // The table's part of the rule's `step` for `e`: its state moved, the
  // scheduled count kept, its attempt and wakes counted, its outcome's
  // bookkeeping (the event's data, e.g. its status, set by the caller
  // first), its parent counted down.
  void move_locked(entry& e, const jobs::job_step& step, time_point now);
  void purge_locked(time_point now);
  bool evict_one_locked();
  void erase_locked(std::map<std::string, entry, std::less<>>::iterator it);
  // After `child` finished: its parent woken when its wait is satisfied.
  void wake_parent_locked(const async_record& child);
  bool wait_satisfied_locked(const async_record& parent) const;
  entry* waitable_locked(const std::string& id, cancel_cause* cause, wait_verdict& refused);
  std::string new_id_locked();

  const std::size_t max_jobs_;
  const duration ttl_;
  const memory_bounds bounds_;
  std::size_t result_bytes_ = 0;  // of the finished jobs held
  std::size_t scheduled_ = 0;     // jobs in state scheduled
  mutable std::mutex mu_;
  std::map<std::string, entry, std::less<>> jobs_;           // by id: listing walks them in order
  std::deque<std::pair<time_point, std::string>> finished_;  // in finishing order
  std::vector<std::string> woken_;                           // take_woken()'s
  // Idempotency-Key -> its job's id and when the key lapses; a key goes with its job.
  std::map<std::string, std::pair<std::string, time_point>, std::less<>> keys_;
  std::random_device rng_;
};

// The job object of `r` at `now`.
job_view view_of(const async_record& r, time_point now);

}  // namespace hourglass::server::detail
