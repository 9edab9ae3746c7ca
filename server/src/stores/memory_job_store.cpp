// The memory job store: async jobs in this process's memory (memory_jobs),
// run on its executor.
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

// Timers of attempts due later (retries, delayed jobs) on the daemon's
// clock, and whether the store still lives to act on them: the destructor cancels them all and shuts the gate, so a
// timer firing meanwhile does nothing.
// Recursive: an attempt submitted under it may end at once (refused), and
// its end may resume a waiting parent, which takes it again.
struct attempt_timers {
  std::recursive_mutex mu;
  bool open = true;
  std::map<std::string, timer_id> by_job;
};

class memory_job_store final : public job_store {
 public:
  explicit memory_job_store(core& c)
      : c_(c),
        jobs_(c.opts.async_max_jobs, c.opts.async_ttl,
              {.family = {c.opts.max_job_depth, c.opts.max_children},
               .idempotency_ttl = c.opts.idempotency_ttl,
               .max_result_bytes = c.opts.async_max_result_bytes,
               .max_scheduled = c.opts.async_max_scheduled}),
        timers_(std::make_shared<attempt_timers>()) {}

  ~memory_job_store() override {
    std::lock_guard lock(timers_->mu);
    timers_->open = false;
    for (const auto& [id, t] : timers_->by_job) c_.clk.cancel(t);
  }

  // Stores the job and submits its first attempt: it may start by
  // headers_at + freshness and runs at most its handler's run_limit.
  void create(new_job job, callback<created> done) override {
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
    if (std::optional<status> refused = submit_attempt(run, run->job.headers_at, /*later=*/!answered)) {
      out.verdict = created::kind::refused;  // the executor refused it, and booked it
      out.refusal = *refused;
      out.booked = true;
      return done(std::move(out));
    }
    out.job.id = *id;
    out.job.state = jobs::to_string(jobs::job_state::queued);
    done(std::move(out));
  }

  void find(std::string id, callback<found> done) override {
    const time_point now = c_.clk.now();
    done(found_of(jobs_.find(id, now), now));
  }

  void cancel(std::string id, cancel_cause cause, callback<found> done) override {
    const time_point now = c_.clk.now();
    std::vector<memory_jobs::ended_in_table> ended;
    const std::optional<async_record> r = jobs_.cancel(id, now, cause, &ended);
    count_ended_in_table(ended);
    forget_ended_waits();
    resume_woken();  // a child cancelled on its own may end its parent's wait
    done(found_of(r, now));
  }

  // A person's signal: the job runs again with the machine budget it had
  // left when it began to wait (its deadline moved on by the wait).
  void signal(std::string id, std::string name, std::string payload, callback<signal_result> done) override {
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
        (void)submit_attempt(resumed, now);
      }
    }
    done(std::move(out));
  }

  void queue_state(queue_action a, callback<queue_answer> done) override {
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

  void list(list_request q, callback<job_page> done) override {
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

  // A schedule's fires, settled in this process only (memory_fires): lost
  // on a restart as every memory job is.
  void tick_schedule(const schedule& s, callback<schedule_tick> done) override {
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

  // The table's size against its bound: what a soak watches for growth.
  void write_metrics(exposition_writer& w) const override {
    w.gauge("hourglass_async_jobs_stored", "Async jobs held (queued, running, or finished within --async-ttl).",
            jobs_.size());
    w.gauge("hourglass_async_result_bytes", "Bytes of finished async jobs' results held (--async-max-result-bytes).",
            jobs_.result_bytes());
  }

 private:
  // What every attempt of one job shares.
  struct job_run {
    std::string id;
    new_job job;
  };

  // A child job: its parent held and not finished, and its whole deadline
  // no later than the parent's less --call-reserve (the refusal otherwise).
  std::optional<created> under_parent(new_job& job, time_point now) {
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

  // When a new job's first attempt is due: after its Job-Delay, or at its
  // Job-Not-Before (a wall-clock time: how far ahead is read on the system
  // clock, the wait on the daemon's).
  static time_point due_time(const new_job& job, time_point now) {
    if (job.not_before) {
      const auto wall = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
      if (*job.not_before <= wall) return now;
      const auto ahead = *job.not_before - wall;  // within --max-delay: fits in nanoseconds
      return saturating_add(now, std::chrono::duration_cast<duration>(ahead));
    }
    return saturating_add(job.headers_at, job.delay);
  }

  // Submits an attempt that became due at `due`: it may start by due +
  // freshness (and before the job's overall deadline). Every attempt but
  // the one create() submits for a caller comes after the caller's answer:
  // admitted_later. The refusal when the executor refused a first attempt at
  // admission (its record is then gone: no 202 was sent); a retry refused so
  // is finished with it.
  std::optional<status> submit_attempt(const std::shared_ptr<const job_run>& run, time_point due, bool later = true) {
    const handler_entry& e = *run->job.in->entry;
    job_options o;
    o.metrics = e.metrics;
    o.admitted_later = later;
    o.start_by = std::min(saturating_add(due, run->job.freshness), run->job.deadline);
    o.deadline = run->job.deadline;  // the whole job's: an attempt running into it ends deadline_exceeded/run
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

  // An attempt ended: a retry when the policy and the job's deadline allow
  // one (job_retry.hpp), else the job's outcome.
  void on_attempt_end(const std::shared_ptr<const job_run>& run, job_result<handler_result>&& r) noexcept {
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
    std::optional<cancel_cause>
        cancelled;  // a cancel reached the run: never retried, recorded cancelled (as in a fleet)
    if (plan.verdict == job_retry_verdict::scheduled &&
        jobs_.retry_scheduled(run->id, {r.st, o.error_code, o.error_message, r.timings.run_time}, plan.due,
                              &cancelled)) {
      arm_attempt(run, plan.due);
      return;
    }
    if (plan.verdict == job_retry_verdict::no_budget) o.st = status::expired(expiry_stage::retry);  // error fields kept
    if (cancelled) o.st = status::cancelled(*cancelled);
    jobs_.finish(run->id, std::move(o), now);
    resume_woken();
  }

  // The run ended by waiting for its children: the worker is free; the job
  // runs again when they are done (a child's finish names it through
  // take_woken) or at its wake time, whichever comes first.
  void wait_for_children(const std::shared_ptr<const job_run>& run, fan_in f) {
    const time_point now = c_.clk.now();
    const time_point wake_at = wake_time(run->job.deadline, f, run->job.in->entry->min_budget);
    std::lock_guard lock(timers_->mu);
    cancel_cause cause = cancel_cause::requested;
    settle_wait(run, jobs_.wait_for_children(run->id, f, wake_at, now, &cause), now, cause, [&] {
      if (wake_at != time_point::max()) arm_wake(run, wake_at);
    });
  }

  // The run ended waiting for a person: the worker is free, the machine
  // budget stands still; the signal resumes it (signal()), or the wait's
  // own limit ends it, deadline_exceeded/human_wait.
  void wait_for_signal(const std::shared_ptr<const job_run>& run, const signal_wait& w) {
    const time_point now = c_.clk.now();
    const time_point limit_at = saturating_add(now, w.limit);
    std::lock_guard lock(timers_->mu);
    cancel_cause cause = cancel_cause::requested;
    settle_wait(run, jobs_.wait_for_signal(run->id, w.name, limit_at, now, &cause), now, cause,
                [&] { arm_human_limit(run, limit_at); });
  }

  // A run that ended waiting, as the table judged it (under timers_->mu):
  // waiting (kept to be resumed, its timer armed), resumed at once, or
  // ended cancelled (a DELETE came while it ran).
  void settle_wait(const std::shared_ptr<const job_run>& run, memory_jobs::wait_verdict v, time_point now,
                   cancel_cause cause, const std::function<void()>& arm_timer) {
    switch (v) {
      case memory_jobs::wait_verdict::waiting:
        waiting_[run->id] = run;
        arm_timer();
        return;
      case memory_jobs::wait_verdict::resume: (void)submit_attempt(run, now); return;
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

  // At its limit a person's wait ends the job, deadline_exceeded/human_wait
  // (counted and logged as its outcome: no executor run ends it).
  void arm_human_limit(const std::shared_ptr<const job_run>& run, time_point limit_at) {
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

  // At its wake time the wait ends with what has finished.
  void arm_wake(const std::shared_ptr<const job_run>& run, time_point at) {
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
      (void)submit_attempt(run, at);
    });
  }

  // Jobs a cancel ended in the table (scheduled, waiting): no executor run
  // ends them, so their outcomes are counted and logged here.
  void count_ended_in_table(const std::vector<memory_jobs::ended_in_table>& ended) {
    for (const memory_jobs::ended_in_table& e : ended) {
      if (const handler_entry* h = c_.find_handler(e.handler)) {
        c_.jobs->stats().on_recorded(*h->metrics, e.st);
        c_.log_job({h->name, "async", duration::max(), {}, e.st, 0});
      }
    }
  }

  // A parent's wait is over (its rule met, or its wake time come): children
  // still unfinished are cancelled now, cause parent. Nobody waits for them,
  // and one holding a worker would hold back the resumed run that needs it.
  void cancel_unfinished_children(const std::string& parent, time_point now) {
    const std::optional<async_record> p = jobs_.find(parent, now);
    if (!p) return;
    std::vector<memory_jobs::ended_in_table> ended;
    for (const std::string& child : p->children) (void)jobs_.cancel(child, now, cancel_cause::parent, &ended);
    count_ended_in_table(ended);
    if (!ended.empty()) forget_ended_waits();  // a child that waited itself (a fanout of fanouts) waits no more
  }

  // Submits the parents whose children's outcomes ended their wait.
  void resume_woken() {
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
      (void)submit_attempt(run, now);
    }
  }

  // Waits a cancel ended (the parent's own, or its parent's): nothing will resume them.
  void forget_ended_waits() {
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

  // At `due`, on the daemon's clock, the next attempt is submitted.
  void arm_attempt(const std::shared_ptr<const job_run>& run, time_point due) {
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

  static found found_of(const std::optional<async_record>& r, time_point now) {
    found f;
    if (!r) return f;
    f.verdict = found::kind::found;
    f.job = view_of(*r, now);
    return f;
  }

  core& c_;
  memory_jobs jobs_;
  memory_fires fires_{c_.clk};
  std::shared_ptr<attempt_timers> timers_;
  // Parents waiting for their children, to be submitted again (under timers_->mu).
  std::map<std::string, std::shared_ptr<const job_run>, std::less<>> waiting_;
};

}  // namespace

std::unique_ptr<job_store> make_memory_job_store(core& c) { return std::make_unique<memory_job_store>(c); }

}  // namespace hourglass::server::detail
