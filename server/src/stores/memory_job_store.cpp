#include "stores/memory_job_store.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>

#include "core/child_jobs.hpp"
#include "core/core.hpp"
#include "core/handler_errors.hpp"
#include "core/job_input.hpp"
#include "core/job_store.hpp"
#include "core/person_wait.hpp"
#include "core/stream_output.hpp"
#include "schedules/schedules.hpp"
#include "stores/memory_fires.hpp"
#include "stores/memory_jobs.hpp"
#include "terms/terms.hpp"

namespace hourglass::server::detail {

namespace {

async_outcome outcome_of(job_result<handler_result>& r, const error_info& err) {
  async_outcome o;
  o.st = r.st;
  o.timings = r.timings;
  if (r.result) o.result = std::move(*r.result);
  if (r.st.code == outcome::error) {
    o.error_http = err.http_status;
    o.error_code = err.code;
    o.error_message = err.message;
  }
  return o;
}

}  // namespace

memory_job_store::~memory_job_store() {
  std::lock_guard lock(timers_->mu);
  timers_->open = false;
  for (const auto& [id, t] : timers_->by_job) c_.clk.cancel(t);
}

void memory_job_store::create(new_job job, callback<created> done) {
  const handler_entry& e = *job.in->entry;
  created out;
  if (std::optional<created> bad = idempotency_key_refusal(*job.in)) return done(std::move(*bad));
  const time_point now = c_.clk.now();
  if (!job.parent.empty()) {
    if (std::optional<created> refused = under_parent(job, now)) return done(std::move(*refused));
  }
  const time_point due = due_time(job, now);
  const bool delayed = due > now;
  if (delayed && (job.deadline <= due || job.deadline - due <= e.min_budget)) {
    out.verdict = created::kind::refused;  // it could never start in time
    out.refusal = status::expired(expiry_stage::admission);
    out.note = "its delay leaves less than its minimum budget before Job-Deadline";
    return done(std::move(out));
  }
  std::optional<parent_problem> parent_refused;
  bool duplicate = false;
  const std::optional<std::string> id = jobs_.create(
      e.name, now, job.retry.max_attempts, delayed ? std::optional<time_point>(due) : std::nullopt, job.freshness,
      job.deadline, job.parent, &parent_refused, job.in->idempotency_key.value_or(""), &duplicate);
  if (parent_refused) return done(parent_refusal(*parent_refused));
  if (duplicate) {  // one job per key: the first, as it is now
    out.verdict = created::kind::duplicate;
    const std::optional<async_record> first = jobs_.find(*id, now);
    out.job = first ? view_of(*first, now) : job_view{};
    out.job.id = *id;
    return done(std::move(out));
  }
  if (!id) {
    out.verdict = created::kind::refused;
    out.refusal = status::rejected(reject_reason::queue_full);
    out.note = "async job store full";
    return done(std::move(out));
  }
  // The body, aliased into the request the run holds anyway: no copy.
  jobs_.hold_payload(*id, std::shared_ptr<const std::string>(job.in, &job.in->body), job.in->content_type);
  auto run = std::make_shared<const job_run>(job_run{*id, std::move(job)});
  out.job.id = *id;
  if (delayed) {
    arm_attempt(run, due);
    out.job.state = jobs::to_string(jobs::job_state::scheduled);
    return done(std::move(out));
  }
  // A child's first attempt has no answer of its own (its parent's run asked for it).
  const bool answered = run->job.parent.empty();
  if (std::optional<status> refused = submit_attempt(run, run->job.headers_at,
                                                     answered ? run_start::answered : run_start::later)) {
    out.verdict = created::kind::refused;  // the executor refused it, and booked it
    out.refusal = *refused;
    out.booked = true;
    return done(std::move(out));
  }
  out.job.id = *id;
  out.job.state = jobs::to_string(jobs::job_state::queued);
  done(std::move(out));
}

void memory_job_store::find(std::string id, callback<found> done) {
  const time_point now = c_.clk.now();
  done(found_of(jobs_.find(id, now), now));
}

void memory_job_store::cancel(std::string id, cancel_cause cause, callback<found> done) {
  const time_point now = c_.clk.now();
  std::vector<memory_jobs::ended_in_table> ended;
  const std::optional<async_record> r = jobs_.cancel(id, now, cause, &ended);
  count_ended_in_table(ended);
  forget_ended_waits();
  resume_woken();  // a child cancelled on its own may end its parent's wait
  done(found_of(r, now));
}

void memory_job_store::signal(std::string id, std::string name, std::string payload, callback<signal_result> done) {
  const time_point now = c_.clk.now();
  const memory_jobs::signalled s = jobs_.signal(id, name, std::move(payload), now);
  signal_result out;
  if (s.verdict == memory_jobs::signalled::kind::not_found) return done(out);
  out.job = view_of(s.job, now);
  if (s.verdict == memory_jobs::signalled::kind::not_waiting) {
    out.verdict = signal_result::kind::not_waiting;
    return done(std::move(out));
  }
  out.verdict = signal_result::kind::delivered;
  {
    std::lock_guard lock(timers_->mu);
    const auto it = waiting_.find(id);
    if (it != waiting_.end() && timers_->open) {
      auto resumed = std::make_shared<job_run>(*it->second);
      resumed->job.deadline = s.job.deadline;  // moved on by the wait
      waiting_.erase(it);
      if (const auto t = timers_->by_job.find(id); t != timers_->by_job.end()) {
        c_.clk.cancel(t->second);
        timers_->by_job.erase(t);
      }
      (void)submit_attempt(resumed, now, run_start::resumed);
    }
  }
  done(std::move(out));
}

void memory_job_store::queue_state(queue_action a, callback<queue_answer> done) {
  queue_answer q;
  if (a != queue_action::look) {  // its jobs wait in the executor, which takes them as it can
    q.pause_unsupported = true;
    return done(std::move(q));
  }
  const time_point now = c_.clk.now();
  const memory_jobs::state_counts n = jobs_.counts(now);
  q.view.name = c_.opts.queue;
  q.view.store = "memory";
  q.view.queued = n.queued;
  q.view.running = n.running;
  q.view.scheduled = n.scheduled;
  q.view.waiting = n.waiting;
  q.view.retrying = n.retrying;
  if (n.oldest_queued) q.view.oldest_queued_age_ms = to_millis(elapsed(*n.oldest_queued, now));
  q.view.live_slots = c_.opts.workers;
  done(std::move(q));
}

void memory_job_store::list(list_request q, callback<job_page> done) {
  const time_point now = c_.clk.now();
  job_page page;
  const std::size_t limit = std::max<std::size_t>(q.limit, 1);
  if (!q.cursor.empty() && !is_job_id(q.cursor)) {  // this walk's cursors are job ids
    page.invalid_cursor = true;
    return done(std::move(page));
  }
  for (const async_record& r : jobs_.list(q.state, q.cursor, limit, now, q.handler)) {
    page.jobs.push_back(view_of(r, now));
  }
  // A full page may have more after it; the next walk from its last id says.
  if (page.jobs.size() == limit) page.next_cursor = page.jobs.back().id;
  done(std::move(page));
}

void memory_job_store::tick_schedule(const schedule& s, callback<schedule_tick> done) {
  done(fires_.tick(
      s,
      [&](const std::string& previous) {
        const std::optional<async_record> r = jobs_.find(previous, c_.clk.now());
        return r && !jobs::is_final(r->state);  // queued, scheduled or running still
      },
      [&](duration fresh_for) -> std::optional<std::string> {
        const handler_entry* e = c_.find_handler(s.opts.handler);
        if (e == nullptr) return std::nullopt;
        new_job job;
        job.in = fire_input(*e, s.opts.body, s.opts.content_type);
        job.headers_at = c_.clk.now();
        job.freshness = fresh_for;
        std::string id;
        create(std::move(job), [&](created c) {
          if (c.verdict == created::kind::accepted) id = c.job.id;  // else refused at admission, or the store is full
        });
        return id;
      }));
}

void memory_job_store::write_metrics(exposition_writer& w) const {
  w.gauge("hourglass_async_jobs_stored", "Async jobs held (queued, running, or finished within --async-ttl).",
          jobs_.size());
  w.gauge("hourglass_async_result_bytes", "Bytes of finished async jobs' results held (--async-max-result-bytes).",
          jobs_.result_bytes());
}

std::optional<created> memory_job_store::under_parent(new_job& job, time_point now) {
  const std::optional<memory_jobs::parent_facts> p = jobs_.parent_of_child(job.parent, now);
  if (!p) return parent_refusal(parent_problem::unknown);
  if (jobs::is_final(p->state)) return parent_refusal(parent_problem::finished);
  if (p->deadline == time_point::max()) return std::nullopt;
  const time_point cut = saturating_sub(p->deadline, c_.opts.call_reserve);
  job.deadline = std::min(job.deadline, cut);
  if (job.deadline <= now || job.deadline - now <= job.in->entry->min_budget) {
    created refused;
    refused.verdict = created::kind::refused;
    refused.refusal = status::expired(expiry_stage::admission);
    refused.note = "its parent has less than its minimum budget left";
    return refused;
  }
  return std::nullopt;
}

time_point memory_job_store::due_time(const new_job& job, time_point now) {
  if (job.not_before) {
    const auto wall = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
    if (*job.not_before <= wall) return now;
    const auto ahead = *job.not_before - wall;  // within --max-delay: fits in nanoseconds
    return saturating_add(now, std::chrono::duration_cast<duration>(ahead));
  }
  return saturating_add(job.headers_at, job.delay);
}

std::optional<status> memory_job_store::submit_attempt(const std::shared_ptr<const job_run>& run, time_point due,
                                                       run_start start) {
  const handler_entry& e = *run->job.in->entry;
  job_options o;
  o.metrics = e.metrics;
  o.admitted_later = start != run_start::answered;
  o.resumed = start == run_start::resumed;
  o.start_by = std::min(saturating_add(due, run->job.freshness), run->job.deadline);
  o.deadline = run->job.deadline;  // the whole job's: an attempt running into it ends deadline_exceeded/run
  // As a fleet judges it: at enqueue, at a start, for a retry; a resumed run has its wake's keep.
  o.min_budget = o.resumed ? duration::zero() : e.min_budget;
  o.run_limit = e.run_limit;
  o.idle_limit = run->job.in->idle_limit;
  job_ref ref = c_.jobs->submit(
      o,
      [this, run](const context& ctx) -> handler_result {
        const jobs::woke_by woke_by = jobs_.started(run->id, c_.clk.now());
        request_view v = run->job.in->view();
        v.job_id = run->id;
        if (v.idempotency_key.empty()) v.idempotency_key = run->id;  // every attempt sees the same key
        std::vector<child_outcome> children;
        std::optional<async_record> signalled;
        v.woke_by = jobs::to_string(woke_by);
        if (woke_by == jobs::woke_by::signal) {
          signalled = jobs_.find(run->id, c_.clk.now());
          if (signalled) {
            v.signal_name = signalled->signal;
            v.signal_payload = signalled->signal_payload;
          }
        } else if (woke_by != jobs::woke_by::none) {
          children = children_at_wake(c_, run->id);
          v.children = children;
        }
        handler_result r = run->job.in->entry->fn(ctx, v);
        check_wait(r);
        check_stored_result(r, c_.opts.max_result);
        return r;
      },
      [this, run](job_result<handler_result>&& r) noexcept { on_attempt_end(run, std::move(r)); });
  const after_submit next = jobs_.submitted(run->id, ref);
  if (next.cancel_now) ref.cancel(next.cause);
  return next.refused;
}

void memory_job_store::on_attempt_end(const std::shared_ptr<const job_run>& run,
                                      job_result<handler_result>&& r) noexcept {
  const handler_entry& e = *run->job.in->entry;
  if (r.st.is_ok() && r.result && r.result->wait) return wait_for_children(run, *r.result->wait);
  if (r.st.is_ok() && r.result && r.result->signal) return wait_for_signal(run, *r.result->signal);
  const error_info err = r.st.code == outcome::error ? describe_error(r.error) : error_info{};
  job_report rep{e.name, "async", duration::max(), r.timings, r.st, 0};
  if (r.st.code == outcome::error) rep.note = err.detail;
  c_.log_job(rep);
  const time_point now = c_.clk.now();
  async_outcome o = outcome_of(r, err);
  job_attempt_end end;
  end.st = r.st;
  end.retryable_error = err.retryable;
  if (run->job.retry.max_attempts > 1 && r.st.retryable()) {  // only then does the count matter: no copy per job
    const std::optional<async_record> rec = jobs_.find(run->id, now);
    end.attempts_done = rec ? std::max(rec->attempt, 1) : 1;
  }
  end.overall_deadline = run->job.deadline;
  end.min_budget = e.min_budget;  // in memory the executor's own queue predicts no wait here
  const job_retry_plan plan = plan_job_retry(run->job.retry, end, now, hourglass::detail::random_jitter_sample());
  if (run->job.retry.max_attempts > 1) c_.jobs->stats().on_job_retry(*e.metrics, plan.verdict);
  std::optional<cancel_cause> cancelled;  // a cancel reached the run: never retried, recorded cancelled (as in a fleet)
  if (plan.verdict == job_retry_verdict::scheduled &&
      jobs_.retry_scheduled(run->id, {r.st, o.error_code, o.error_message, r.timings.run_time}, plan.due, &cancelled)) {
    arm_attempt(run, plan.due);
    return;
  }
  if (plan.verdict == job_retry_verdict::no_budget) o.st = status::expired(expiry_stage::retry);  // error fields kept
  if (cancelled) o.st = status::cancelled(*cancelled);
  jobs_.finish(run->id, std::move(o), now);
  resume_woken();
}

void memory_job_store::count_ended_in_table(const std::vector<memory_jobs::ended_in_table>& ended) {
  for (const memory_jobs::ended_in_table& e : ended) {
    if (const handler_entry* h = c_.find_handler(e.handler)) {
      c_.jobs->stats().on_recorded(*h->metrics, e.st);
      c_.log_job({h->name, "async", duration::max(), {}, e.st, 0});
    }
  }
}

void memory_job_store::arm_attempt(const std::shared_ptr<const job_run>& run, time_point due) {
  std::lock_guard lock(timers_->mu);
  if (!timers_->open) return;
  timers_->by_job[run->id] = c_.clk.schedule(due, [this, run, due, timers = timers_]() noexcept {
    std::lock_guard gate(timers->mu);
    if (!timers->open) return;
    timers->by_job.erase(run->id);
    if (!jobs_.retry_due(run->id)) return;  // cancelled while it waited
    // A retry refused at admission ends with that refusal (on_attempt_end;
    // never retried, so never re-arming under this lock).
    (void)submit_attempt(run, due);
  });
}

found memory_job_store::found_of(const std::optional<async_record>& r, time_point now) {
  found f;
  if (!r) return f;
  f.verdict = found::kind::found;
  f.job = view_of(*r, now);
  return f;
}

std::unique_ptr<job_store> make_memory_job_store(core& c) { return std::make_unique<memory_job_store>(c); }

}  // namespace hourglass::server::detail
