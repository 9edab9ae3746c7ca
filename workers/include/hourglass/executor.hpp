// The embedded executor: a bounded admission queue in front of N workers that
// run each job in a cancellable context inheriting the caller's deadline.
//
//   hourglass::executor ex({.workers = 4, .queue_capacity = 1000});
//   auto job = ex.submit(hourglass::job_options::within(ex.get_clock(), 200ms),
//                        [](const hourglass::context& ctx) { return work(ctx); });
//   hourglass::job_result<int> r = job.get();   // r.st says ok / error / rejected / ...
//
// A job's life:
//   submit ─ admission: queue_full | shutting_down | deadline_exceeded/admission
//     └ queued ─ dequeue: deadline_exceeded/queue (never run) | cancelled (never run)
//         └ running in a context with deadline min(deadline, start + run_limit) - reserve
//             ─ ok | error | deadline_exceeded/run | cancelled/<cause>
// Every job offered gets exactly one outcome, delivered exactly once (to the
// callback or the handle's future), including jobs refused at submit and jobs
// still queued at shutdown.
//
// Deadline and cancellation: the job's context fires by itself at the
// deadline (a timer on the executor's clock). A job that returns normally
// after its deadline has its result discarded: deadline_exceeded/run and
// `completed_late` (wasted work). A job that stops because its context
// stopped should throw (context::check()) so it is not counted late.
//
// policy `fifo` (deadline_checks = false) turns every deadline check off: no
// admission by budget, no expiry at dequeue, no cancellation at the deadline.
// Outcomes are still classified honestly (late results are deadline_exceeded).
//
// Thread safety: submit, cancel, stats and shutdown may be called from any
// thread, including from inside jobs (but not shutdown from inside a job).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "hourglass/admission_queue.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/detail/job_record.hpp"
#include "hourglass/fast_now.hpp"
#include "hourglass/job.hpp"
#include "hourglass/metrics.hpp"

namespace hourglass {

struct job_options {
  std::string_view handler = "default";  // metrics label; resolved once per submit
  handler_metrics* metrics = nullptr;    // pre-resolved label (hot paths): wins over `handler`
  // A caller waits until `deadline`. An async job leaves it `never` and sets
  // `start_by` (its freshness bound) and `run_limit` (its own run bound).
  time_point deadline = never;
  time_point start_by = never;
  duration run_limit = duration::max();
  duration min_budget = duration::zero();  // less than this left: not worth starting
  duration reserve = duration::zero();     // kept back from the job's context for the caller
  // Stops the running job (deadline_exceeded, stage idle) when it reports no
  // ctx.progress() for this long, however far its deadline is.
  duration idle_limit = duration::max();
  const context* parent = nullptr;  // the submitter's context: its deadline and cancellation flow in
  // For short jobs that never block: when nothing is queued and a worker
  // idles, the submitting thread runs the job itself in that worker's place
  // (admitted, timed, watched and counted as a worker's job would be), which
  // saves the two thread hand-offs. The outcome then arrives before submit
  // returns. Otherwise the job is queued as usual.
  bool run_here_when_idle = false;
  // An attempt no caller is answered for now (a retry, a delayed start, a
  // run resumed after a wait, a child job): admitted, it is counted in
  // handler_metrics::admitted but not in admitted_answered.
  bool admitted_later = false;
  // A run resumed after its wait (children, a wake time, a signal): admitted
  // work continuing, judged by its bounds alone, never by the predicted wait
  // (queued_job::continuing).
  bool resumed = false;

  // A job for a caller who waits `budget` from now.
  static job_options within(clock& clk, duration budget) {
    job_options o;
    o.deadline = saturating_add(clk.now(), budget);
    return o;
  }
  // An async job: worth starting until now + freshness, then runs at most run_limit.
  static job_options async(clock& clk, duration freshness, duration limit) {
    job_options o;
    o.start_by = saturating_add(clk.now(), freshness);
    o.run_limit = limit;
    return o;
  }
};

struct executor_options {
  std::size_t workers = 0;   // 0: hardware threads; see manual_mode
  bool manual_mode = false;  // no threads: the owner calls run_pending() ("turn the crank")
  std::size_t queue_capacity = 1024;
  hourglass::clock* clock = nullptr;      // nullptr: real_clock()
  hourglass::metrics* metrics = nullptr;  // nullptr: the executor owns one
  bool deadline_checks = true;            // false: policy fifo
  bool predicted_wait_admission = true;
  bool start_paused = false;
};

class executor;

// Refers to a submitted job: cancel it, or (job_handle) wait for its outcome.
// A job_ref keeps the job's record (and so its function and completion
// callback) alive. Do not store a job's own job_ref inside state that the
// job's function or callback owns: that is a reference cycle and the record
// is never freed. Drop the job_ref once the outcome has arrived, or keep it
// where the job cannot reach it.
class job_ref {
 public:
  job_ref() = default;
  // Cancels the job. Returns true when the job's function will never run
  // (it was still queued, or it was refused or dropped before running);
  // false when it is running or has run: a running job's context is then
  // cancelled and the job stops cooperatively.
  bool cancel(cancel_cause cause = cancel_cause::requested) noexcept;

 protected:
  explicit job_ref(detail::job_record* r) : rec_(r) {}
  job_ref(detail::job_record* r, detail::adopt_ref_t) : rec_(r, detail::adopt_ref) {}
  friend class executor;
  detail::record_ref rec_;
};

template <class T>
class job_handle : public job_ref {
 public:
  job_handle() = default;
  job_result<T> get() { return future_.get(); }
  void wait() const { future_.wait(); }
  bool ready() const { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }

 private:
  friend class executor;
  job_handle(detail::job_record* r, std::future<job_result<T>> f) : job_ref(r), future_(std::move(f)) {}
  std::future<job_result<T>> future_;
};

class executor {
 public:
  explicit executor(executor_options options = {});
  // Drains with no grace: queued jobs are cancelled (cause shutdown), running
  // jobs are cancelled and waited for. Every job still gets its outcome.
  ~executor();
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;

  // Submits `fn` (callable as fn(const context&) or fn()); `on_done(job_result<T>&&)`
  // receives the outcome exactly once: on this thread if refused at admission,
  // otherwise on a worker (or on the thread that cancels a queued job).
  // `on_done` must not throw. Refusal allocates nothing.
  template <class F, class Done>
  job_ref submit(const job_options& opts, F&& fn, Done&& on_done);

  // As above, with the outcome delivered to the returned handle's future.
  template <class F>
  auto submit(const job_options& opts, F&& fn);

  // Stop admitting (shutting_down), let queued and running jobs finish until
  // `drain_deadline`, then cancel the rest (cause shutdown) and wait for them.
  // Returns when every admitted job has its outcome and the workers stopped.
  void shutdown(time_point drain_deadline);
  void shutdown() { shutdown(get_clock().now()); }
  bool accepting() const noexcept { return !queue_.closed(); }

  // Test and operations helpers.
  void pause();  // returns once every worker is parked; queued jobs wait
  void resume();
  std::size_t run_pending();  // manual_mode: runs queued jobs on this thread

  hourglass::clock& get_clock() const noexcept { return *clock_; }
  hourglass::metrics& stats() noexcept { return *metrics_; }
  handler_metrics& handler(std::string_view name) { return metrics_->handler(name); }
  const admission_queue& queue() const noexcept { return queue_; }
  std::size_t workers() const noexcept { return worker_count_; }
  std::size_t busy() const noexcept;
  // Workers waiting for a job (or about to), less those a submitter stands in for (run_here).
  std::size_t idle() const noexcept {
    const std::size_t waiting = idle_.load(std::memory_order_seq_cst), lent = lent_.load(std::memory_order_seq_cst);
    return waiting > lent ? waiting - lent : 0;
  }

 private:
  // One per worker (defined in executor.cpp): its busy flag, the job it
  // runs, and the batch of jobs it took from the queue and has not started.
  struct worker_slot;

  // Admission stamps and the workers' start and end readings come from
  // fast_now: on the real clock, a thread's last reading plus the CPU
  // counter's ticks since, read afresh once it is this old (a few ns off
  // the clock at most).
  static constexpr duration fast_clock_span = std::chrono::microseconds(100);
  // A job's effective bounds: its own deadline and its parent's, whichever is first.
  // Inline and computed once per submit: returned through memory from an
  // out-of-line call, it was read back with one wide load that store
  // forwarding could not serve, which waited for every store before it,
  // the new record's included: a stall on every submit.
  static job_bounds bounds_of(const job_options& o) noexcept {
    const time_point deadline = o.parent != nullptr ? earliest(o.deadline, o.parent->deadline()) : o.deadline;
    return job_bounds{deadline, earliest(o.start_by, deadline), o.min_budget};
  }
  status precheck(const job_options& o, const job_bounds& b, time_point now) const noexcept;
  void prepare(detail::job_record& rec, const job_options& o, const job_bounds& b, handler_metrics& h);
  status admit(detail::job_record* rec, time_point now);
  // A counted push that failed: the record's queue reference dropped, its outcome delivered.
  void refuse_pushed(detail::job_record* rec, status st);
  // A worker's last clock reading, reused as the start of a job it pops
  // without blocking right after another ended, and as the start of the
  // next job's cost to the worker (see run_one). `valid` must be cleared
  // before every wait, or an idle gap would count as a job's cost.
  struct worker_clock {
    time_point last{};
    bool valid = false;
    service_time_estimator::worker_mean cost;  // this worker's mean cost per job
  };
  // Jobs a worker takes from the queue at once (see batch_limit()).
  static constexpr std::size_t max_batch = 16;
  std::size_t batch_limit() const noexcept;
  void worker_loop(std::size_t index);
  // Takes the job to its one outcome. The caller then settles it (settle):
  // a batch settles all its jobs at once.
  void run_one(detail::job_record* rec, worker_slot* slot, worker_clock* wc = nullptr);
  // Runs the jobs of `slot`'s batch until it is empty (other workers may take some).
  void run_batch(worker_slot* slot, worker_clock* wc);
  // A job from another worker's batch, for a worker about to block; nullptr if none.
  detail::job_record* steal(const worker_slot* thief) noexcept;
  // run_here_when_idle: a guest slot when nothing is queued and a worker
  // idles that no other guest stands in for; nullptr otherwise.
  worker_slot* borrow_idle_worker() noexcept;
  // Runs an admitted job on this thread in `guest`, then gives the slot back.
  void run_here(detail::job_record* rec, time_point now, worker_slot* guest);
  // `slot`: whose metrics shard records it (nullptr: the registry's own histograms).
  void finish(detail::job_record* rec, status st, worker_slot* slot);
  // `n` popped records have their outcomes (see all_settled).
  void settle(std::size_t n) noexcept;
  handler_metrics& resolve(const job_options& o) {
    return o.metrics ? *o.metrics : (o.handler == "default" ? *default_handler_ : metrics_->handler(o.handler));
  }
  static job_timings rejected_timings(const job_options& o, time_point now) noexcept {
    job_timings t;
    t.budget = remaining(bounds_of(o).deadline, now);
    return t;
  }
  void note_rejected(handler_metrics& h, status st) noexcept;
  void update_control_locked() noexcept { control_.store(paused_ || stopping_, std::memory_order_release); }
  // Every admitted job has its outcome settled by a worker (or run_pending).
  // Read in this order: a settlement counted was of an attempt counted, and
  // an attempt made after the queue closed (so after this read, in shutdown)
  // fails its push.
  bool all_settled() const noexcept {
    const std::size_t done = settled_.load(std::memory_order_seq_cst) + failed_pushes_.load(std::memory_order_seq_cst);
    return done >= push_attempts_.load(std::memory_order_seq_cst);
  }

  executor_options options_;
  hourglass::clock* clock_;
  std::unique_ptr<hourglass::metrics> owned_metrics_;
  hourglass::metrics* metrics_;
  handler_metrics* default_handler_;
  std::size_t worker_count_;
  admission_queue queue_;
  detail::record_slab::carver carver_;
  // Counters grouped by writer, a line per group: submitters write
  // push_attempts_ (one locked instruction per submit) and failed_pushes_,
  // workers write settled_ (and their slot's busy count); a line written by
  // both sides misses on every job. Every attempt ends as a failed push or,
  // once popped, a settlement: attempts == failed + settled means nothing is
  // queued, in a worker's hands or still being pushed (all_settled). The
  // queue-depth and workers-busy gauges are read from here at snapshot time
  // (metrics::attach_gauges) rather than written per job.
  alignas(64) std::atomic<std::size_t> push_attempts_{0};  // records offered to the queue, ever
  std::atomic<std::size_t> failed_pushes_{0};              // of which refused by the queue
  alignas(64) std::atomic<std::size_t> settled_{0};        // popped records whose outcome is settled
  alignas(64) std::atomic<std::size_t> busy_{0};           // jobs running outside a worker (run_pending)
  alignas(64) std::atomic<bool> stopping_now_{false};      // drain deadline passed: cancel, don't start
  // Workers about to block or blocked on an empty queue. A worker that holds
  // a batch reads it before starting each job and wakes one of them, so no
  // job waits in a batch while a worker idles (see run_batch and steal).
  alignas(64) std::atomic<std::size_t> idle_{0};
  // Guest slots in use by submitters running a job themselves (run_here):
  // one at most per worker idle when it was borrowed. An idle worker still
  // takes a job queued meanwhile, so for the length of a short guest job up
  // to twice --workers jobs may run.
  std::atomic<std::size_t> lent_{0};
  // paused_ || stopping_, readable without mu_: workers take the mutex
  // between jobs only when there is something to look at.
  std::atomic<bool> control_{false};

  std::mutex mu_;  // guards the fields below
  std::condition_variable changed_;
  bool paused_ = false;
  bool stopping_ = false;
  std::size_t parked_ = 0;
  bool shut_down_ = false;
  std::vector<std::unique_ptr<worker_slot>> slots_;
  std::vector<std::unique_ptr<worker_slot>> guests_;  // one per worker, for run_here
  std::vector<std::thread> threads_;
};

}  // namespace hourglass

#include "hourglass/impl/executor.hpp"
