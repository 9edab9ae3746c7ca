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
  v.handler = std::string(j.field("handler"));
  v.state = std::string(j.state());
  if (!j.field("deliveries").empty()) v.deliveries = static_cast<unsigned>(millis_field(j.field("deliveries")));
  v.consumer = std::string(j.field("consumer"));  // the daemon that started it last
  v.parent = std::string(j.field("parent"));
  v.children = j.children;
  // Held until an outcome empties it; a dead job keeps it whole for replay.
  if (!v.finished() || v.in(jobs::job_state::dead))
    v.payload = shown_payload(j.field("payload"), j.field("content_type"));
  if (const int max_attempts = static_cast<int>(millis_field(j.field("max_attempts"))); max_attempts > 1) {
    // Attempts started so far: the broker's `attempt` is the current one's
    // number, not started yet while its deliveries are 0 (scheduled, queued).
    const int current = std::max(static_cast<int>(millis_field(j.field("attempt"))), 1);
    v.attempt = j.field("deliveries") == "0" ? current - 1 : current;
    v.attempts_left = std::max(max_attempts - *v.attempt, 0);
  }
  if (!j.field("attempts").empty()) v.attempts = attempts_of(j.field("attempts"));
  if (const std::string_view accepted = j.field("accepted_ms"); !accepted.empty()) {
    // The timeline, on the broker's clock from the job's acceptance.
    const double at = millis_field(accepted);
    v.accepted = true;
    if (const std::string_view f = j.field("freshness_ms"); !f.empty() && millis_field(f) >= 0) {
      v.freshness_ms = millis_field(f);
    }
    // On the timeline's whole-millisecond grid: its origin is an entry id's
    // millisecond (a floored clock), so the deadline's microseconds are
    // floored too; else a child accepted within its parent's millisecond reads
    // up to 1 ms past the parent's deadline less the reserve. Never later than
    // the deadline judged (in microseconds, by the scripts).
    if (!j.field("deadline_us").empty()) {
      v.deadline_at_ms = std::floor(millis_field(j.field("deadline_us")) / 1000) - at;
    }
    if (!j.field("due_ms").empty()) v.due_at_ms = millis_field(j.field("due_ms")) - at;
    // (an entry id may run ahead of TIME by a millisecond: never before acceptance)
    if (!j.field("started_ms").empty()) v.started_at_ms = std::max(millis_field(j.field("started_ms")) - at, 0.0);
    std::string_view starts = j.field("starts");  // "<ms> <consumer>\n" each
    while (!starts.empty()) {
      const std::string_view line = starts.substr(0, starts.find('\n'));
      starts.remove_prefix(std::min(line.size() + 1, starts.size()));
      const auto space = line.find(' ');
      if (space == std::string_view::npos) continue;
      v.starts.push_back(
          {std::max(millis_field(line.substr(0, space)) - at, 0.0), std::string(line.substr(space + 1))});
    }
  }
  if (v.in(jobs::job_state::scheduled) && !j.field("due_ms").empty()) {
    const double due = millis_field(j.field("due_ms"));
    v.due_in_ms = std::max(due - static_cast<double>(broker_now_ms), 0.0);
  }
  if (v.in(jobs::job_state::waiting)) {
    v.waiting_for = std::string(j.field("wait_rule"));
    if (!j.field("wake_ms").empty()) {
      v.wake_in_ms = std::max(millis_field(j.field("wake_ms")) - static_cast<double>(broker_now_ms), 0.0);
    }
  }
  if (!j.field("wakes").empty()) v.wakes = static_cast<int>(millis_field(j.field("wakes")));
  v.woke_by = std::string(j.field("woke_by"));
  if (const std::string_view rule = j.field("wait_rule"); rule.starts_with("signal:")) {
    // Both clocks, on the broker's: the person's wait (human_since_us while
    // it waits; the waits before summed) and the machine's budget, which
    // stands still while it waits.
    const bool waiting = v.in(jobs::job_state::waiting);
    const double since_ms = millis_field(j.field("human_since_us")) / 1000;
    const double now_ms = static_cast<double>(broker_now_ms);
    const double waited_ms = millis_field(j.field("human_waited_us")) / 1000 +
                             (waiting ? std::max(now_ms - since_ms, 0.0) : 0.0);
    v.human_wait_used_ms = waited_ms;
    if (waiting && !j.field("wake_ms").empty()) {
      v.human_wait_left_ms = std::max(millis_field(j.field("wake_ms")) - now_ms, 0.0);
      v.wake_in_ms.reset();
    }
    if (const std::string_view accepted = j.field("accepted_ms"); !accepted.empty() && !v.finished()) {
      v.machine_used_ms = std::max(now_ms - millis_field(accepted) - waited_ms, 0.0);
      if (!j.field("deadline_us").empty()) {
        v.machine_left_ms = std::max(millis_field(j.field("deadline_us")) / 1000 - (waiting ? since_ms : now_ms), 0.0);
      }
    }
  }
  if (!v.finished()) {
    v.cancel_requested = j.field("cancel_requested") == "1";
    return v;
  }
  v.stage = std::string(j.field("stage"));
  v.cause = std::string(j.field("cause"));
  v.reason = std::string(j.field("reason"));
  if (v.in(jobs::job_state::error) || v.stage == "retry") {  // retry: the last attempt's error, kept
    v.error = std::string(j.field("error"));
    v.message = std::string(j.field("message"));
    v.http_status = static_cast<unsigned>(millis_field(j.field("http_status")));
  }
  if (!j.field("queued_ms").empty()) v.queued_ms = millis_field(j.field("queued_ms"));
  if (!j.field("run_ms").empty()) v.run_ms = millis_field(j.field("run_ms"));
  v.committed = j.field("committed") == "1";
  if (v.in(jobs::job_state::ok)) {
    v.content_type = std::string(j.field("content_type"));
    v.result = std::string(j.field("result"));
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
