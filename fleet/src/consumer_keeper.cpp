// The consumer's renewer and writer threads: the lease (renewed every
// lease/3, fencing this daemon when it cannot be), DELETE's marks, and the
// outcomes and hand-backs written as soon as they wait.
#include <algorithm>

#include "consumer_impl.hpp"

namespace hourglass::fleet {

using namespace std::chrono_literals;

// One renewal; false when the broker could not be used.
bool consumer::impl::renew() {
  std::vector<job_queue::held_entry> entries;
  lease_value v;
  {
    std::lock_guard lock(mu);
    entries = renewable_locked();
    ++lease_v.renewals;
    v = lease_v;
  }
  const time_point sent = clk.now();
  // A renewal that answers after the fencing point is of no use: bound it there.
  time_point limit = saturating_add(last_renewed, timing.fence_after);
  if (limit <= sent) limit = saturating_add(sent, timing.renew_every);
  const context_source bounded = stop_keeping.get().child_until(limit);
  job_queue::renew_answer a;
  try {
    a = queue.renew(bounded.get(), opts.name, v, timing.lease, opts.slots, entries);
  } catch (const std::exception& e) {
    if (stop_keeping.get().done()) return false;
    std::vector<job_ref> refs;
    std::string fenced_line;
    {
      std::lock_guard lock(mu);
      ++st.broker_errors;
      if (!self_fenced && must_fence(last_renewed, clk.now(), timing)) {
        self_fenced = true;
        refs = abandon_locked(false, true);
        st.fenced_jobs += refs.size();
        fenced_line = "fleet: lease of " + opts.name + " not renewed for " +
                      detail::ms_text(elapsed(last_renewed, clk.now())) + " ms: stopping its " +
                      std::to_string(refs.size()) + " jobs (the fleet may reclaim them)";
      }
    }
    for (job_ref& r : refs) r.cancel(cancel_cause::shutdown);
    log(std::string("fleet: renewing the lease of ") + opts.name + ": " + e.what());
    if (!fenced_line.empty()) log(fenced_line);
    return false;
  }
  note_offset(a.broker_now_us);
  std::vector<job_ref> cancel_requested, stop_lost;
  std::string line, alarm;
  {
    std::lock_guard lock(mu);
    if (a.fenced) {
      st.fenced = true;
      self_fenced = true;
      stop_lost = abandon_locked(false, true);
      st.fenced_jobs += stop_lost.size();
      line = "fleet: another process renews the lease of consumer " + opts.name + ": this one stops";
      stop_reading.cancel(cancel_cause::shutdown);
    } else {
      if (self_fenced) line = "fleet: lease of " + opts.name + " renewed again";
      self_fenced = false;
      last_renewed = sent;
      st.backlog = a.backlog;
      st.pending = a.pending;
      for (const std::string& e : a.marked) {
        if (auto it = held_entries.find(e); it != held_entries.end() && !it->second.abandoned) {
          cancel_requested.push_back(it->second.ref);
        }
      }
      if (!a.deleted.empty()) {
        st.lost_entries += a.deleted.size();
        for (const std::string& e : a.deleted) {
          if (auto it = held_entries.find(e); it != held_entries.end()) it->second.deleted = true;
        }
        alarm = "fleet: loss alarm: " + std::to_string(a.deleted.size()) + " pending entries of queue " +
                queue.options().name + " held by " + opts.name + " were deleted from the stream";
      }
      for (const std::string& e : a.lost) {
        auto it = held_entries.find(e);
        if (it == held_entries.end() || it->second.abandoned || it->second.writing || it->second.deleted) continue;
        it->second.abandoned = true;  // another daemon holds it now
        stop_lost.push_back(it->second.ref);
      }
    }
  }
  for (job_ref& r : cancel_requested) r.cancel(cancel_cause::requested);
  for (job_ref& r : stop_lost) r.cancel(cancel_cause::shutdown);
  if (!line.empty()) log(line);
  if (!alarm.empty()) log(alarm);
  return true;
}

// Writes what waits; false when the broker could not be used.
bool consumer::impl::flush(const context& ctx) {
  for (;;) {
    outcome_to_write o;
    {
      std::lock_guard lock(mu);
      if (outbox.empty()) break;
      o = outbox.front();
    }
    finish_result fr;
    try {
      fr = queue.finish(ctx, o.job_id, o.run_time, o.fields);
    } catch (const std::exception&) {
      std::lock_guard lock(mu);
      ++st.broker_errors;
      return false;
    }
    std::lock_guard lock(mu);
    if (fr == finish_result::first) {
      ++st.outcomes_written;
      count_recorded(o.handler, o.recorded);
    }
    if (fr == finish_result::duplicate) ++st.duplicate_outcomes;
    if (!outbox.empty() && outbox.front().entry == o.entry) outbox.pop_front();
    forget_locked(o.entry);
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
  for (const auto& b : back) forget_locked(b.entry);
  return true;
}

// The renewer: nothing else on its thread, so outcomes waiting for a slow
// broker never delay a renewal; each attempt is bounded by the fencing
// point, so a hung broker fences on time.
void consumer::impl::renew_loop() {
  const context& ctx = stop_keeping.get();
  time_point next_renewal = clk.now() + timing.renew_every;
  while (!ctx.done()) {
    if (!ctx.sleep_until(next_renewal)) break;
    const time_point sent = clk.now();
    // A failed renewal is tried again soon: fencing counts from the last success.
    next_renewal = renew() ? sent + timing.renew_every : clk.now() + std::min<duration>(timing.renew_every, 200ms);
  }
}

// The writer: outcomes and hand-backs, as soon as they wait, retried while
// the broker is away.
void consumer::impl::write_loop() {
  const context& ctx = stop_keeping.get();
  bool broker_ok = true;
  while (!ctx.done()) {
    {
      std::unique_lock lock(mu);
      const bool work = !outbox.empty() || !to_hand_back.empty();
      if (!work || !broker_ok) work_ready.wait_for(lock, broker_ok ? 1s : 100ms);
    }
    if (ctx.done()) break;
    broker_ok = flush(ctx);
  }
}

}  // namespace hourglass::fleet
