// A memory job's record as the job object of the API (view_of,
// memory_jobs.hpp): both clocks of a person's wait, a retried job's
// attempts, the fields of its outcome.
#include <algorithm>
#include <string>

#include "core/person_wait.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "stores/memory_jobs.hpp"

namespace hourglass::server::detail {

using jobs::job_state;

job_view view_of(const async_record& r, time_point now) {
  job_view j;
  j.id = r.id;
  j.handler = r.handler;
  j.state = std::string(jobs::to_string(r.state));
  j.age_ms = to_millis(elapsed(r.created, now));
  j.accepted = true;
  const auto since_accepted = [&](time_point t) { return to_millis(elapsed(r.created, t)); };
  if (r.freshness != duration::max()) j.freshness_ms = to_millis(r.freshness);
  if (r.deadline != time_point::max()) j.deadline_at_ms = since_accepted(r.deadline);
  j.parent = r.parent;
  j.children = r.children;
  if (r.payload) j.payload = shown_payload(*r.payload, r.payload_type);
  if (r.due > r.created) j.due_at_ms = since_accepted(r.due);
  if (r.started != time_point{}) j.started_at_ms = since_accepted(r.started);
  if (jobs::is_final(r.state)) j.finished_at_ms = since_accepted(r.finished_at);
  if (r.max_attempts > 1) {
    j.attempt = r.attempt;
    j.attempts_left = std::max(r.max_attempts - r.attempt, 0);
  }
  for (const attempt_summary& a : r.attempts) {
    attempt_view v;
    v.outcome = std::string(to_string(a.st.code));
    if (a.st.code == outcome::deadline_exceeded) v.stage = std::string(to_string(a.st.stage));
    v.error = a.error_code;
    v.message = a.error_message;
    v.run_ms = to_millis(a.run_time);
    j.attempts.push_back(std::move(v));
  }
  if (r.state == job_state::scheduled) j.due_in_ms = to_millis(r.due > now ? r.due - now : duration::zero());
  if (r.state == job_state::waiting && r.wait) {
    j.waiting_for = fan_in_text(*r.wait);
    if (r.wake_at != time_point::max()) j.wake_in_ms = to_millis(r.wake_at > now ? r.wake_at - now : duration::zero());
  }
  if (!r.signal.empty()) {  // both clocks: the machine's budget and the person's wait
    const bool waiting = r.state == job_state::waiting && !r.wait;
    const time_point until = jobs::is_final(r.state) ? r.finished_at : now;
    const duration waited = r.human_waited + (waiting ? elapsed(r.human_since, now) : duration::zero());
    if (waiting) {
      j.waiting_for = signal_rule(r.signal);
      if (r.human_limit_at != time_point::max()) j.human_wait_left_ms = to_millis(remaining(r.human_limit_at, now));
    }
    j.human_wait_used_ms = to_millis(waited);
    j.machine_used_ms = to_millis(elapsed(r.created, until) - std::min(waited, elapsed(r.created, until)));
    if (r.deadline != time_point::max() && !jobs::is_final(r.state)) {
      j.machine_left_ms = to_millis(remaining(r.deadline, waiting ? r.human_since : now));
    }
  }
  j.wakes = r.wakes;
  j.woke_by = std::string(jobs::to_string(r.woke_by));
  if (!jobs::is_final(r.state)) {
    j.cancel_requested = r.cancel_requested;
    return j;
  }
  const status& st = r.st;
  if (st.code == outcome::deadline_exceeded) j.stage = to_string(st.stage);
  if (st.code == outcome::cancelled) j.cause = to_string(st.cause);
  if (st.code == outcome::rejected) j.reason = to_string(st.reason);
  if (st.code == outcome::error || (st.code == outcome::deadline_exceeded && st.stage == expiry_stage::retry)) {
    j.error = r.error_code;  // retry: the last attempt's error, kept
    j.message = r.error_message;
    j.http_status = r.error_http;
  }
  j.queued_ms = to_millis(r.timings.queue_delay);
  if (r.timings.ran) j.run_ms = to_millis(r.timings.run_time);
  j.committed = r.timings.committed;
  if (st.is_ok()) {
    j.content_type = r.result.content_type;
    j.result = r.result.body;
  }
  return j;
}

}  // namespace hourglass::server::detail
