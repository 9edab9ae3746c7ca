// The bounded admission queue: a lock-free MPMC inbox with a hard capacity.
//
// Items are pointers to `queued_job` records owned by the caller (the
// executor). The queue stamps each admitted job with its admission time and
// bounds, and hands them out again; it never runs, frees or completes them.
//
// Guarantees:
//  - Capacity is a hard bound on jobs admitted and not yet popped: try_push
//    reserves a slot with one atomic increment before touching the queue, so no
//    load makes the count exceed it. Memory: the underlying moodycamel queue
//    pre-allocates blocks for `capacity` items and recycles them; it may hold
//    up to one partially used block (32 slots) per producing thread on top,
//    and never grows past that.
//  - Rejection (queue_full, shutting_down, insufficient budget) allocates
//    nothing and makes no system call.
//  - Ordering: FIFO per producing thread only. Across producers the order is
//    unspecified (moodycamel is not linearizable); hourglass promises no more.
//  - pop_wait blocks idle consumers on a semaphore (no spinning when there is
//    no work) and returns nullptr when woken by wake().
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>

#include "hourglass/admission_policy.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// The part of a job the queue reads and stamps. The executor derives from it.
struct queued_job {
  job_bounds bounds;
  time_point admitted_at{};
  // Admitted work continuing (a run resumed after its wait): judged by its
  // bounds alone, not by the predicted wait, as a fleet puts it straight
  // back on its stream. Refusing it on a guess would lose work admitted
  // already, which the dequeue check still drops if it can no longer start.
  bool continuing = false;
};

class admission_queue {
 public:
  struct options {
    std::size_t capacity = 1024;
    std::size_t workers = 1;  // consumers, for the predicted-wait estimate
    admission_options admission;
    // How many times a consumer finding the queue empty looks again before
    // it sleeps: worth it when each consumer has a core of its own (a job
    // pushed meanwhile is taken without a wake-up), wasted when they share
    // cores with the producers (every idle spell burns what they need).
    int idle_spins = 10000;
  };

  explicit admission_queue(options opts);
  ~admission_queue();
  admission_queue(const admission_queue&) = delete;
  admission_queue& operator=(const admission_queue&) = delete;

  // Admits or refuses `job` at `now`: ok, rejected/queue_full,
  // rejected/shutting_down or deadline_exceeded/admission. On ok the queue
  // holds the pointer until a pop returns it.
  status try_push(queued_job* job, time_point now) noexcept;

  // Blocks until a job is available; nullptr after a wake().
  queued_job* pop_wait() noexcept;
  // Never blocks; nullptr when empty.
  queued_job* try_pop() noexcept;
  // Bulk forms, for consumers that amortize the queue's and the semaphore's
  // traffic over several jobs: up to `max` items into `out`, in queue order
  // per producer. An item may be nullptr: a wake-up (see wake()), which the
  // caller must act on like pop_wait()'s nullptr. pop_wait_bulk blocks until
  // there is at least one item; try_pop_bulk returns 0 instead of blocking.
  // Jobs taken in bulk still wait (in the caller's hands), so they stay in
  // depth(), and so in capacity and the predicted wait, until the caller
  // reports each one with dequeued() as it starts it or drops it.
  std::size_t pop_wait_bulk(queued_job** out, std::size_t max) noexcept;
  std::size_t try_pop_bulk(queued_job** out, std::size_t max) noexcept;
  // `n` jobs taken by a bulk pop have left the waiting line.
  void dequeued(std::size_t n) noexcept { popped_.fetch_add(n, std::memory_order_acq_rel); }

  // Stop admitting (shutting_down). Jobs already queued can still be popped.
  void close() noexcept;
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  // For store-load handshakes with close() (which is seq_cst).
  bool closed_seq_cst() const noexcept { return closed_.load(std::memory_order_seq_cst); }
  // Wakes `n` blocked consumers with nullptr (used to stop workers).
  void wake(std::size_t n) noexcept;

  // Jobs admitted and not yet popped, as of one instant: pushed_ read while
  // popped_ stood still (two reads at different instants could count a job
  // pushed and popped in between, or miss one). After a few tries under a
  // stream of pops: the count from the last tries, capped at capacity.
  std::size_t depth() const noexcept {
    for (int tries = 0;; ++tries) {
      const std::size_t out = popped_.load(std::memory_order_acquire);
      const std::size_t in = pushed_.load(std::memory_order_acquire);
      if (popped_.load(std::memory_order_acquire) == out || tries == 3) {
        return in > out ? std::min(in - out, opts_.capacity) : 0;
      }
    }
  }
  // depth() >= capacity(), cheap for producers: the consumers' counter is
  // read only when the producers' last look at it says the queue may be
  // full. Never full by mistake (pushed is read before popped, so a pop in
  // between only lowers the count); try_push's reservation is the bound.
  bool full() const noexcept {
    const std::size_t in = pushed_.load(std::memory_order_relaxed);
    if (in - popped_seen_.load(std::memory_order_relaxed) < opts_.capacity) return false;  // wraps: exact look
    const std::size_t out = popped_.load(std::memory_order_acquire);
    return in > out && in - out >= opts_.capacity;
  }
  std::size_t capacity() const noexcept { return opts_.capacity; }
  // admit() against this queue's load at `now`; try_push's own check, for
  // callers that check before building a job. The depth (on the consumers'
  // line, a cross-core miss) is read only for a job that could not wait
  // behind a full queue: the predicted wait grows with the depth and
  // depth() never passes capacity, so the answer is the same, without a
  // cross-core miss per submit for a job that fits anyway.
  status admission(const job_bounds& job, time_point now, bool continuing = false) const noexcept {
    if (job.latest_useful_start() == never) return status::ok();  // no deadline: no load to read
    if (continuing) return admit(job, {}, now, opts_.admission);  // an empty queue: no predicted wait
    queue_load worst{opts_.capacity, opts_.workers, service_.mean()};
    if (admit(job, worst, now, opts_.admission).is_ok()) return status::ok();
    worst.depth = depth();
    return admit(job, worst, now, opts_.admission);
  }
  queue_load load() const noexcept { return {depth(), opts_.workers, service_.mean()}; }
  // Workers report what each job cost them so admission can predict the wait.
  void observe_service_time(duration cost) noexcept { service_.observe(cost); }
  void observe_service_time(duration cost, service_time_estimator::worker_mean& mine) noexcept {
    service_.observe(cost, mine);
  }
  // The observed mean alone (load() reads the depth as well: the producers' line).
  duration mean_service() const noexcept { return service_.mean(); }
  const options& settings() const noexcept { return opts_; }

 private:
  struct impl;  // moodycamel lives behind this: one adapter, not in our public headers
  options opts_;
  std::unique_ptr<impl> impl_;
  // depth = pushed_ - popped_, each on the line of the side that writes it:
  // one shared counter written by the submitter per push and by a worker per
  // pop missed in both caches on every job, the largest cost of an empty
  // job in profiles of `hourglass-bench throughput`. popped_seen_ is the
  // producers' copy of popped_, never ahead of it, so capacity checked
  // against it is a hard bound still (only ever stricter).
  alignas(64) std::atomic<std::size_t> pushed_{0};  // slots reserved by producers, ever
  std::atomic<std::size_t> popped_seen_{0};         // popped_ as producers last read it
  alignas(64) std::atomic<std::size_t> popped_{0};  // jobs that left the waiting line, ever
  alignas(64) std::atomic<bool> closed_{false};     // read by every submit
  // Written by a worker after every job: on closed_'s line, each write
  // took the line from the submitter reading closed_ and back: a cross-core
  // miss per job.
  alignas(64) service_time_estimator service_;
};

}  // namespace hourglass
