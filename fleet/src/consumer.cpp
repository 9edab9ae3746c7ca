// The consumer: bookkeeping of held entries, a job's life in the executor
// (the start script, then the handler; settle() decides what its result
// becomes), start and drain. Delivery is consumer_reader.cpp; the lease and
// the outcomes' writes are consumer_keeper.cpp.
#include <algorithm>
#include <functional>
#include <iterator>
#include <utility>

#include "consumer_impl.hpp"
#include "hourglass/job_bounds.hpp"

namespace hourglass::fleet {

using namespace std::chrono_literals;

consumer::impl::impl(job_queue& q, redis_client& r, executor& ex, job_runner run, consumer_options o)
    : queue(q),
      reader(r),
      jobs(ex),
      clk(ex.get_clock()),
      runner(std::move(run)),
      opts(std::move(o)),
      timing(lease_timing_for(opts.lease)),
      stop_reading(clk),
      stop_keeping(clk) {}

// ---- bookkeeping (under mu) ----

detail::holding consumer::impl::holding_locked() const {
  detail::holding out{.busy = taking, .takes_in_flight = takes_in_flight, .fenced = self_fenced, .paused = st.paused};
  for (const auto& [entry, h] : held_entries) {
    out.busy += detail::holds_job(h.state) ? 1 : 0;
    out.started_waiting += h.started_by_take && h.state == detail::held_state::queued ? 1 : 0;
  }
  return out;
}

std::vector<job_queue::held_entry> consumer::impl::renewable_locked() const {
  std::vector<job_queue::held_entry> out;
  for (const auto& [entry, h] : held_entries) {
    if (detail::renewed(h.state) && !h.deleted)
      out.push_back({entry, h.job_id});  // a deleted entry has nothing to renew
  }
  return out;
}

detail::held_action consumer::impl::feed_locked(held_map::iterator it, detail::held_event e, stop_list* stops,
                                                outcome_parts* outcome) {
  using act = detail::held_action;
  held& h = it->second;
  const detail::held_step step = detail::on_held_event(h.state, e);
  const bool had_slot = detail::holds_job(h.state);
  const bool was_started_waiting = h.started_by_take && h.state == detail::held_state::queued;
  h.state = step.next;
  switch (step.action) {
    case act::none:
    case act::run_handler:
    case act::settle: break;
    case act::stop:
    case act::stop_requested:
    case act::hand_back_and_stop:
      if (stops != nullptr) {
        stops->push_back(
            {h.ref, step.action == act::stop_requested ? cancel_cause::requested : cancel_cause::shutdown});
      }
      if (step.action != act::hand_back_and_stop) break;
      [[fallthrough]];
    case act::hand_back:
      to_hand_back.push_back({it->first, h.job_id});
      work_ready.notify_one();
      break;
    case act::write:
      h.ref = job_ref();
      if (outcome != nullptr) {
        if (outbox.size() >= opts.max_unwritten_outcomes) {
          // The broker has been gone for long: drop the oldest; its entry is
          // reclaimed and run again once the broker is back (at least once).
          if (auto oldest = held_entries.find(outbox.front().entry); oldest != held_entries.end()) {
            feed_locked(oldest, detail::held_event::dropped);
          }
          outbox.pop_front();
          ++st.outcomes_dropped;
        }
        outbox.push_back({it->first, h.job_id, outcome->run_time, std::move(outcome->fields), h.handler,
                          outcome->recorded, std::move(outcome->retry), std::move(outcome->wait)});
        work_ready.notify_one();
      }
      break;
    case act::leave:
    case act::forget: held_entries.erase(it); break;
  }
  // A slot freed wakes the reader only when it can use it: with its take in
  // flight it waits for the take's answer, which wakes it (about one wake a
  // job fewer, under the lock the worker holds). Drain waits for every slot.
  // A job a take started that a worker now has (or that ended first) lets
  // reading go on as well.
  const bool freed = had_slot && !detail::holds_job(step.next);
  const bool worker_has_it = was_started_waiting && step.next != detail::held_state::queued;
  if ((freed || worker_has_it) && (takes_in_flight < max_takes_in_flight || draining)) slot_freed.notify_all();
  return step.action;
}

std::size_t consumer::impl::feed_all_locked(detail::held_event e, stop_list& stops) {
  std::size_t stopped = 0;
  for (auto it = held_entries.begin(); it != held_entries.end();) {
    const auto next = std::next(it);
    const detail::held_action a = feed_locked(it, e, &stops);
    stopped += a == detail::held_action::stop || a == detail::held_action::hand_back_and_stop ? 1 : 0;
    it = next;
  }
  return stopped;
}

void consumer::impl::stop_jobs(stop_list& stops) noexcept {
  for (job_stop& s : stops) s.ref.cancel(s.cause);
  stops.clear();
}

void consumer::impl::count_recorded(const std::string& handler, const status& recorded) {
  if (opts.metrics != nullptr)
    opts.metrics->on_recorded(opts.metrics->handler(handler.empty() ? "default" : handler), recorded);
}

void consumer::impl::count_retry(const std::string& handler, job_retry_verdict v) {
  hourglass::metrics& m = opts.metrics != nullptr ? *opts.metrics : jobs.stats();
  m.on_job_retry(m.handler(handler.empty() ? "default" : handler), v);
}

void consumer::impl::stop_reading_locked() {
  stop_reading.cancel(cancel_cause::shutdown);
  slot_freed.notify_all();
}

// ---- a job's life ----

void consumer::impl::submit(const std::string& entry, const std::string& job_id, const std::string& handler,
                            const entry_terms& t, prestart_ptr started) {
  job_options o;
  o.handler = handler.empty() ? std::string_view("default") : std::string_view(handler);
  if (opts.metrics != nullptr) o.metrics = &in_executor.handler(o.handler);
  o.start_by = t.start_by;
  o.deadline = t.deadline;  // the whole job's: an attempt running into it ends deadline_exceeded/run
  o.min_budget = t.min_budget;
  if (runner.run_limit) o.run_limit = runner.run_limit(handler);
  if (runner.idle_limit) o.idle_limit = runner.idle_limit(handler);
  auto self = shared_from_this();
  job_ref ref = jobs.submit(
      o,
      [self, entry, job_id, t, started = std::move(started)](const context& ctx) {
        return self->start_and_run(ctx, entry, job_id, t, started);
      },
      [self, entry](job_result<run_value>&& r) noexcept { self->on_done(entry, std::move(r)); });
  stop_list stops;  // fenced or lost before the handle was here
  {
    std::lock_guard lock(mu);
    if (const auto it = held_entries.find(entry); it != held_entries.end()) {
      if (detail::holds_job(it->second.state)) it->second.ref = ref;
      feed_locked(it, detail::held_event::submitted, &stops);
    }
  }
  stop_jobs(stops);
}

consumer::impl::run_value consumer::impl::start_and_run(const context& ctx, const std::string& entry,
                                                        const std::string& job_id, const entry_terms& t,
                                                        const prestart_ptr& started) {
  // A start whose reply is lost may have counted a delivery: it is tried
  // again, under the same token (counted once), until the job's context ends
  // (fencing ends it when the broker stays away). A job the reader's take
  // started has its answer already.
  time_point sent;
  job_queue::start_answer a;
  if (started) {
    sent = started->sent;
    a = std::move(started->answer);  // run once: the job's only use of it
  }
  for (duration backoff = 50ms; !started; backoff = std::min<duration>(backoff * 2, 1s)) {
    sent = clk.now();
    try {
      a = queue.start(ctx, {entry, job_id}, opts.name, opts.max_deliveries, lease_v.token + "/" + entry);
      break;
    } catch (const redis_unavailable&) {
      if (!ctx.sleep_for(backoff)) throw;
    }
  }
  run_value v;
  const job_age age = age_on_broker(t.counted_from, a.broker_now_us);
  {
    std::lock_guard lock(mu);
    if (auto it = held_entries.find(entry); it != held_entries.end()) {
      held& h = it->second;
      h.queued = age.waited;
      h.start_sent = sent;
      h.retry.policy = a.retry;
      h.retry.attempt = a.attempt;
      h.retry.now = broker_time_point(a.broker_now_us);
      if (a.deadline_us) h.retry.deadline = broker_time_point(*a.deadline_us);
      h.retry.min_budget = t.min_budget;
    }
  }
  using verdict = job_queue::start_answer::verdict;
  if (a.v == verdict::dead || a.v == verdict::cancelled) {
    v.k = a.v == verdict::dead ? run_value::kind::dead : run_value::kind::cancelled;
    v.dead_dropped = a.dead_dropped;
    return v;
  }
  if (a.v != verdict::run) return v;  // skipped: not ours any more, or an outcome is recorded
  const job_bounds bounds{
      .deadline = t.deadline, .start_by = start_by_on_our_clock(age, t.freshness, sent), .min_budget = t.min_budget};
  if (opts.judge_freshness && !starts_in_time(bounds, clk.now())) {
    v.k = run_value::kind::expired;
    return v;
  }
  delivered_job job;
  job.id = job_id;
  job.handler = std::move(a.handler);
  job.payload = std::move(a.payload);
  job.content_type = std::move(a.content_type);
  job.idempotency_key = a.idempotency_key.empty() ? std::string(job_id) : std::move(a.idempotency_key);
  job.delivery = a.deliveries;
  job.woke_by = std::move(a.woke_by);
  job.wait_rule = std::move(a.wait_rule);
  job.signal_payload = std::move(a.signal_payload);
  {
    std::lock_guard lock(mu);
    const auto it = held_entries.find(entry);
    if (it == held_entries.end()) return v;
    // Handed back, fenced or lost while the start script ran: the handler
    // must not run (a handler that ignores its context would run it twice).
    if (feed_locked(it, detail::held_event::start_said_run) != detail::held_action::run_handler || ctx.done()) return v;
    it->second.run_start = clk.now();
    ++st.started;
  }
  v.out = runner.run(ctx, job);
  v.k = run_value::kind::ran;
  return v;
}

error_record consumer::impl::describe(std::exception_ptr e) const {
  if (runner.describe_error) return runner.describe_error(e);
  error_record r;
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    r.message = ex.what();
  } catch (...) {
    r.message = "unknown exception";
  }
  return r;
}

void consumer::impl::on_done(const std::string& entry, job_result<run_value>&& r) noexcept {
  job_ref drop;  // released outside the lock
  std::lock_guard lock(mu);
  const auto it = held_entries.find(entry);
  if (it == held_entries.end()) return;
  held& h = it->second;
  drop = std::move(h.ref);
  const bool started = h.state == detail::held_state::running;
  // Given back, fenced or lost: settled by the state machine alone.
  if (feed_locked(it, detail::held_event::job_ended) != detail::held_action::settle) return;
  detail::delivery_facts facts{h.reclaimed, started, h.queued,
                               started ? std::optional<duration>(elapsed(h.run_start, clk.now())) : std::nullopt,
                               h.retry};
  // The broker's time now, from its TIME at the start and our clock since:
  // late rather than early (the start's reply took some of it), so a retry
  // the rule allows still fits on the broker.
  facts.retry.now = saturating_add(facts.retry.now, elapsed(h.start_sent, clk.now()));
  facts.retry.predicted_wait = predicted_wait;
  facts.retry.jitter = hourglass::detail::random_jitter_sample();
  const unsigned dead_dropped = r.result ? r.result->dead_dropped : 0;
  detail::settlement s = detail::settle(facts, std::move(r), [this](std::exception_ptr e) { return describe(e); });
  using tally = detail::settlement::tally;
  if (s.counted == tally::expired) ++(h.reclaimed ? st.expired_reclaim : st.expired_queue);
  if (s.counted == tally::dead_lettered) {
    ++st.dead_lettered;
    st.dead_dropped += dead_dropped;
  }
  if (s.counted == tally::broker_error) ++st.broker_errors;
  if (s.counted == tally::dead_lettered || s.counted == tally::cancelled_at_start)
    count_recorded(h.handler, s.recorded);
  // Counted now for exhausted (and not_retryable, which is not counted);
  // scheduled and no_budget once the finish says which it was.
  if (s.retry_verdict && !s.retry) count_retry(h.handler, *s.retry_verdict);
  switch (s.what) {
    case detail::settlement::action::write: {
      outcome_parts o{facts.run, std::move(s.fields), s.recorded, std::move(s.retry), std::move(s.wait)};
      feed_locked(it, detail::held_event::outcome_ready, nullptr, &o);
      break;
    }
    case detail::settlement::action::hand_back: feed_locked(it, detail::held_event::refused); break;
    case detail::settlement::action::forget: feed_locked(it, detail::held_event::nothing_ours); break;
  }
}

// ---- start and drain ----

void consumer::impl::start(const context& ctx) {
  queue.ensure_group(ctx);
  const std::string before = queue.lease_of(ctx, opts.name);
  if (!before.empty()) {
    // Someone held this name: alive if it renews within one renewal period
    // (of the executor's clock, as every wait of ours; `ctx` may end it).
    context_source waiting(clk);
    const cancellation_callback<std::function<void()>> on_stop(ctx.token(), [&waiting] { waiting.cancel(); });
    waiting.get().sleep_for(timing.renew_every + timing.renew_every / 4);
    ctx.check();
    const std::string after = queue.lease_of(ctx, opts.name);
    if (judge_name(before, after) == name_claim::live_holder) {
      throw name_taken("consumer name '" + opts.name + "' is held by a live process (its lease is renewed)");
    }
    lease_value old;
    if (!after.empty() && parse_lease(after, old)) queue.release(ctx, opts.name, old.token);
  }
  lease_v.token = new_job_id();
  const renewal first = renew();
  if (!first.answered) throw redis_unavailable("redis: the first lease renewal failed");
  {
    std::lock_guard lock(mu);
    if (st.fenced) throw name_taken("consumer name '" + opts.name + "' was taken while starting");
  }
  running = true;
  renewer_thread = std::thread([self = shared_from_this(), next = first.next] { self->renew_loop(next); });
  writer_thread = std::thread([self = shared_from_this()] { self->write_loop(); });
  reader_thread = std::thread([self = shared_from_this()] { self->read_loop(); });
}

void consumer::impl::drain(time_point deadline) {
  if (!running) return;
  running = false;
  {
    std::lock_guard lock(mu);
    draining = true;
    stop_reading_locked();
  }
  if (reader_thread.joinable()) reader_thread.join();
  {
    // A take in flight is answered within the connection's io_timeout; what
    // it started is delivered (and, reading stopped, handed back) first.
    std::unique_lock lock(mu);
    slot_freed.wait(lock, [&] { return takes_in_flight == 0; });
  }
  // Jobs not started yet go back at once; running ones get until the
  // deadline, on the executor's clock, and are then handed back whether or
  // not their handlers stop: another daemon may run them.
  stop_list stops;
  {
    std::unique_lock lock(mu);
    feed_all_locked(detail::held_event::drain_began, stops);
    lock.unlock();
    stop_jobs(stops);
    lock.lock();
    clk.wait_until(lock, slot_freed, deadline, [&] { return busy_locked() == 0; });
    feed_all_locked(detail::held_event::drain_deadline, stops);
  }
  stop_jobs(stops);
  stop_keeping.cancel(cancel_cause::shutdown);
  {
    std::lock_guard lock(mu);  // the writer sees the stop, or waits and is woken
    work_ready.notify_all();
  }
  if (renewer_thread.joinable()) renewer_thread.join();
  if (writer_thread.joinable()) writer_thread.join();
  // Last writes on a context of their own, each bounded by the connection's io_timeout.
  const context last;
  flush(last);
  try {
    queue.release(last, opts.name, lease_v.token);
  } catch (const std::exception& e) {
    log(std::string("fleet: releasing the lease of ") + opts.name + ": " + e.what());
  }
}

consumer_stats consumer::impl::stats() const {
  std::lock_guard lock(mu);
  consumer_stats s = st;
  s.held = held_entries.size();
  s.unwritten = outbox.size();
  return s;
}

consumer::consumer(job_queue& queue, redis_client& reader, executor& jobs, job_runner runner, consumer_options options)
    : impl_(std::make_shared<impl>(queue, reader, jobs, std::move(runner), std::move(options))) {
  if (impl_->opts.name.empty()) throw std::invalid_argument("fleet consumer: a name is needed");
  if (impl_->opts.slots == 0) throw std::invalid_argument("fleet consumer: at least one slot");
  if (!impl_->runner.run) throw std::invalid_argument("fleet consumer: a job runner is needed");
}

consumer::~consumer() { stop(); }

void consumer::start(const context& ctx) { impl_->start(ctx); }
void consumer::drain(time_point deadline) { impl_->drain(deadline); }
void consumer::stop() { impl_->drain(impl_->clk.now()); }
consumer_stats consumer::stats() const { return impl_->stats(); }

void consumer::set_slots(std::size_t slots, std::size_t prefetch) {
  if (slots == 0) throw std::invalid_argument("fleet consumer: at least one slot");
  std::lock_guard lock(impl_->mu);
  impl_->opts.slots = slots;
  impl_->opts.prefetch = prefetch;
  impl_->slot_freed.notify_all();  // more room: reading goes on
}

consumer_stats sum_of(const std::vector<consumer_stats>& each) {
  if (each.empty()) return {};
  consumer_stats t = each.front();
  for (std::size_t i = 1; i < each.size(); ++i) {
    const consumer_stats& s = each[i];
    for (auto [sum, add] : {std::pair{&t.delivered, s.delivered},
                            {&t.reclaimed, s.reclaimed},
                            {&t.started, s.started},
                            {&t.outcomes_written, s.outcomes_written},
                            {&t.retries_scheduled, s.retries_scheduled},
                            {&t.duplicate_outcomes, s.duplicate_outcomes},
                            {&t.expired_queue, s.expired_queue},
                            {&t.expired_reclaim, s.expired_reclaim},
                            {&t.dead_lettered, s.dead_lettered},
                            {&t.dead_dropped, s.dead_dropped},
                            {&t.handed_back, s.handed_back},
                            {&t.fenced_jobs, s.fenced_jobs},
                            {&t.lost_entries, s.lost_entries},
                            {&t.outcomes_dropped, s.outcomes_dropped},
                            {&t.outcomes_refused, s.outcomes_refused},
                            {&t.broker_errors, s.broker_errors},
                            {&t.negative_ages, s.negative_ages},
                            {&t.promoted, s.promoted},
                            {&t.expired_admission, s.expired_admission}}) {
      *sum += add;
    }
    t.held += s.held;
    t.unwritten += s.unwritten;
    t.fenced = t.fenced || s.fenced;
    t.backlog += s.backlog;
    t.pending += s.pending;
    t.scheduled += s.scheduled;
    t.paused = t.paused || s.paused;
  }
  return t;
}

}  // namespace hourglass::fleet
