// The consumer's renewer and writer threads: the lease (renewed every
// lease/3, fencing this daemon when it cannot be), DELETE's marks, and the
// outcomes and hand-backs written as soon as they wait.
#include <algorithm>
#include <optional>

#include "consumer_impl.hpp"
#include "hourglass/admission_policy.hpp"
#include "renewal.hpp"

namespace hourglass::fleet {

namespace {

// The writer's pause after the broker failed it.
constexpr duration writer_retry = std::chrono::milliseconds(100);
// Outcomes recorded in one script call: Redis runs it alone, about 10 us a job.
constexpr std::size_t max_outcomes_per_write = 256;

}  // namespace

// One renewal: sent, then its answer (or failure) handed to the pure
// after_renewal(), whose decision is done here.
consumer::impl::renewal consumer::impl::renew() {
  std::vector<job_queue::held_entry> entries;
  lease_value v;
  time_point last;
  std::size_t slots = 0;
  {
    std::lock_guard lock(mu);
    slots = draining ? 0 : opts.slots;
    entries = renewable_locked();
    ++lease_v.renewals;
    v = lease_v;
    last = last_renewed;
  }
  const time_point sent = clk.now();
  const context_source bounded = stop_keeping.get().child_until(detail::renewal_limit(last, sent, timing));
  std::optional<job_queue::renew_answer> a;
  std::string failure;
  try {
    a = queue.renew(bounded.get(), opts.name, v, timing.lease, slots, entries);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (a) note_offset(a->broker_now_us);
  stop_list stops;
  std::string line, alarm;
  renewal r;
  {
    std::lock_guard lock(mu);
    const detail::renewal_decision d = detail::after_renewal(
        a ? &*a : nullptr, {sent, clk.now(), last_renewed, self_fenced, stop_keeping.get().done()}, timing);
    r = {a.has_value(), d.next};
    if (d.broker_error) ++st.broker_errors;
    if (d.renewed) {
      last_renewed = sent;
      st.backlog = a->backlog;
      st.pending = a->pending;
      st.scheduled = a->scheduled;
      if (st.paused && !a->paused) slot_freed.notify_all();  // resumed: reading goes on
      st.paused = a->paused;
      predicted_wait = hourglass::predicted_wait(
          {static_cast<std::size_t>(a->backlog), static_cast<std::size_t>(a->live_slots), a->mean_run});
    }
    if (d.name_taken) st.fenced = true;
    if (self_fenced && !d.self_fenced) slot_freed.notify_all();  // reading may go on
    self_fenced = d.self_fenced;
    if (d.fence) {
      const std::size_t stopped = feed_all_locked(detail::held_event::fenced, stops);
      st.fenced_jobs += stopped;
      if (d.name_taken) {
        line = "fleet: another process renews the lease of consumer " + opts.name + ": this one stops";
        stop_reading_locked();
      } else {
        line = "fleet: lease of " + opts.name + " not renewed for " +
               detail::ms_text(elapsed(last_renewed, clk.now())) + " ms: stopping its " + std::to_string(stopped) +
               " jobs (the fleet may reclaim them)";
      }
    }
    if (d.renewed_again) line = "fleet: lease of " + opts.name + " renewed again";
    if (d.renewed && !a->deleted.empty()) {
      st.lost_entries += a->deleted.size();
      for (const std::string& e : a->deleted) {
        if (auto it = held_entries.find(e); it != held_entries.end()) it->second.deleted = true;
      }
      alarm = "fleet: loss alarm: " + std::to_string(a->deleted.size()) + " pending entries of queue " +
              queue.options().name + " held by " + opts.name + " were deleted from the stream";
    }
    for (const auto& [entry, event] : d.entries) {
      if (auto it = held_entries.find(entry); it != held_entries.end()) feed_locked(it, event, &stops);
    }
  }
  stop_jobs(stops);
  if (!failure.empty() && !stop_keeping.get().done())
    log(std::string("fleet: renewing the lease of ") + opts.name + ": " + failure);
  if (!line.empty()) log(line);
  if (!alarm.empty()) log(alarm);
  return r;
}

// Writes what waits, a batch (one script call) at a time; false when the
// broker could not be used.
bool consumer::impl::flush(const context& ctx) {
  bool one_at_a_time = false;  // a batch was refused: each outcome alone, to find which the broker refuses
  for (;;) {
    std::vector<outcome_to_write> batch;
    {
      std::lock_guard lock(mu);
      if (outbox.empty()) break;
      const std::size_t n = std::min(outbox.size(), one_at_a_time ? std::size_t{1} : max_outcomes_per_write);
      batch.assign(outbox.begin(), outbox.begin() + static_cast<std::ptrdiff_t>(n));
    }
    std::vector<job_queue::outcome> outcomes;
    outcomes.reserve(batch.size());
    for (const outcome_to_write& o : batch) {
      outcomes.push_back({o.job_id, o.run_time, o.fields, o.entry, o.retry, o.wait});
    }
    std::vector<finish_result> results;
    std::vector<std::string> cancelled_children;  // of parents these outcomes resumed
    try {
      // a batch sent again is answered as before
      results = queue.finish_batch(ctx, outcomes, lease_v.token, &cancelled_children);
    } catch (const redis_refused& e) {
      std::lock_guard lock(mu);
      ++st.broker_errors;
      if (!refusal_is_lasting(e.what())) return false;  // the broker's passing state: every write waits
      if (batch.size() > 1) {
        one_at_a_time = true;  // (those before the one refused are answered as written when sent again)
        continue;
      }
      if (!outbox.empty() && outbox.front().entry == batch.front().entry) refuse_front_locked(e.what());
      continue;
    } catch (const std::exception&) {
      std::lock_guard lock(mu);
      ++st.broker_errors;
      return false;
    }
    std::lock_guard lock(mu);
    for (const std::string& h : cancelled_children) count_recorded(h, status::cancelled(cancel_cause::parent));
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const outcome_to_write& o = batch[i];
      if (results[i] == finish_result::first || results[i] == finish_result::no_budget) {
        ++st.outcomes_written;
        count_recorded(o.handler, o.recorded);
      }
      if (results[i] == finish_result::cancelled) {  // marked by a DELETE while it ran: not retried
        ++st.outcomes_written;
        count_recorded(o.handler, status::cancelled(cancel_cause::requested));
      }
      if (results[i] == finish_result::scheduled) ++st.retries_scheduled;
      if (results[i] == finish_result::scheduled || results[i] == finish_result::no_budget) {
        count_retry(o.handler, results[i] == finish_result::scheduled ? job_retry_verdict::scheduled
                                                                      : job_retry_verdict::no_budget);
      }
      if (results[i] == finish_result::duplicate) ++st.duplicate_outcomes;
      // The oldest may have been dropped meanwhile (too many waiting).
      if (!outbox.empty() && outbox.front().entry == o.entry) outbox.pop_front();
      if (auto it = held_entries.find(o.entry); it != held_entries.end()) feed_locked(it, detail::held_event::written);
    }
  }
  std::vector<job_queue::held_entry> back;
  {
    std::lock_guard lock(mu);
    back.swap(to_hand_back);
  }
  if (back.empty()) return true;
  try {
    queue.hand_back(ctx, opts.name, lease_v.token, back);
  } catch (const std::exception&) {
    std::lock_guard lock(mu);
    ++st.broker_errors;
    to_hand_back.insert(to_hand_back.end(), back.begin(), back.end());
    return false;
  }
  std::lock_guard lock(mu);
  st.handed_back += back.size();
  for (const auto& b : back) {
    if (auto it = held_entries.find(b.entry); it != held_entries.end())
      feed_locked(it, detail::held_event::handed_back);
  }
  return true;
}

void consumer::impl::refuse_front_locked(const std::string& why) {
  outcome_to_write& o = outbox.front();
  ++st.outcomes_refused;
  if (!o.refused_once) {
    log("fleet: the broker refused the outcome of job " + o.job_id +
        "; it is recorded as error/outcome_refused: " + why);
    o.refused_once = true;
    o.fields = {detail::state_field(outcome::error),
                {"error", "outcome_refused"},
                {"message", "the broker refused this job's outcome: " + why.substr(0, 200)},
                {"http_status", "500"}};
    o.recorded = status::error();
    o.retry.reset();
    o.wait.reset();
    return;
  }
  log("fleet: the broker refused even the error outcome of job " + o.job_id + "; dropped, to be reclaimed: " + why);
  if (auto it = held_entries.find(o.entry); it != held_entries.end()) feed_locked(it, detail::held_event::dropped);
  outbox.pop_front();
  ++st.outcomes_dropped;
}

// The renewer: nothing else on its thread, so outcomes waiting for a slow
// broker never delay a renewal; each attempt is bounded by the fencing
// point, so a hung broker fences on time. Its sleeps are on the executor's
// clock: renewals are sent every lease/3 of it, from the first one's
// sending (`first`: when the second is due).
void consumer::impl::renew_loop(time_point first) {
  const context& ctx = stop_keeping.get();
  time_point next_renewal = first;
  while (!ctx.done()) {
    if (!ctx.sleep_until(next_renewal)) break;
    next_renewal = renew().next;
  }
}

// The writer: outcomes and hand-backs, as soon as they wait (woken by
// feed_locked, and by drain's stop); after a failure, again once
// writer_retry has passed on the executor's clock.
void consumer::impl::write_loop() {
  const context& ctx = stop_keeping.get();
  bool broker_ok = true;
  while (!ctx.done()) {
    {
      std::unique_lock lock(mu);
      if (broker_ok) {
        work_ready.wait(lock, [&] { return ctx.done() || !outbox.empty() || !to_hand_back.empty(); });
      } else {
        clk.wait_until(lock, work_ready, saturating_add(clk.now(), writer_retry), [&] { return ctx.done(); });
      }
    }
    if (ctx.done()) break;
    broker_ok = flush(ctx);
  }
}

}  // namespace hourglass::fleet
