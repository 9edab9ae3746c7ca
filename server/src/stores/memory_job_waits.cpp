// The memory job store's waits (memory_job_store.hpp): a run that ended
// waiting for its children or for a person frees its worker; the table
// (memory_jobs) judges the wait, and these keep its run until it resumes,
// arm its wake time or its limit, and submit it again when its children,
// its signal or its timer end the wait.
#include <mutex>

#include "core/child_jobs.hpp"
#include "core/job_input.hpp"
#include "stores/memory_job_store.hpp"

namespace hourglass::server::detail {

void memory_job_store::wait_for_children(const std::shared_ptr<const job_run>& run, fan_in f) {
  const time_point now = c_.clk.now();
  const time_point wake_at = wake_time(run->job.deadline, f, run->job.in->entry->min_budget);
  std::lock_guard lock(timers_->mu);
  cancel_cause cause = cancel_cause::requested;
  settle_wait(run, jobs_.wait_for_children(run->id, f, wake_at, now, &cause), now, cause, [&] {
    if (wake_at != time_point::max()) arm_wake(run, wake_at);
  });
}

void memory_job_store::wait_for_signal(const std::shared_ptr<const job_run>& run, const signal_wait& w) {
  const time_point now = c_.clk.now();
  const time_point limit_at = saturating_add(now, w.limit);
  std::lock_guard lock(timers_->mu);
  cancel_cause cause = cancel_cause::requested;
  settle_wait(run, jobs_.wait_for_signal(run->id, w.name, limit_at, now, &cause), now, cause,
              [&] { arm_human_limit(run, limit_at); });
}

void memory_job_store::settle_wait(const std::shared_ptr<const job_run>& run, memory_jobs::wait_verdict v,
                                   time_point now, cancel_cause cause, const std::function<void()>& arm_timer) {
  switch (v) {
    case memory_jobs::wait_verdict::waiting:
      waiting_[run->id] = run;
      arm_timer();
      return;
    case memory_jobs::wait_verdict::resume: (void)submit_attempt(run, now, run_start::resumed); return;
    case memory_jobs::wait_verdict::cancelled: {
      async_outcome o;
      o.st = status::cancelled(cause);
      jobs_.finish(run->id, std::move(o), now);
      resume_woken();
      return;
    }
    case memory_jobs::wait_verdict::gone: return;
  }
}

void memory_job_store::arm_human_limit(const std::shared_ptr<const job_run>& run, time_point limit_at) {
  if (!timers_->open) return;
  timers_->by_job[run->id] = c_.clk.schedule(limit_at, [this, run, limit_at, timers = timers_]() noexcept {
    std::lock_guard gate(timers->mu);
    if (!timers->open) return;
    // Only if it ends here: a signal that came first resumes it from
    // waiting_, and a later wait has a timer (and entry) of its own.
    const std::optional<async_record> r = jobs_.human_wait_over(run->id, limit_at);
    if (!r) return;
    timers->by_job.erase(run->id);
    waiting_.erase(run->id);
    const handler_entry& e = *run->job.in->entry;
    c_.jobs->stats().on_recorded(*e.metrics, r->st);
    c_.log_job({e.name, "async", duration::max(), {}, r->st, 0});
    resume_woken();  // a parent waiting for it
  });
}

void memory_job_store::arm_wake(const std::shared_ptr<const job_run>& run, time_point at) {
  if (!timers_->open) return;
  timers_->by_job[run->id] = c_.clk.schedule(at, [this, run, at, timers = timers_]() noexcept {
    std::lock_guard gate(timers->mu);
    if (!timers->open) return;
    // Only if it wakes here: children that met its rule first resume it
    // from waiting_, and a later wait has a timer (and entry) of its own.
    if (!jobs_.wake(run->id, at)) return;
    timers->by_job.erase(run->id);
    waiting_.erase(run->id);
    cancel_unfinished_children(run->id, at);
    (void)submit_attempt(run, at, run_start::resumed);
  });
}

void memory_job_store::cancel_unfinished_children(const std::string& parent, time_point now) {
  const std::optional<async_record> p = jobs_.find(parent, now);
  if (!p) return;
  std::vector<memory_jobs::ended_in_table> ended;
  for (const std::string& child : p->children) (void)jobs_.cancel(child, now, cancel_cause::parent, &ended);
  count_ended_in_table(ended);
  if (!ended.empty()) forget_ended_waits();  // a child that waited itself (a fanout of fanouts) waits no more
}

void memory_job_store::resume_woken() {
  const std::vector<std::string> woken = jobs_.take_woken();
  if (woken.empty()) return;
  const time_point now = c_.clk.now();
  std::lock_guard lock(timers_->mu);
  if (!timers_->open) return;
  for (const std::string& id : woken) {
    const auto it = waiting_.find(id);
    if (it == waiting_.end()) continue;
    const std::shared_ptr<const job_run> run = it->second;
    waiting_.erase(it);
    if (const auto t = timers_->by_job.find(id); t != timers_->by_job.end()) {
      c_.clk.cancel(t->second);
      timers_->by_job.erase(t);
    }
    cancel_unfinished_children(id, now);  // (first n, first success: the rest are not waited for)
    (void)submit_attempt(run, now, run_start::resumed);
  }
}

void memory_job_store::forget_ended_waits() {
  const time_point now = c_.clk.now();
  std::lock_guard lock(timers_->mu);
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const std::optional<async_record> r = jobs_.find(it->first, now);
    if (r && !jobs::is_final(r->state)) {  // waiting, or woken and about to be resumed
      ++it;
      continue;
    }
    if (const auto t = timers_->by_job.find(it->first); t != timers_->by_job.end()) {
      c_.clk.cancel(t->second);
      timers_->by_job.erase(t);
    }
    it = waiting_.erase(it);
  }
}

}  // namespace hourglass::server::detail
