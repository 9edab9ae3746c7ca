#include "settlement.hpp"

#include "hourglass/jobs/job_state.hpp"

namespace hourglass::fleet::detail {

std::pair<std::string, std::string> state_field(outcome o) {
  return {"state", std::string(jobs::to_string(jobs::final_state(o)))};
}

field_list expired_fields(duration queued, expiry_stage stage) {
  return {state_field(outcome::deadline_exceeded),
          {"stage", std::string(to_string(stage))},
          {"queued_ms", ms_text(queued)}};
}

namespace {

using tally = settlement::tally;

settlement write(field_list f, status recorded, tally t = tally::none) {
  return {settlement::action::write, std::move(f), t, recorded};
}
settlement hand_back() { return {settlement::action::hand_back, {}, tally::none, {}}; }
settlement forget(tally t = tally::none, status recorded = {}) { return {settlement::action::forget, {}, t, recorded}; }

// A failed attempt of a job with a retry policy or an overall deadline: the
// retry rule decides between a retry (the finish schedules it, or records
// the fallback when it no longer fits on the broker's clock), the end of
// its budget (deadline_exceeded/retry, the error kept), or the error as is.
void plan_retry(const delivery_facts& d, const error_record& e, settlement& s) {
  const retry_facts& f = d.retry;
  if (f.policy.max_attempts <= 1 && f.deadline == never) return;
  const job_attempt_end end{status::error(), e.retryable, f.attempt, f.deadline, f.predicted_wait, f.min_budget};
  const job_retry_plan plan = plan_job_retry(f.policy, end, f.now, f.jitter);
  if (f.policy.max_attempts > 1) s.retry_verdict = plan.verdict;
  if (plan.verdict != job_retry_verdict::scheduled && plan.verdict != job_retry_verdict::no_budget) return;
  // Recorded at once (no_budget), or by the finish should the retry not fit.
  s.fields.front() = state_field(outcome::deadline_exceeded);
  s.fields.emplace_back("stage", std::string(to_string(expiry_stage::retry)));
  s.recorded = status::expired(expiry_stage::retry);
  if (plan.verdict == job_retry_verdict::scheduled) {
    const duration need = f.predicted_wait >= duration::max() - f.min_budget ? duration::max()
                                                                             : f.predicted_wait + f.min_budget;
    s.retry = job_queue::outcome::retry_request{plan.due - f.now, need, e.code, e.message, d.run.value_or(duration{})};
  }
}

}  // namespace

settlement settle(const delivery_facts& d, job_result<run_value>&& r,
                  const std::function<error_record(std::exception_ptr)>& describe) {
  // Late before a start: stage reclaim when its first worker died.
  const status late = status::expired(d.reclaimed ? expiry_stage::reclaim : expiry_stage::queue);
  settlement s;
  switch (r.st.code) {
    case outcome::ok: {
      run_value& v = *r.result;
      switch (v.k) {
        case run_value::kind::dead: return forget(tally::dead_lettered, status::error());
        case run_value::kind::cancelled:
          return forget(tally::cancelled_at_start, status::cancelled(cancel_cause::requested));
        case run_value::kind::skipped: return forget();
        case run_value::kind::expired: return write(expired_fields(d.queued, late.stage), late, tally::expired);
        case run_value::kind::ran: break;
      }
      if (v.out.wait) {
        s = write({}, status::ok());
        s.wait = std::move(v.out.wait);
        return s;
      }
      s = write({state_field(outcome::ok),
                 {"content_type", std::move(v.out.content_type)},
                 {"result", std::move(v.out.body)}},
                status::ok());
      break;
    }
    case outcome::error: {
      // The start script failed (the broker went away): no outcome from us;
      // the entry is reclaimed after a lease, by us or another.
      if (!d.started) return forget(tally::broker_error);
      const error_record e = describe(r.error);
      s = write({state_field(outcome::error),
                 {"error", e.code},
                 {"message", e.message},
                 {"http_status", std::to_string(e.http_status)}},
                status::error());
      plan_retry(d, e, s);
      break;
    }
    case outcome::deadline_exceeded:
      // This daemon's executor refused it (its own backlog): another daemon
      // may start it in time. Not the job's outcome.
      if (r.st.stage == expiry_stage::admission) return hand_back();
      if (r.st.stage == expiry_stage::queue) return write(expired_fields(d.queued, late.stage), late, tally::expired);
      s = write(expired_fields(d.queued, r.st.stage), r.st);
      break;
    case outcome::cancelled:
      // Stopped before it started, and not by a DELETE: the job is not done.
      if (!d.started && r.st.cause != cancel_cause::requested) return hand_back();
      s = write({state_field(outcome::cancelled), {"cause", std::string(to_string(r.st.cause))}}, r.st);
      break;
    case outcome::rejected:
      // It ran, and a call it made was refused by an open circuit breaker:
      // that is its outcome (running it again now would meet the same breaker).
      if (d.started && r.st.reason == reject_reason::circuit_open) {
        s = write({state_field(outcome::rejected), {"reason", std::string(to_string(r.st.reason))}}, r.st);
        break;
      }
      return hand_back();  // refused by the executor (full, shutting down): back to the fleet at once
    default: return hand_back();
  }
  if (r.st.code != outcome::deadline_exceeded) s.fields.emplace_back("queued_ms", ms_text(d.queued));
  if (d.run) s.fields.emplace_back("run_ms", ms_text(*d.run));
  if (r.timings.committed) s.fields.emplace_back("committed", "1");  // a change may have happened
  return s;
}

}  // namespace hourglass::fleet::detail
