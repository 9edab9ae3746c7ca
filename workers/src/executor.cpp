#include "hourglass/executor.hpp"

#include <algorithm>

#include "hourglass/run_outcome.hpp"
#include "idle_spins.hpp"
#include "worker_watch.hpp"

namespace hourglass {

namespace {
std::size_t default_workers() { return std::max(1u, std::thread::hardware_concurrency()); }

// The jobs a worker took from the queue in one bulk pop and has not started
// yet. The owner fills it only when it is empty; the owner and idle workers
// take jobs from its front, each take one compare-and-swap on `range_`
// (generation | begin | end), so a thief holding a stale view of an older
// fill can never take a job twice.
class held_batch {
 public:
  static constexpr std::size_t capacity = 16;

  // Owner only, and only when empty. seq_cst: pairs with idle workers that
  // announce themselves (idle_) and then look here (see executor::run_batch).
  void fill(queued_job* const* jobs, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) items_[i].store(jobs[i], std::memory_order_relaxed);
    const std::uint64_t gen = (range_.load(std::memory_order_relaxed) >> 32) + 1;
    range_.store(pack(gen, 0, n), std::memory_order_seq_cst);
  }
  // The front job, or nullptr when empty. Any thread.
  queued_job* take() noexcept {
    std::uint64_t r = range_.load(std::memory_order_seq_cst);
    for (;;) {
      const std::uint64_t begin = (r >> 16) & 0xffff, end = r & 0xffff;
      if (begin >= end) return nullptr;
      queued_job* job = items_[begin].load(std::memory_order_relaxed);
      if (range_.compare_exchange_weak(r, pack(r >> 32, begin + 1, end), std::memory_order_seq_cst)) return job;
    }
  }
  bool empty() const noexcept {
    const std::uint64_t r = range_.load(std::memory_order_seq_cst);
    return ((r >> 16) & 0xffff) >= (r & 0xffff);
  }

 private:
  static constexpr std::uint64_t pack(std::uint64_t gen, std::uint64_t begin, std::uint64_t end) noexcept {
    return (gen << 32) | (begin << 16) | end;
  }
  std::atomic<std::uint64_t> range_{0};
  std::atomic<queued_job*> items_[capacity];
};
}  // namespace

// On lines of its own: only its worker writes `busy` and fills `batch`.
struct alignas(64) executor::worker_slot {
  std::atomic<std::size_t> busy{0};
  bool guest = false;              // a submitter's, for run_here (set at construction)
  std::atomic<bool> taken{false};  // a guest slot held by a submitter
  std::shared_ptr<worker_watch> watch = std::make_shared<worker_watch>();
  // The per-job histograms of whoever runs in this slot (one thread at a
  // time): recorded without locked instructions (metrics.hpp, "Shards").
  metrics_shard* shard = nullptr;
  alignas(64) held_batch batch;
  static_assert(held_batch::capacity >= max_batch, "a bulk pop fits in a batch");
};

bool job_ref::cancel(cancel_cause cause) noexcept {
  detail::job_record* rec = rec_.p;
  if (rec == nullptr) return true;  // refused at admission: never ran
  for (;;) {
    auto s = rec->state.load(std::memory_order_acquire);
    switch (s) {
      case detail::job_state::queued:
        if (rec->state.compare_exchange_weak(s, detail::job_state::cancelled_in_queue, std::memory_order_acq_rel)) {
          // The worker that later pops it only drops its reference. Counted,
          // then delivered, as finish() does: whoever sees the outcome sees it counted.
          if (rec->metrics != nullptr) rec->metrics->finished_cancelled.add();
          rec->deliver(status::cancelled(cause), rec->timings);
          return true;
        }
        break;
      case detail::job_state::starting:
        std::this_thread::yield();  // the context is being made; a few instructions away
        break;
      case detail::job_state::running: rec->ctx->cancel(cause); return false;
      case detail::job_state::done: return !rec->timings.ran;
      case detail::job_state::cancelled_in_queue: return true;
    }
  }
}

executor::executor(executor_options options)
    : options_(options),
      clock_(options.clock ? options.clock : &real_clock()),
      owned_metrics_(options.metrics ? nullptr : std::make_unique<hourglass::metrics>()),
      metrics_(options.metrics ? options.metrics : owned_metrics_.get()),
      default_handler_(&metrics_->handler("default")),
      worker_count_(options.manual_mode ? 0 : (options.workers ? options.workers : default_workers())),
      queue_(admission_queue::options{
          options.queue_capacity, std::max<std::size_t>(1, worker_count_),
          admission_options{options.deadline_checks, options.deadline_checks && options.predicted_wait_admission},
          detail::idle_spins_for(worker_count_)}) {
  paused_ = options.start_paused;
  update_control_locked();  // no worker runs yet
  for (std::size_t i = 0; i < worker_count_; ++i) {
    slots_.push_back(std::make_unique<worker_slot>());
    slots_.back()->shard = metrics_->acquire_shard();
  }
  for (std::size_t i = 0; i < worker_count_; ++i) {
    guests_.push_back(std::make_unique<worker_slot>());
    guests_.back()->guest = true;
    guests_.back()->shard = metrics_->acquire_shard();
  }
  threads_.reserve(worker_count_);
  metrics_->attach_gauges(
      this,
      [](const void* self) noexcept {
        return static_cast<std::int64_t>(static_cast<const executor*>(self)->queue_.depth());
      },
      [](const void* self) noexcept { return static_cast<std::int64_t>(static_cast<const executor*>(self)->busy()); });
  for (std::size_t i = 0; i < worker_count_; ++i) threads_.emplace_back([this, i] { worker_loop(i); });
}

executor::~executor() {
  bool done;
  {
    std::lock_guard lock(mu_);
    done = shut_down_;
  }
  if (!done) shutdown(time_point::min());
  metrics_->detach_gauges(this);
  // Every worker has left and every guest slot is back (shutdown waits for both).
  for (auto* slots : {&slots_, &guests_}) {
    for (auto& slot : *slots) metrics_->release_shard(slot->shard);
  }
}

std::size_t executor::busy() const noexcept {
  std::size_t n = busy_.load(std::memory_order_relaxed);
  for (const auto& slot : slots_) n += slot->busy.load(std::memory_order_relaxed);
  for (const auto& guest : guests_) n += guest->busy.load(std::memory_order_relaxed);
  return n;
}

status executor::precheck(const job_options& o, const job_bounds& b, time_point now) const noexcept {
  if (queue_.closed()) return status::rejected(reject_reason::shutting_down);
  if (const status s = queue_.admission(b, now, o.resumed); !s.is_ok()) return s;
  if (queue_.full()) return status::rejected(reject_reason::queue_full);
  if (o.parent != nullptr && o.parent->done()) {
    const status ps = o.parent->stop_status();
    return ps.code == outcome::deadline_exceeded ? status::expired(expiry_stage::admission) : ps;
  }
  return status::ok();
}

void executor::note_rejected(handler_metrics& h, status st) noexcept { metrics_->on_refused(h, st); }

void executor::prepare(detail::job_record& rec, const job_options& o, const job_bounds& b, handler_metrics& h) {
  rec.bounds = b;
  rec.metrics = &h;
  rec.run_limit = o.run_limit;
  rec.reserve = o.reserve;
  rec.idle_limit = o.idle_limit;
  rec.admitted_later = o.admitted_later;
  rec.continuing = o.resumed;
  if (o.parent != nullptr) rec.parent.emplace(*o.parent);
}

status executor::admit(detail::job_record* rec, time_point now) {
  // Everything the worker may read is written before the push publishes the job.
  const duration budget = remaining(rec->bounds.deadline, now);
  rec->timings.budget = budget;
  handler_metrics& h = *rec->metrics;
  // Counted before the push, so shutdown knows a push may still be under way.
  push_attempts_.fetch_add(1, std::memory_order_seq_cst);
  status st = queue_.try_push(rec, now);
  if (!st.is_ok()) {
    refuse_pushed(rec, st);
    return st;
  }
  if (!rec->admitted_later) h.admitted_answered.add();
  metrics_->on_admitted(h, budget);
  return st;
}

void executor::refuse_pushed(detail::job_record* rec, status st) {
  failed_pushes_.fetch_add(1, std::memory_order_seq_cst);
  if (queue_.closed_seq_cst() && all_settled()) {  // shutdown may be waiting for this push
    std::lock_guard lock(mu_);
    changed_.notify_all();
  }
  rec->release();  // the queue's reference
  rec->state.store(detail::job_state::done, std::memory_order_release);
  note_rejected(*rec->metrics, st);
  rec->deliver(st, rec->timings);
}

executor::worker_slot* executor::borrow_idle_worker() noexcept {
  // Paused or stopping: jobs wait in the queue. Something queued: it goes first.
  if (control_.load(std::memory_order_acquire) || queue_.depth() != 0) return nullptr;
  std::size_t lent = lent_.load(std::memory_order_relaxed);
  do {
    if (lent >= idle_.load(std::memory_order_seq_cst)) return nullptr;
  } while (!lent_.compare_exchange_weak(lent, lent + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
  for (auto& guest : guests_) {
    bool free = false;
    if (guest->taken.compare_exchange_strong(free, true, std::memory_order_acquire)) return guest.get();
  }
  lent_.fetch_sub(1, std::memory_order_release);  // more guests than workers in use: cannot happen
  return nullptr;
}

void executor::run_here(detail::job_record* rec, time_point now, worker_slot* guest) {
  // The slot and the loan go back last of all: shutdown waits for lent_ == 0
  // before it lets the executor go.
  struct give_back {
    executor& ex;
    worker_slot* guest;
    ~give_back() {
      guest->taken.store(false, std::memory_order_release);
      ex.lent_.fetch_sub(1, std::memory_order_seq_cst);
    }
  } returned{*this, guest};
  const duration budget = remaining(rec->bounds.deadline, now);
  rec->timings.budget = budget;
  rec->admitted_at = now;
  // Counted and then checked against close, as a push is (see admit and
  // try_push): either shutdown waits for this job or we see the queue closed.
  push_attempts_.fetch_add(1, std::memory_order_seq_cst);
  if (queue_.closed_seq_cst()) return refuse_pushed(rec, status::rejected(reject_reason::shutting_down));
  if (!rec->admitted_later) rec->metrics->admitted_answered.add();
  metrics_->on_admitted(*rec->metrics, budget);
  run_one(rec, guest);
  settle(1);
}

// How many jobs a worker takes from the queue at once. A job taken is no
// longer in the queue's depth, cannot be taken by an idle worker, and waits
// for the jobs before it in the batch: so batches are only for short jobs,
// sized so that the last job of a batch waits at most ~20 us more than it
// would have (mean service time from the admission estimator; unknown: 1).
std::size_t executor::batch_limit() const noexcept {
  constexpr auto extra_wait = std::chrono::microseconds(20);
  const auto mean = queue_.mean_service();
  if (mean <= duration::zero() || mean * 2 > extra_wait) return 1;
  return std::min<std::size_t>(max_batch, static_cast<std::size_t>(extra_wait / mean));
}

void executor::worker_loop(std::size_t index) {
  request_precise_timed_waits();  // a job's ctx.sleep_for wakes at its deadline, not 50 us after
  worker_slot* slot = slots_[index].get();
  queued_job* batch[max_batch];
  worker_clock wc;
  for (;;) {
    // control_ is set before the wake-up that makes a blocked worker look
    // again (pause, shutdown), so a worker never misses it. A worker only
    // looks between batches: the jobs of a batch are all run (or, once the
    // drain deadline passed, cancelled by run_one) before it parks or leaves.
    if (control_.load(std::memory_order_acquire)) {
      wc.valid = false;
      std::unique_lock lock(mu_);
      if (paused_ && !stopping_) {
        ++parked_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return !paused_ || stopping_; });
        --parked_;
      }
      if (stopping_ && queue_.depth() == 0) {
        // shutdown() pushed one wake-up per worker, but a worker that found
        // jobs still queued keeps popping and may take another worker's
        // wake-up with them; that worker would then block for ever. Each
        // worker that leaves passes one wake-up on, so none is left blocked.
        lock.unlock();
        queue_.wake(1);
        return;
      }
    }
    const std::size_t limit = batch_limit();
    std::size_t n = queue_.try_pop_bulk(batch, limit);
    if (n == 0) {
      // About to block: first help a worker whose batch holds jobs it has
      // not started. Announced before looking (see run_batch).
      idle_.fetch_add(1, std::memory_order_seq_cst);
      if (detail::job_record* job = steal(slot)) {
        idle_.fetch_sub(1, std::memory_order_relaxed);
        queue_.dequeued(1);
        run_one(job, slot, &wc);
        settle(1);
        continue;
      }
      wc.valid = false;  // we are about to wait: the last reading goes stale
      n = queue_.pop_wait_bulk(batch, limit);
      idle_.fetch_sub(1, std::memory_order_relaxed);
    }
    std::size_t wakeups = 0, jobs = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (batch[i] == nullptr) {
        ++wakeups;  // look at the flags again (after this batch)
      } else {
        batch[jobs++] = batch[i];
      }
    }
    if (jobs == 1) {
      queue_.dequeued(1);
      run_one(static_cast<detail::job_record*>(batch[0]), slot, &wc);
      settle(1);
    } else if (jobs > 1) {
      slot->batch.fill(batch, jobs);
      run_batch(slot, &wc);
    }
    // One wake-up was for us; any more were meant for other workers (pause
    // and shutdown push one per worker), who would otherwise block for ever.
    if (wakeups > 1) queue_.wake(wakeups - 1);
  }
}

void executor::run_batch(worker_slot* slot, worker_clock* wc) {
  // A job of a batch must never wait behind a slow one while another worker
  // idles. Idle workers steal from the batch before they block; one that
  // blocked before this batch was filled is woken here, once per batch. The
  // fill and the idle_ read here against idle_++ and the look in steal()
  // (all seq_cst): either it sees these jobs, or we see it idle.
  bool woke = false;
  std::size_t ran = 0;
  while (queued_job* job = slot->batch.take()) {
    queue_.dequeued(1);
    if (!woke && !slot->batch.empty() && idle_.load(std::memory_order_seq_cst) > 0) {
      queue_.wake(1);
      woke = true;
    }
    run_one(static_cast<detail::job_record*>(job), slot, wc);
    ++ran;
  }
  if (ran != 0) settle(ran);  // once per batch: one locked instruction less per job
}

detail::job_record* executor::steal(const worker_slot* thief) noexcept {
  for (const auto& victim : slots_) {
    if (victim.get() == thief) continue;
    if (queued_job* job = victim->batch.take()) return static_cast<detail::job_record*>(job);
  }
  return nullptr;
}

std::size_t executor::run_pending() {
  std::size_t n = 0;
  while (queued_job* job = queue_.try_pop()) {
    run_one(static_cast<detail::job_record*>(job), nullptr);
    settle(1);
    ++n;
  }
  return n;
}

void executor::finish(detail::job_record* rec, status st, worker_slot* slot) {
  rec->state.store(detail::job_state::done, std::memory_order_release);
  metrics_->on_finished(*rec->metrics, st, rec->timings.run_time, rec->timings.completed_late,
                        slot != nullptr ? slot->shard : nullptr);
  rec->deliver(st, rec->timings);
}

void executor::settle(std::size_t n) noexcept {
  settled_.fetch_add(n, std::memory_order_seq_cst);
  // Store-load pairing with shutdown(): it closes the queue (seq_cst) and then
  // reads settled_; we add to settled_ and then read closed. One of us sees
  // the other. Before close nobody waits, so the common path reads one flag.
  if (queue_.closed_seq_cst() && all_settled()) {
    std::lock_guard lock(mu_);
    changed_.notify_all();
  }
}

void executor::run_one(detail::job_record* rec, worker_slot* slot, worker_clock* wc) {
  auto expected = detail::job_state::queued;
  if (!rec->state.compare_exchange_strong(expected, detail::job_state::starting, std::memory_order_acq_rel)) {
    rec->release();  // cancelled while queued: its outcome is already delivered
    return;
  }
  const bool checks = options_.deadline_checks;
  // A job with no deadline, start-by bound, run limit or parent needs its
  // start time only for its timings: when the worker took it without waiting
  // right after another job ended, that end is its start (saves a clock read
  // per job; the timings then include the previous job's completion
  // bookkeeping, and never start before the job was admitted).
  const bool timeless = rec->bounds.latest_useful_start() == never && rec->run_limit == duration::max() &&
                        rec->idle_limit == duration::max() && !rec->parent;
  // Came straight from the last job (or drop) without waiting: the time from
  // that reading to this job's end is one job's share of the worker, its
  // bookkeeping and completion included (see observe_service_time below).
  const bool back_to_back = wc != nullptr && wc->valid;
  const time_point previous = back_to_back ? wc->last : time_point{};
  time_point start;
  if (wc != nullptr && wc->valid && timeless) {
    start = std::max(wc->last, rec->admitted_at);
  } else {
    start = fast_now(*clock_, fast_clock_span);
    if (wc != nullptr) {
      wc->last = start;
      wc->valid = true;
    }
  }
  job_timings& t = rec->timings;
  t.queue_delay = elapsed(rec->admitted_at, start);

  // Last look before spending a worker on it.
  status early = status::ok();
  if (expired_at_start(rec->bounds, start, checks)) {
    early = status::expired(expiry_stage::queue);
  } else if (rec->parent && rec->parent->token().stop_requested()) {
    early = rec->parent->stop_status();
    if (early.code == outcome::deadline_exceeded) early = status::expired(expiry_stage::queue);
  } else if (stopping_now_.load(std::memory_order_acquire)) {
    early = status::cancelled(cancel_cause::shutdown);
  }
  if (!early.is_ok()) {
    finish(rec, early, slot);
    rec->release();
    return;
  }

  time_point run_deadline = never;
  if (checks) {
    run_deadline = earliest(rec->bounds.deadline, saturating_add(start, rec->run_limit));
    if (run_deadline != never) run_deadline = saturating_sub(run_deadline, rec->reserve);
  }
  // A worker's job without a parent is watched (worker_watch); a child of a
  // parent context, or a job run by run_pending, keeps a timer of its own.
  const bool watched = slot != nullptr && !rec->parent && run_deadline != never;
  const duration idle = checks ? rec->idle_limit : duration::max();
  if (rec->wants_context() || run_deadline != never || rec->parent || idle != duration::max()) {
    if (rec->parent) {
      rec->ctx.emplace(rec->parent->child_until(run_deadline, idle));
    } else if (watched) {
      rec->ctx.emplace(context_source::watched(*clock_, run_deadline, start, idle));
    } else {
      rec->ctx.emplace(*clock_, run_deadline, idle);
    }
  }
  t.remaining_at_dispatch = remaining(rec->bounds.deadline, start);
  metrics_->on_dispatch(t.queue_delay, t.remaining_at_dispatch, slot != nullptr ? slot->shard : nullptr);
  rec->state.store(detail::job_state::running, std::memory_order_release);
  // Only a job with a context can be cancelled by shutdown() or expired by
  // the watch: only it needs to be seen in the slot (two uncontended mutex
  // round trips saved otherwise).
  if (slot != nullptr && rec->ctx) {
    worker_watch& w = *slot->watch;
    std::lock_guard lock(w.mu);
    w.current = rec;
    if (watched && run_deadline < w.armed_at) arm_watch(slot->watch, *clock_, run_deadline);
  }
  // Either shutdown() saw us in the slot, or we see its flag: no job escapes the drain.
  if (stopping_now_.load(std::memory_order_seq_cst) && rec->ctx) rec->ctx->cancel(cancel_cause::shutdown);
  // A slot has one writer, its worker: a plain store, no locked instruction.
  if (slot != nullptr) {
    slot->busy.store(1, std::memory_order_relaxed);
  } else {
    busy_.fetch_add(1, std::memory_order_relaxed);
  }

  run_facts facts;
  t.ran = true;
  try {
    rec->invoke(rec->ctx ? &rec->ctx->get() : nullptr);
  } catch (const stopped_error& e) {
    facts.how = run_ending::stopped;
    facts.thrown = e.why();
  } catch (...) {
    facts.how = run_ending::threw;
    rec->error = std::current_exception();
  }
  const time_point end = fast_now(*clock_, fast_clock_span);
  if (wc != nullptr) wc->last = end;

  if (slot != nullptr) {
    slot->busy.store(0, std::memory_order_relaxed);
  } else {
    busy_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (slot != nullptr && rec->ctx) {
    worker_watch& w = *slot->watch;
    std::lock_guard lock(w.mu);
    w.current = nullptr;
    // Nothing waiting for this worker: no timer is kept for a job to come.
    // A guest slot keeps it: its jobs come back to back from I/O threads,
    // and an armed watch outlives a job harmlessly (it fires at most once,
    // finds nothing running and is gone), where re-arming it per job was
    // ~3 % of an inline echo request's CPU.
    if (w.timer && !slot->guest && queue_.depth() == 0 && slot->batch.empty()) disarm_watch(w, *clock_);
  }
  if (watched) rec->ctx->arm_if_shared();  // someone kept the context: it fires by itself now
  t.run_time = elapsed(start, end);
  // Admission predicts a wait from what a job costs the worker, not from its
  // run time alone: between two runs the worker also finishes the last job
  // (its outcome, its callback), drops expired ones and takes the next. At
  // 100 us jobs that was 2-3 % more per job, and admission let in jobs that
  // could not start in time. A worker that waited for this job
  // has only its run time to go by.
  const duration cost = back_to_back ? elapsed(previous, end) : t.run_time;
  if (wc != nullptr) {
    queue_.observe_service_time(cost, wc->cost);
  } else {
    queue_.observe_service_time(cost);
  }

  // One outcome (run_outcome.hpp).
  facts.context = rec->ctx ? rec->ctx->get().stop_status(end) : status::ok();
  t.committed = rec->ctx && rec->ctx->get().committed();
  facts.past_deadline = rec->bounds.deadline != never && end > rec->bounds.deadline;
  const run_verdict verdict = run_outcome(facts);
  t.completed_late = verdict.completed_late;
  const status st = verdict.st;
  finish(rec, st, slot);
  rec->release();
}

void executor::pause() {
  std::unique_lock lock(mu_);
  paused_ = true;
  update_control_locked();
  lock.unlock();
  queue_.wake(worker_count_);
  lock.lock();
  changed_.wait(lock, [&] { return parked_ == worker_count_ || stopping_; });
}

void executor::resume() {
  std::lock_guard lock(mu_);
  paused_ = false;
  update_control_locked();
  changed_.notify_all();
}

void executor::shutdown(time_point drain_deadline) {
  {
    std::lock_guard lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  queue_.close();

  // Drain: queued and running jobs may finish until the drain deadline.
  if (drain_deadline > clock_->now() && worker_count_ > 0) {
    auto fired = std::make_shared<std::atomic<bool>>(false);
    const timer_id timer = clock_->schedule(drain_deadline, [this, fired]() noexcept {
      std::lock_guard lock(mu_);
      fired->store(true);
      changed_.notify_all();
    });
    {
      std::unique_lock lock(mu_);
      paused_ = false;
      update_control_locked();
      changed_.notify_all();
      changed_.wait(lock, [&] { return fired->load() || all_settled(); });
    }
    clock_->cancel(timer);
  }

  // Past the deadline: everything left is cancelled, and still gets its outcome.
  stopping_now_.store(true, std::memory_order_seq_cst);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    paused_ = false;
    update_control_locked();
    changed_.notify_all();
  }
  for (auto* slots : {&slots_, &guests_}) {
    for (auto& slot : *slots) {
      worker_watch& w = *slot->watch;
      std::lock_guard lock(w.mu);
      if (w.current != nullptr && w.current->ctx) w.current->ctx->cancel(cancel_cause::shutdown);
    }
  }
  if (worker_count_ == 0) {
    run_pending();  // manual mode: outcomes for what is left (cancelled/shutdown)
  }
  queue_.wake(worker_count_);
  for (auto& th : threads_) th.join();
  threads_.clear();
  // No watch outlives the executor's workers (a guest still running keeps
  // its context's own deadline check, and is waited for below).
  for (auto* slots : {&slots_, &guests_}) {
    for (auto& slot : *slots) {
      worker_watch& w = *slot->watch;
      std::lock_guard lock(w.mu);
      w.closed = true;
      disarm_watch(w, *clock_);
    }
  }
  // Anything a worker left behind, and anything a submit that passed the
  // closed check before close() is still pushing (it fails or lands in the
  // queue within a few instructions).
  for (;;) {
    run_pending();
    if (all_settled() && lent_.load(std::memory_order_seq_cst) == 0) break;
    std::this_thread::yield();
  }
}

}  // namespace hourglass
