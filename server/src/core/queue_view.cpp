#include "core/queue_view.hpp"

#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {

namespace {

// {"finished": {"ok": n, ...}, "expired": {"queue": n, ...}, "retries": n, ...}
// from counters named "finished:ok", "expired:queue", "retries", ...
template <class Value>
void grouped(support::json_writer& w, const std::vector<std::pair<std::string, Value>>& named) {
  w.begin_object();
  for (const std::string_view group : {"finished", "expired"}) {
    w.key(group).begin_object();
    for (const auto& [name, n] : named) {
      if (name.size() > group.size() + 1 && name.compare(0, group.size(), group) == 0 && name[group.size()] == ':') {
        w.member(std::string_view(name).substr(group.size() + 1), n);
      }
    }
    w.end_object();
  }
  for (const auto& [name, n] : named) {
    if (name.find(':') == std::string::npos) w.member(name, n);
  }
  w.end_object();
}

}  // namespace

std::string queue_json(const queue_view& q) {
  support::json_writer w;
  w.begin_object();
  w.member("name", q.name).member("store", q.store).member("paused", q.paused_since.has_value());
  if (q.paused_since) w.member("paused_since", support::format_rfc3339(*q.paused_since));
  w.key("counts").begin_object();
  w.member("queued", q.queued).member("running", q.running).member("scheduled", q.scheduled);
  w.member("waiting", q.waiting);
  w.member("retrying", q.retrying);
  if (q.dead) w.member("dead", *q.dead);
  w.end_object();
  if (q.retrying_partial) w.member("retrying_partial", true);
  if (q.oldest_queued_age_ms) w.member("oldest_queued_age_ms", *q.oldest_queued_age_ms);
  if (q.predicted_wait_ms) {
    w.member("predicted_wait_ms", *q.predicted_wait_ms);
  } else if (q.predicts_wait) {
    w.key("predicted_wait_ms").null();  // a backlog and no live slot: no start can be promised
  }
  if (q.mean_run_ms) w.member("mean_run_ms", *q.mean_run_ms);
  w.member("live_slots", q.live_slots);
  w.key("consumers").begin_array();
  for (const queue_view::consumer& k : q.consumers) {
    w.begin_object().member("name", k.name).member("slots", k.slots).member("held", k.held);
    if (k.lease_left_ms) w.member("lease_left_ms", *k.lease_left_ms);
    if (k.draining) w.member("draining", true);
    w.end_object();
  }
  w.end_array();
  if (!q.totals.empty()) {
    w.key("totals");
    grouped(w, q.totals);
  }
  if (!q.recent.empty()) {
    w.key("recent").begin_array();
    for (const queue_view::recent_rates& r : q.recent) {
      w.begin_object().member("window_s", r.window_s).member("span_s", r.span_s).key("per_second");
      grouped(w, r.per_second);
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
  return w.take() + "\n";
}

}  // namespace hourglass::server::detail
