#include "hourglass/admission_queue.hpp"

#include <algorithm>

#include "moodycamel.hpp"

namespace hourglass {

// moodycamel's BlockingConcurrentQueue (its queue and its semaphore, used
// the way it uses them) with the semaphore's spinning chosen at run time:
// its own is a compile-time trait.
struct admission_queue::impl {
  impl(std::size_t capacity, int idle_spins) : q(capacity), sema(0, std::max(idle_spins, 0)) {}

  bool enqueue(queued_job* job) {
    if (!q.enqueue(job)) return false;
    sema.signal();
    return true;
  }
  void wait_dequeue(queued_job*& job) {
    while (!sema.wait()) {
    }
    while (!q.try_dequeue(job)) {
    }
  }
  bool try_dequeue(queued_job*& job) {
    if (!sema.tryWait()) return false;
    while (!q.try_dequeue(job)) {
    }
    return true;
  }
  std::size_t dequeue_bulk(queued_job** out, std::size_t claimed) {
    std::size_t count = 0;
    while (count != claimed) count += q.try_dequeue_bulk(out + count, claimed - count);
    return count;
  }

  moodycamel::ConcurrentQueue<queued_job*> q;
  moodycamel::LightweightSemaphore sema;
};

admission_queue::admission_queue(options opts)
    : opts_(opts), impl_(std::make_unique<impl>(opts.capacity, opts.idle_spins)) {}

admission_queue::~admission_queue() = default;

status admission_queue::try_push(queued_job* job, time_point now) noexcept {
  // seq_cst: pairs with a caller that counts the attempt (seq_cst) before
  // pushing, against a closer that reads that count after close().
  if (closed_seq_cst()) return status::rejected(reject_reason::shutting_down);
  if (const status verdict = admission(job->bounds, now, job->continuing); !verdict.is_ok()) return verdict;
  // Reserve a slot first, by compare-and-swap so the count itself never
  // exceeds capacity (a fetch_add/undo would let depth() overshoot briefly).
  // Checked against the producers' copy of popped_ (never ahead of it, so
  // never too lenient); only when that says full is popped_ itself read.
  std::size_t in = pushed_.load(std::memory_order_relaxed);
  for (;;) {
    if (in - popped_seen_.load(std::memory_order_relaxed) >= opts_.capacity) {  // wraps when stale: look
      const std::size_t out = popped_.load(std::memory_order_acquire);
      popped_seen_.store(out, std::memory_order_relaxed);
      in = pushed_.load(std::memory_order_relaxed);  // read after out: in >= out
      if ((in >= out ? in - out : 0) >= opts_.capacity) return status::rejected(reject_reason::queue_full);
    }
    if (pushed_.compare_exchange_weak(in, in + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) break;
  }
  job->admitted_at = now;
  if (!impl_->enqueue(job)) {  // only on allocation failure
    pushed_.fetch_sub(1, std::memory_order_acq_rel);
    return status::rejected(reject_reason::queue_full);
  }
  return status::ok();
}

queued_job* admission_queue::pop_wait() noexcept {
  queued_job* job = nullptr;
  impl_->wait_dequeue(job);
  if (job != nullptr) popped_.fetch_add(1, std::memory_order_acq_rel);
  return job;
}

queued_job* admission_queue::try_pop() noexcept {
  queued_job* job = nullptr;
  if (!impl_->try_dequeue(job)) return nullptr;
  if (job != nullptr) popped_.fetch_add(1, std::memory_order_acq_rel);
  return job;
}

std::size_t admission_queue::pop_wait_bulk(queued_job** out, std::size_t max) noexcept {
  const auto claimed = static_cast<std::size_t>(
      impl_->sema.waitMany(static_cast<moodycamel::LightweightSemaphore::ssize_t>(max)));
  return impl_->dequeue_bulk(out, claimed);  // depth: see dequeued()
}

std::size_t admission_queue::try_pop_bulk(queued_job** out, std::size_t max) noexcept {
  const auto claimed = static_cast<std::size_t>(
      impl_->sema.tryWaitMany(static_cast<moodycamel::LightweightSemaphore::ssize_t>(max)));
  return impl_->dequeue_bulk(out, claimed);
}

void admission_queue::close() noexcept { closed_.store(true, std::memory_order_seq_cst); }

void admission_queue::wake(std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) impl_->enqueue(nullptr);
}

}  // namespace hourglass
