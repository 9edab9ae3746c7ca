// The metrics registry and its Prometheus rendering (every series the daemon
// exports, with types and labels: docs/reference/metrics.md).
//
// Families (base unit seconds; no job ids in labels):
//   hourglass_jobs_admitted_total{handler}
//   hourglass_jobs_rejected_total{handler,reason}   queue_full | insufficient_budget |
//                                                   invalid_timeout | shutting_down |
//                                                   broker_unavailable, queue_paused (fleet mode) |
//                                                   cancelled (our addition: the submitter's
//                                                   context was cancelled before admission)
//   hourglass_jobs_expired_total{handler,stage}     queue | run | idle | reclaim | retry
//   hourglass_jobs_finished_total{handler,outcome}  ok | error | rejected (circuit_open) |
//                                                   deadline_exceeded | cancelled
//   hourglass_jobs_completed_late_total{handler}
//   hourglass_jobs_completed_late_seconds_total{handler}   (our addition: worker time spent
//                                                   on jobs that finished after their deadline)
//   hourglass_job_retries_total{handler,result}     scheduled | exhausted | no_budget: what
//                                                   became of an async job's failed attempt
//   hourglass_retry_attempts_total
//   hourglass_retries_denied_total{reason}          deadline | retry_budget
//   hourglass_request_budget_seconds, hourglass_queue_delay_seconds,
//   hourglass_remaining_budget_at_dispatch_seconds, hourglass_run_duration_seconds,
//   hourglass_time_to_first_output_seconds          (histograms; the last: streamed responses,
//                                                   from the request's start to its first bytes)
//   hourglass_queue_depth, hourglass_workers_busy   (gauges)
//
// The accounting invariant, per handler, at any quiet moment:
//   offered  = admitted + sum over reasons of rejected   (every refusal, once, there only)
//   admitted = sum over outcomes of finished + jobs in flight
// A refused job is never counted in finished; expired breaks admitted jobs
// that ended deadline_exceeded down by stage.
//
// Recorders, and exactly what each touches (h = the handler's block):
//   on_admitted(h, budget)          h.admitted += 1; request_budget.record(budget)
//                                   unless budget == duration::max() (no deadline).
//   on_rejected(h, reason)          queue_full: h.rejected_queue_full += 1;
//                                   shutting_down: h.rejected_shutting_down += 1;
//                                   broker_unavailable: h.rejected_broker_unavailable += 1;
//                                   queue_paused: h.rejected_queue_paused += 1;
//                                   reject_reason::none: nothing.
//   on_insufficient_budget(h)       h.rejected_insufficient_budget += 1.
//   on_invalid_timeout(h)           h.rejected_invalid_timeout += 1.
//   on_refused(h, st)               a job refused before admission, by st: rejected as
//                                   on_rejected; deadline_exceeded (any stage) as
//                                   on_insufficient_budget; cancelled: h.rejected_cancelled += 1;
//                                   invalid: h.rejected_invalid_timeout += 1;
//                                   ok and error: nothing (not refusals).
//   on_dispatch(delay, remaining)   queue_delay.record(delay); remaining_budget_at_dispatch
//                                   .record(remaining) unless remaining == duration::max().
//   on_finished(h, st, run, late)   by st.code:
//     ok                            h.finished_ok += 1; run_duration.record(run)
//     error                         h.finished_error += 1; run_duration.record(run)
//     deadline_exceeded, stage
//       admission                   as on_insufficient_budget, and no finished count: a job
//                                   refused at admission was never admitted.
//       queue                       h.expired_queue += 1; h.finished_deadline_exceeded += 1
//       run                         h.expired_run += 1; h.finished_deadline_exceeded += 1;
//                                   run_duration.record(run)
//       idle                        h.expired_idle += 1; h.finished_deadline_exceeded += 1;
//                                   run_duration.record(run)
//       reclaim                     h.expired_reclaim += 1; h.finished_deadline_exceeded += 1
//                                   (fleet mode: it never ran)
//       retry                       h.expired_retry += 1; h.finished_deadline_exceeded += 1;
//                                   run_duration.record(run) (its last attempt)
//       human_wait                  h.expired_human_wait += 1; h.finished_deadline_exceeded += 1;
//                                   run_duration.record(run) (its run before the wait)
//       downstream, none            h.finished_deadline_exceeded += 1; run_duration.record(run)
//                                   (the stage label has queue, run, idle, reclaim, retry and
//                                   human_wait)
//     cancelled                     h.finished_cancelled += 1; run_duration.record(run) only if
//                                   run > 0 (a job cancelled while queued passes zero)
//     invalid                       h.rejected_invalid_timeout += 1; no finished count
//     rejected, reason
//       circuit_open                h.finished_rejected += 1; run_duration.record(run): the job
//                                   ran and a call it made was refused by an open breaker.
//       any other                   as on_rejected(h, st.reason); no finished count
//                                   (a rejected job was never admitted).
//   on_recorded(h, st)              the counters of on_finished(h, st, 0, false), no histogram:
//                                   an outcome recorded for a job that ran elsewhere or whose
//                                   run the executor timed already (fleet mode).
//     and, whatever the code, if late: h.completed_late += 1; h.completed_late_ns += run.
//   on_first_output(t)              time_to_first_output.record(t): a streamed response's
//                                   first bytes went out `t` after its request began.
//   on_job_retry(h, verdict)        h.job_retries_<verdict> += 1 (not for not_retryable)
//   on_retry_attempt()              retries.attempts += 1
//   on_retry_denied_deadline()      retries.denied_deadline += 1
//   on_retry_denied_budget()        retries.denied_retry_budget += 1
//   (retry_call(..., &m.retries) updates the same three counters itself.)
// Shards: on_dispatch and on_finished take an optional metrics_shard, whose
// histograms stand in for queue_delay, remaining_budget_at_dispatch and
// run_duration. A shard has one writer at a time (an executor's worker), so
// it records without locked instructions and its lines stay in that writer's
// cache; snapshot() adds every shard into those families. A shard is never
// freed before the registry: release_shard() keeps its values counted and
// hands it to the next acquire_shard().
// Gauges (queue_depth, workers_busy) are maintained by their owners directly,
// or, for an owner that knows them better than a per-job set() would (the
// executor), read from it at snapshot time: attach_gauges(). While attached,
// snapshot() reports the owner's values and the gauge objects are not updated.
// Negative durations are recorded as zero.
//
// Handlers: handler(name) creates a block on first use and returns a reference
// that stays valid for the registry's lifetime. At most
// metrics_options::max_handlers distinct names get their own block; beyond
// that, and for names that are not valid UTF-8 (Prometheus label values must
// be), the block of handler "other" is returned. A handler literally named
// "other" shares that block. Label values are escaped when rendered.
//
// Rendering: render_prometheus writes text exposition format 0.0.4
// (Content-Type "text/plain; version=0.0.4"): per family one "# HELP" then one
// "# TYPE" line before its samples, a family's samples contiguous, handlers in
// name order, every known label value of an existing handler emitted (zeros
// included). Histograms use the fixed bounds prometheus_bucket_bounds_ns
// (cumulative, then le="+Inf" == _count, then _sum in seconds and _count). A
// log bucket counts toward le only if its largest value is <= le, so a bucket
// count may miss values in (le * (1 - 2^-P), le] (P = histogram precision,
// 1.6 % of le at the default P = 6); those count toward the next bound. The
// count never includes a value above le. Note that this usually includes a
// value exactly equal to le: a budget of exactly 1 s counts toward le="2.5",
// not le="1" (_sum and _count stay exact).
//
// Thread safety: every recorder, counter, gauge and histogram operation is
// lock-free and may run on any thread. handler() takes a shared lock for an
// existing name and an exclusive one to create: cache the reference on hot
// paths. snapshot() may run concurrently with recorders; it reads each value
// separately (relaxed), so it is not an instant across values.
//
// Memory ordering: relaxed throughout. Metrics publish nothing.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/exposition.hpp"
#include "hourglass/histogram.hpp"
#include "hourglass/job_retry.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/retry.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// A monotonically increasing count.
class counter {
 public:
  void add(std::uint64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A value that goes up and down.
class gauge {
 public:
  void add(std::int64_t n = 1) noexcept { value_.fetch_add(n, std::memory_order_relaxed); }
  void sub(std::int64_t n = 1) noexcept { value_.fetch_sub(n, std::memory_order_relaxed); }
  void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// One handler's counters, on cache lines of their own, grouped by who writes
// them: the submitting thread counts admissions and refusals, workers count
// outcomes. Sharing one line made every submit and every finish miss on it.
struct alignas(64) handler_metrics {
  explicit handler_metrics(std::string handler_name) : name(std::move(handler_name)) {}
  handler_metrics(const handler_metrics&) = delete;
  handler_metrics& operator=(const handler_metrics&) = delete;

  // written at submit
  counter admitted;
  counter rejected_queue_full;
  counter rejected_insufficient_budget;
  counter rejected_invalid_timeout;
  counter rejected_shutting_down;
  counter rejected_broker_unavailable;
  counter rejected_queue_paused;
  counter rejected_cancelled;
  // Of the admitted: attempts a caller is answered for, those not submitted
  // with job_options::admitted_later (the daemon's async store: a retry, a
  // delayed start, a run resumed after a wait, a child job). Not rendered:
  // what lets a test match admissions to answered requests exactly. One
  // counter, not admitted less a count of the later ones: a reader of two
  // could see half of an admission under way (the fuzzer found it).
  counter admitted_answered;
  // written when a job ends (workers; cancel() for a job cancelled while queued)
  alignas(64) counter expired_queue;
  counter expired_run;
  counter expired_reclaim;
  counter expired_idle;
  counter expired_retry;
  counter expired_human_wait;
  counter finished_ok;
  counter finished_error;
  counter finished_rejected;  // ran, and ended rejected/circuit_open
  counter finished_deadline_exceeded;
  counter finished_cancelled;
  counter completed_late;
  counter completed_late_ns;  // rendered in seconds
  counter job_retries_scheduled;
  counter job_retries_exhausted;
  counter job_retries_no_budget;
  alignas(64) const std::string name;  // unescaped label value (read-only: a line of its own)
};

struct handler_snapshot {
  std::string name;
  std::uint64_t admitted = 0;
  std::uint64_t rejected_queue_full = 0;
  std::uint64_t rejected_insufficient_budget = 0;
  std::uint64_t rejected_invalid_timeout = 0;
  std::uint64_t rejected_shutting_down = 0;
  std::uint64_t rejected_broker_unavailable = 0;
  std::uint64_t rejected_queue_paused = 0;
  std::uint64_t rejected_cancelled = 0;
  std::uint64_t expired_queue = 0;
  std::uint64_t expired_run = 0;
  std::uint64_t expired_reclaim = 0;
  std::uint64_t expired_idle = 0;
  std::uint64_t expired_retry = 0;
  std::uint64_t expired_human_wait = 0;
  std::uint64_t finished_ok = 0;
  std::uint64_t finished_error = 0;
  std::uint64_t finished_rejected = 0;
  std::uint64_t finished_deadline_exceeded = 0;
  std::uint64_t finished_cancelled = 0;
  std::uint64_t completed_late = 0;
  std::uint64_t completed_late_ns = 0;
  std::uint64_t job_retries_scheduled = 0;
  std::uint64_t job_retries_exhausted = 0;
  std::uint64_t job_retries_no_budget = 0;

  friend bool operator==(const handler_snapshot&, const handler_snapshot&) = default;
};

struct metrics_snapshot {
  std::vector<handler_snapshot> handlers;  // sorted by name
  std::uint64_t retry_attempts = 0;
  std::uint64_t retries_denied_deadline = 0;
  std::uint64_t retries_denied_retry_budget = 0;
  histogram_snapshot request_budget;
  histogram_snapshot queue_delay;
  histogram_snapshot remaining_budget_at_dispatch;
  histogram_snapshot run_duration;
  histogram_snapshot time_to_first_output;
  std::int64_t queue_depth = 0;
  std::int64_t workers_busy = 0;

  // nullptr when no handler has that name.
  const handler_snapshot* find(std::string_view handler_name) const noexcept;
};

// Upper bounds (le) of the rendered histogram buckets, in nanoseconds:
// 0.0001 0.00025 0.0005 0.001 0.0025 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 s,
// then +Inf.
inline constexpr std::array<std::uint64_t, 18> prometheus_bucket_bounds_ns = {
    100'000,       250'000,       500'000,       1'000'000,      2'500'000,      5'000'000,
    10'000'000,    25'000'000,    50'000'000,    100'000'000,    250'000'000,    500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000, 30'000'000'000, 60'000'000'000};

// The per-job histograms of one writer at a time (see "Shards" above).
class alignas(64) metrics_shard {
 public:
  explicit metrics_shard(unsigned precision)
      : queue_delay(precision), remaining_budget_at_dispatch(precision), run_duration(precision) {}

 private:
  friend class metrics;
  log_histogram queue_delay;
  log_histogram remaining_budget_at_dispatch;
  log_histogram run_duration;
};

struct metrics_options {
  std::size_t max_handlers = 256;  // distinct handler blocks, "other" not included
  unsigned histogram_precision = log_histogram::default_precision;
};

class metrics {
 public:
  static constexpr std::string_view overflow_handler = "other";

  metrics();
  explicit metrics(metrics_options options);
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;
  ~metrics();

  // Stable for the registry's lifetime. See "Handlers" above.
  handler_metrics& handler(std::string_view name);
  // Distinct blocks, "other" included once it exists.
  std::size_t handler_count() const;

  void on_admitted(handler_metrics& h, duration budget) noexcept;
  void on_rejected(handler_metrics& h, reject_reason reason) noexcept;
  void on_insufficient_budget(handler_metrics& h) noexcept;
  void on_invalid_timeout(handler_metrics& h) noexcept;
  void on_refused(handler_metrics& h, const status& st) noexcept;
  // With a shard (from acquire_shard, held by the calling thread alone), its
  // histograms record instead of the registry's own: no locked instruction.
  void on_dispatch(duration queue_delay, duration remaining_at_dispatch, metrics_shard* shard = nullptr) noexcept;
  void on_finished(handler_metrics& h, const status& st, duration run_time, bool completed_late,
                   metrics_shard* shard = nullptr) noexcept;
  void on_recorded(handler_metrics& h, const status& st) noexcept;
  void on_first_output(duration since_start) noexcept;
  void on_job_retry(handler_metrics& h, job_retry_verdict verdict) noexcept;
  void on_retry_attempt() noexcept;
  void on_retry_denied_deadline() noexcept;
  void on_retry_denied_budget() noexcept;

  metrics_snapshot snapshot() const;

  // A shard for one writer at a time, valid for the registry's lifetime. The
  // mutex here and in release_shard orders one writer's records before the next's.
  metrics_shard* acquire_shard();
  // Its values stay in the totals; the next acquire_shard() may hand it out again.
  void release_shard(metrics_shard* shard);

  // Gauges read at snapshot time from `owner` (see "Gauges" above). One owner
  // at a time; detach_gauges(owner) stores the owner's last values into the
  // gauges and must be called before the owner goes away.
  using gauge_reader = std::int64_t (*)(const void* owner) noexcept;
  void attach_gauges(const void* owner, gauge_reader queue_depth_of, gauge_reader workers_busy_of);
  void detach_gauges(const void* owner);

  // Global series, public for direct use (gauges in particular).
  // Pass &retries to retry_call so its attempts and denials are exported here.
  alignas(64) retry_counters retries;
  alignas(64) gauge queue_depth;
  alignas(64) gauge workers_busy;
  log_histogram request_budget;
  log_histogram queue_delay;
  log_histogram remaining_budget_at_dispatch;
  log_histogram run_duration;
  log_histogram time_to_first_output;

 private:
  handler_metrics& create_locked(std::string_view name);
  handler_metrics& overflow_locked();
  // The counters of a finish; true when it ran (its run time belongs in run_duration).
  bool count_finish(handler_metrics& h, const status& st, duration run_time) noexcept;

  metrics_options options_;
  mutable std::shared_mutex mutex_;
  std::vector<std::unique_ptr<handler_metrics>> owned_;
  // Keys view the owned blocks' names; "other" is in here once it exists.
  std::map<std::string_view, handler_metrics*, std::less<>> by_name_;
  std::size_t named_ = 0;  // blocks counted against max_handlers
  handler_metrics* other_ = nullptr;
  std::vector<std::unique_ptr<metrics_shard>> shards_;  // every shard ever made
  std::vector<metrics_shard*> free_shards_;             // released, for the next acquire
  // attach_gauges(), guarded by mutex_
  const void* gauge_owner_ = nullptr;
  gauge_reader queue_depth_of_ = nullptr;
  gauge_reader workers_busy_of_ = nullptr;
};

// Text exposition format 0.0.4, written with exposition.hpp's writer. Ends
// with a newline. (escape_label_value, which escapes a label value, is there
// too; including this header includes it.)
std::string render_prometheus(const metrics_snapshot& snapshot);
// The same text, written after what `w` holds (a page of more families).
void render_prometheus(const metrics_snapshot& snapshot, exposition_writer& w);

}  // namespace hourglass
