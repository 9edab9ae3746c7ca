#include "core/job_view.hpp"

#include <algorithm>
#include <cmath>

#include "hourglass/support/json.hpp"
#include "hourglass/utf8.hpp"

namespace hourglass::server::detail {

job_timings job_view::timings() const {
  // Nearest nanosecond: a memory job's exact timings survive the trip through milliseconds.
  const auto ms = [](double v) { return duration(std::llround(v * 1e6)); };
  job_timings t;
  t.queue_delay = ms(queued_ms.value_or(0));
  t.ran = run_ms.has_value();
  if (t.ran) t.run_time = ms(*run_ms);
  t.committed = committed;
  return t;
}

payload_view shown_payload(std::string_view payload, std::string_view content_type) {
  payload_view p;
  p.bytes = payload.size();
  p.content_type = std::string(content_type);
  const std::size_t limit = std::min(payload.size(), payload_shown_bytes);
  // Text cut inside a character leaves that character out whole; bytes
  // that are not UTF-8 are shown as they are (base64 in the JSON).
  std::size_t at = 0;
  while (at < limit) {
    const std::size_t n = utf8_sequence_length(payload, at);
    if (n == 0) {
      at = limit;
      break;
    }
    if (at + n > limit) break;
    at += n;
  }
  const std::string_view shown = payload.substr(0, at);
  p.shown = std::string(shown);
  return p;
}

namespace {

// "payload": {"bytes": N, "content_type": ..., "text"|"base64": ..., ["truncated": true]}
std::string payload_json(const payload_view& p) {
  support::json_object o;
  o.add("bytes", p.bytes).add("content_type", p.content_type);
  if (valid_utf8(p.shown)) {
    o.add("text", p.shown);
  } else {
    o.add("base64", support::base64(p.shown));
  }
  if (p.shown.size() < p.bytes) o.add("truncated", true);
  return o.str();
}

// "attempts": [{"outcome": "error", "error": ..., "message": ..., "run_ms": ...}, ...]
std::string attempts_json(const std::vector<attempt_view>& attempts) {
  support::json_writer w;
  w.begin_array();
  for (const attempt_view& a : attempts) {
    w.begin_object().member("outcome", a.outcome);
    if (!a.stage.empty()) w.member("stage", a.stage);
    if (!a.error.empty()) w.member("error", a.error).member("message", a.message);
    w.member("run_ms", a.run_ms).end_object();
  }
  w.end_array();
  return w.take();
}

std::string ids_json(const std::vector<std::string>& ids) {
  support::json_writer w;
  w.begin_array();
  for (const std::string& id : ids) w.value(id);
  w.end_array();
  return w.take();
}

}  // namespace

std::string timeline_json(const job_view& j) {
  support::json_writer w;
  w.begin_array();
  w.begin_object().member("event", "accepted").member("at_ms", 0.0);
  if (j.freshness_ms) w.member("freshness_ms", *j.freshness_ms);
  if (j.deadline_at_ms) w.member("deadline_at_ms", *j.deadline_at_ms);
  w.end_object();
  // Only the last attempts are kept: the first listed is attempt
  // (ended so far - listed + 1); ended so far = started, less a running one.
  const int ended = j.attempt ? *j.attempt - (j.in(jobs::job_state::running) ? 1 : 0)
                              : static_cast<int>(j.attempts.size());
  int n = std::max(ended - static_cast<int>(j.attempts.size()), 0);
  for (const attempt_view& a : j.attempts) {
    w.begin_object().member("event", "attempt_ended").member("attempt", ++n).member("outcome", a.outcome);
    if (!a.stage.empty()) w.member("stage", a.stage);
    w.member("run_ms", a.run_ms).end_object();
  }
  const double due = j.due_at_ms.value_or(0);
  // An earlier attempt's start is not this one's; a job that expired
  // waiting (stage queue: judged stale as it was handed to a worker) never started.
  const bool started = j.started_at_ms && *j.started_at_ms >= due && !(j.finished() && j.stage == "queue");
  // Every delivery but the one `started` shows: daemons that took it and
  // died or drained, and the starts of earlier attempts.
  const std::size_t shown_apart = started && !j.starts.empty() ? 1 : 0;
  for (std::size_t i = 0; i + shown_apart < j.starts.size(); ++i) {
    w.begin_object().member("event", "delivered").member("at_ms", j.starts[i].at_ms);
    w.member("consumer", j.starts[i].consumer).end_object();
  }
  if (j.due_at_ms && *j.due_at_ms > 0) w.begin_object().member("event", "due").member("at_ms", due).end_object();
  if (started) {
    const double waited = std::max(*j.started_at_ms - due, 0.0);
    w.begin_object().member("event", "started").member("at_ms", *j.started_at_ms).member("waited_ms", waited);
    if (j.freshness_ms) w.member("freshness_left_ms", *j.freshness_ms - waited);
    if (j.deliveries) w.member("delivery", *j.deliveries);
    if (!j.consumer.empty()) w.member("consumer", j.consumer);
    w.end_object();
  }
  if (j.finished()) {
    w.begin_object().member("event", "finished").member("state", j.state);
    // When it ended: as recorded, or from its start and run time, or, expired unstarted, from its wait.
    if (j.finished_at_ms) {
      w.member("at_ms", *j.finished_at_ms);
    } else if (started && j.run_ms) {
      w.member("at_ms", *j.started_at_ms + *j.run_ms);
    } else if (!started && j.queued_ms && j.in(jobs::job_state::deadline_exceeded)) {
      w.member("at_ms", due + *j.queued_ms);
    }
    if (!j.stage.empty()) w.member("stage", j.stage);
    if (j.queued_ms) w.member("queued_ms", *j.queued_ms);
    if (j.run_ms) w.member("run_ms", *j.run_ms);
    w.end_object();
  }
  w.end_array();
  return w.take();
}

std::string job_json(const job_view& j, job_detail detail) {
  support::json_object o;
  o.add("id", j.id).add("handler", j.handler).add("state", j.state);
  if (j.deliveries) o.add("deliveries", *j.deliveries);
  if (!j.consumer.empty()) o.add("consumer", j.consumer);
  if (!j.parent.empty()) o.add("parent", j.parent);
  if (!j.children.empty()) o.add_raw("children", ids_json(j.children));
  if (j.attempt) o.add("attempt", *j.attempt).add("attempts_left", j.attempts_left.value_or(0));
  if (!j.attempts.empty()) o.add_raw("attempts", attempts_json(j.attempts));
  if (j.due_in_ms) o.add("due_in_ms", *j.due_in_ms);
  if (!j.waiting_for.empty()) o.add("waiting_for", j.waiting_for);
  if (j.wake_in_ms) o.add("wake_in_ms", *j.wake_in_ms);
  if (j.wakes > 0) o.add("wakes", j.wakes).add("woke_by", j.woke_by);
  if (j.machine_used_ms) o.add("machine_used_ms", *j.machine_used_ms);
  if (j.machine_left_ms) o.add("machine_left_ms", *j.machine_left_ms);
  if (j.human_wait_used_ms) o.add("human_wait_used_ms", *j.human_wait_used_ms);
  if (j.human_wait_left_ms) o.add("human_wait_left_ms", *j.human_wait_left_ms);
  if (j.payload && detail == job_detail::listed) o.add("payload_bytes", j.payload->bytes);
  if (j.payload && detail == job_detail::whole) o.add_raw("payload", payload_json(*j.payload));
  if (!j.finished()) {
    if (j.cancel_requested) o.add("cancel_requested", true);
    if (j.age_ms) o.add("age_ms", *j.age_ms);
    if (j.accepted) o.add_raw("timeline", timeline_json(j));  // last: the fields above read as before
    return o.str();
  }
  if (j.in(jobs::job_state::deadline_exceeded)) o.add("stage", j.stage);
  if (j.in(jobs::job_state::cancelled) || j.in(jobs::job_state::dead)) o.add("cause", j.cause);
  if (j.in(jobs::job_state::rejected)) o.add("reason", j.reason);  // circuit_open: a call it made
  // deadline_exceeded/retry keeps the error of its last attempt
  if (j.in(jobs::job_state::error) || (j.in(jobs::job_state::deadline_exceeded) && !j.error.empty()))
    o.add("error", j.error).add("message", j.message).add("http_status", j.http_status.value_or(0));
  if (j.queued_ms) o.add("queued_ms", *j.queued_ms);
  if (j.run_ms) o.add("run_ms", *j.run_ms);
  if (j.age_ms) o.add("age_ms", *j.age_ms);
  if (j.committed) o.add("committed", true);
  if (j.in(jobs::job_state::ok)) {
    o.add("content_type", j.content_type);
    if (detail == job_detail::listed) {
      o.add("result_bytes", j.result.size());  // a page of results would be as big as all of them
    } else if (valid_utf8(j.result)) {
      o.add("result", j.result);
    } else {
      o.add("result_base64", support::base64(j.result));
    }
  }
  if (j.accepted) o.add_raw("timeline", timeline_json(j));  // last: the fields above read as before
  return o.str();
}

}  // namespace hourglass::server::detail
