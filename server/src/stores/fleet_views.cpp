#include "stores/fleet_views.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "hourglass/admission_policy.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {

namespace {

double millis_field(std::string_view text) {
  try {
    return text.empty() ? 0.0 : std::stod(std::string(text));
  } catch (const std::exception&) {
    return 0.0;
  }
}

// The earlier attempts of a retried job: the JSON array finish.lua keeps.
std::vector<attempt_view> attempts_of(std::string_view text) {
  std::vector<attempt_view> out;
  const std::optional<boost::json::value> doc = support::parse_json(text);
  if (!doc || !doc->is_array()) return out;
  const auto str = [](const boost::json::object& o, std::string_view k) {
    const boost::json::value* v = o.if_contains(k);
    return v != nullptr && v->is_string() ? std::string(v->get_string()) : std::string();
  };
  for (const boost::json::value& a : doc->get_array()) {
    if (!a.is_object()) continue;
    const boost::json::object& o = a.get_object();
    attempt_view v;
    v.outcome = str(o, "outcome");
    v.stage = str(o, "stage");
    v.error = str(o, "error");
    v.message = str(o, "message");
    if (const boost::json::value* ms = o.if_contains("run_ms"); ms != nullptr && ms->is_number())
      v.run_ms = ms->to_number<double>();
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace

job_view view_of(const fleet::fleet_job& j, std::int64_t broker_now_ms) {
  job_view v;
  v.id = j.id;
  v.handler = j.handler;
  v.state = j.state;
  v.deliveries = j.deliveries;
  v.consumer = j.consumer;  // the daemon that started it last
  v.parent = j.parent;
  v.children = j.children;
  // Held until an outcome empties it; a dead job keeps it whole for replay.
  if (!v.finished() || v.in(jobs::job_state::dead)) v.payload = shown_payload(j.payload, j.content_type);
  if (j.max_attempts > 1) {
    // Attempts started so far: the broker's `attempt` is the current one's
    // number, not started yet while its deliveries are 0 (scheduled, queued).
    v.attempt = j.deliveries == 0u ? j.attempt - 1 : j.attempt;
    v.attempts_left = std::max(j.max_attempts - *v.attempt, 0);
  }
  if (!j.attempts_json.empty()) v.attempts = attempts_of(j.attempts_json);
  if (j.accepted_ms) {
    // The timeline, on the broker's clock from the job's acceptance.
    const double at = *j.accepted_ms;
    v.accepted = true;
    if (j.freshness_ms && *j.freshness_ms >= 0) v.freshness_ms = *j.freshness_ms;
    // On the timeline's whole-millisecond grid: its origin is an entry id's
    // millisecond (a floored clock), so the deadline's microseconds are
    // floored too; else a child accepted within its parent's millisecond reads
    // up to 1 ms past the parent's deadline less the reserve. Never later than
    // the deadline judged (in microseconds, by the scripts).
    if (j.deadline_us) v.deadline_at_ms = std::floor(*j.deadline_us / 1000) - at;
    if (j.due_ms) v.due_at_ms = *j.due_ms - at;
    // (an entry id may run ahead of TIME by a millisecond: never before acceptance)
    if (j.started_ms) v.started_at_ms = std::max(*j.started_ms - at, 0.0);
    std::string_view starts = j.starts;  // "<ms> <consumer>\n" each
    while (!starts.empty()) {
      const std::string_view line = starts.substr(0, starts.find('\n'));
      starts.remove_prefix(std::min(line.size() + 1, starts.size()));
      const auto space = line.find(' ');
      if (space == std::string_view::npos) continue;
      v.starts.push_back(
          {std::max(millis_field(line.substr(0, space)) - at, 0.0), std::string(line.substr(space + 1))});
    }
  }
  const double now_ms = static_cast<double>(broker_now_ms);
  if (v.in(jobs::job_state::scheduled) && j.due_ms) v.due_in_ms = std::max(*j.due_ms - now_ms, 0.0);
  if (v.in(jobs::job_state::waiting)) {
    v.waiting_for = j.wait_rule;
    if (j.wake_ms) v.wake_in_ms = std::max(*j.wake_ms - now_ms, 0.0);
  }
  v.wakes = j.wakes;
  v.woke_by = j.woke_by;
  if (j.wait_rule.starts_with("signal:")) {
    // Both clocks, on the broker's: the person's wait (human_since_us while
    // it waits; the waits before summed) and the machine's budget, which
    // stands still while it waits.
    const bool waiting = v.in(jobs::job_state::waiting);
    const double since_ms = j.human_since_us.value_or(0) / 1000;
    const double waited_ms = j.human_waited_us.value_or(0) / 1000 + (waiting ? std::max(now_ms - since_ms, 0.0) : 0.0);
    v.human_wait_used_ms = waited_ms;
    if (waiting && j.wake_ms) {
      v.human_wait_left_ms = std::max(*j.wake_ms - now_ms, 0.0);
      v.wake_in_ms.reset();
    }
    if (j.accepted_ms && !v.finished()) {
      v.machine_used_ms = std::max(now_ms - *j.accepted_ms - waited_ms, 0.0);
      if (j.deadline_us) v.machine_left_ms = std::max(*j.deadline_us / 1000 - (waiting ? since_ms : now_ms), 0.0);
    }
  }
  if (!v.finished()) {
    v.cancel_requested = j.cancel_requested;
    return v;
  }
  v.stage = j.stage;
  v.cause = j.cause;
  v.reason = j.reason;
  if (v.in(jobs::job_state::error) || v.stage == "retry") {  // retry: the last attempt's error, kept
    v.error = j.error;
    v.message = j.message;
    v.http_status = j.http_status;
  }
  v.queued_ms = j.queued_ms;
  v.run_ms = j.run_ms;
  v.committed = j.committed;
  if (v.in(jobs::job_state::ok)) {
    v.content_type = j.content_type;
    v.result = j.result;
  }
  return v;
}

created created_of(const fleet::enqueued& r, duration asked, duration left) {
  using verdict = fleet::enqueued::kind;
  created out;
  switch (r.verdict) {
    case verdict::paused:
      out.verdict = created::kind::refused;
      out.refusal = status::rejected(reject_reason::queue_paused);
      out.note = "the queue is paused (--refuse-while-paused)";
      return out;
    case verdict::no_parent: return parent_refusal(parent_problem::unknown);
    case verdict::parent_finished: return parent_refusal(parent_problem::finished);
    case verdict::too_deep: return parent_refusal(parent_problem::too_deep);
    case verdict::too_many_children: return parent_refusal(parent_problem::too_many_children);
    case verdict::refused:
      out.verdict = created::kind::refused;
      out.refusal = status::expired(expiry_stage::admission);
      out.budget = asked;
      out.remaining = left;
      return out;
    case verdict::accepted:
    case verdict::duplicate: break;
  }
  out.verdict = r.verdict == verdict::accepted ? created::kind::accepted : created::kind::duplicate;
  out.job.id = r.id;
  out.job.state = jobs::to_string(r.scheduled ? jobs::job_state::scheduled : jobs::job_state::queued);
  return out;
}

queue_view view_of(const fleet::queue_state& s, std::string name) {
  using std::chrono::milliseconds;
  queue_view q;
  q.name = std::move(name);
  q.store = "fleet";
  const std::int64_t now_ms = s.broker_now_us / 1000;
  if (s.paused_since_ms) q.paused_since = support::wall_time{milliseconds(*s.paused_since_ms)};
  q.running = s.pending;
  q.queued = s.length > s.pending ? s.length - s.pending : 0;
  // A waiting job sits in the delayed set (at its wake time or limit) but is not scheduled to run.
  q.waiting = std::min(s.waiting, s.scheduled);
  q.scheduled = s.scheduled - q.waiting;
  q.dead = s.dead_letters;
  q.retrying = s.retrying;
  q.retrying_partial = !s.retrying_exact;
  q.totals = s.totals;
  // An entry id is "<ms the broker stamped at enqueue>-<seq>".
  if (!s.oldest_waiting.empty()) {
    const double enqueued_ms = millis_field(s.oldest_waiting.substr(0, s.oldest_waiting.find('-')));
    q.oldest_queued_age_ms = std::max(static_cast<double>(now_ms) - enqueued_ms, 0.0);
  }
  for (const fleet::queue_state::consumer& c : s.consumers) {
    queue_view::consumer k{c.name, c.slots, c.held, std::nullopt};
    if (c.lease_expiry_ms) {
      k.lease_left_ms = static_cast<double>(*c.lease_expiry_ms - now_ms);
      if (*c.lease_expiry_ms > now_ms) q.live_slots += c.slots;
      k.draining = c.slots == 0 && *c.lease_expiry_ms > now_ms;  // renewing, offering no slots: a drain
    }
    q.consumers.push_back(std::move(k));
  }
  q.mean_run_ms = std::chrono::duration<double, std::milli>(s.mean_run).count();
  q.predicts_wait = true;
  const duration wait = predicted_wait({q.queued, q.live_slots, s.mean_run});
  if (wait != duration::max()) q.predicted_wait_ms = std::chrono::duration<double, std::milli>(wait).count();
  return q;
}

}  // namespace hourglass::server::detail
