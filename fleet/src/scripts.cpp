#include "scripts.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "hourglass/fleet/freshness.hpp"

namespace hourglass::fleet::detail {

std::int64_t broker_us(const redis_reply& s, const redis_reply& us) {
  const auto t = parse_broker_time(s.str, us.str);
  if (!t) throw redis_unavailable("redis: TIME is not a time");
  return *t;
}

long long at_least_zero(const redis_reply& r) noexcept { return std::max<long long>(0, r.integer); }

std::string queue_keys::operator()(std::string_view suffix) const {
  std::string k;
  k.reserve(6 + tag.size() + suffix.size());
  return k.append("hg:{").append(tag).append("}:").append(suffix);
}

std::int64_t number_or(std::string_view text, std::int64_t fallback) noexcept {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return text.empty() || ec != std::errc() || p != text.data() + text.size() ? fallback : v;
}

std::string millis(duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

std::string ms_text(duration d) {
  const double ms = std::chrono::duration<double, std::milli>(d).count();
  char buf[32];
  const auto [p, ec] = std::to_chars(buf, buf + sizeof buf, ms, std::chars_format::fixed, 3);
  return ec == std::errc() ? std::string(buf, p) : "0";
}

std::string micros(duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

std::string micros_up(duration d) { return std::to_string(std::chrono::ceil<std::chrono::microseconds>(d).count()); }

void broker_error(const std::string& what, const redis_reply& r) {
  throw redis_unavailable("redis: " + what + ": " + (r.is_error() ? r.str : std::string("unexpected reply")));
}

}  // namespace hourglass::fleet::detail

namespace hourglass::fleet {

bool refusal_is_lasting(std::string_view error) noexcept {
  // Anywhere in it: a script's error quotes the reply its call ran into.
  for (const std::string_view passing : {"OOM ", "BUSY ", "LOADING ", "READONLY ", "MASTERDOWN ", "NOREPLICAS ",
                                         "TRYAGAIN ", "CLUSTERDOWN ", "MOVED ", "ASK ", "NOSCRIPT "}) {
    if (error.find(passing) != std::string_view::npos) return false;
  }
  return true;
}

}  // namespace hourglass::fleet

namespace hourglass::fleet::detail {

script_call encode_signal(const queue_keys& k, std::string_view id, std::string name, std::string payload,
                          duration result_ttl) {
  return {signal_script,
          {k("stream"), k("job:" + std::string(id)), k("delayed")},
          {std::move(name), std::move(payload), millis(std::max<duration>(result_ttl, std::chrono::milliseconds(1)))}};
}

signal_answer decode_signal(const redis_reply& r) {
  if (!r.is_array() || r.elements.empty()) broker_error("signal", r);
  signal_answer a;
  const std::string& v = r.elements[0].str;
  if (v == "delivered") {
    a.verdict = signal_answer::kind::delivered;
  } else if (v == "not_waiting" && (r.elements.size() == 3 || r.elements.size() == 4)) {
    a.verdict = signal_answer::kind::not_waiting;
    a.state = r.elements[1].str;
    a.wait_rule = r.elements[2].str;
    a.expired_here = r.elements.size() == 4 && r.elements[3].str == "expired";
  } else if (v != "unknown") {
    broker_error("signal", r);
  }
  return a;
}

script_call encode_cancel(const queue_keys& k, std::string_view id, duration result_ttl, cancel_cause cause) {
  return {cancel_script,
          {k("stream"), k("job:" + std::string(id)), k("delayed")},
          {std::string(job_queue::group), millis(std::max<duration>(result_ttl, std::chrono::milliseconds(1))),
           std::string(to_string(cause))}};
}

cancel_reply decode_cancel(const redis_reply& r) noexcept {
  const std::string& v = r.is_array() && !r.elements.empty() ? r.elements[0].str : r.str;
  if (v == "cancelled") return cancel_reply::cancelled;
  if (v == "marked") return cancel_reply::marked;
  if (v == "unknown") return cancel_reply::unknown;
  return cancel_reply::finished;
}

std::vector<std::string> decode_cancelled_family(const redis_reply& r) {
  std::vector<std::string> handlers;
  if (!r.is_array()) return handlers;
  for (std::size_t i = 1; i < r.elements.size(); ++i) handlers.push_back(r.elements[i].str);
  return handlers;
}

script_call encode_renew(const queue_keys& k, std::string_view consumer, const lease_value& lease_v, duration lease,
                         std::size_t slots, const std::vector<job_queue::held_entry>& held) {
  script_call c{renew_script,
                {k("lease:" + std::string(consumer)), k("slots"), k("stream"), k("stats"), k("delayed"), k("paused")},
                {std::string(job_queue::group), std::string(consumer), lease_v.token, std::to_string(lease_v.renewals),
                 millis(lease), std::to_string(slots)}};
  for (const job_queue::held_entry& h : held) {
    c.keys.push_back(k("job:" + h.job_id));
    c.args.push_back(h.entry);
  }
  return c;
}

renew_reply decode_renew(const redis_reply& r) {
  if (!r.is_array() || r.elements.empty()) broker_error("renew", r);
  renew_reply a;
  if (r.elements[0].str == "fenced") {
    a.fenced = true;
    return a;
  }
  if (r.elements.size() != 12) broker_error("renew", r);
  for (const redis_reply& e : r.elements[1].elements) a.marked.push_back(e.str);
  for (const redis_reply& e : r.elements[2].elements) a.lost.push_back(e.str);
  a.broker_now_us = broker_us(r.elements[3], r.elements[4]);
  a.backlog = at_least_zero(r.elements[5]);
  a.pending = at_least_zero(r.elements[6]);
  for (const redis_reply& e : r.elements[7].elements) a.deleted.push_back(e.str);
  a.mean_run = std::chrono::microseconds(at_least_zero(r.elements[8]));
  a.live_slots = at_least_zero(r.elements[9]);
  a.scheduled = at_least_zero(r.elements[10]);
  a.paused = !r.elements[11].str.empty();
  return a;
}

script_call encode_queue(const queue_keys& k, queue_op op) {
  const char* name = op == queue_op::pause ? "pause" : op == queue_op::resume ? "resume" : "look";
  return {queue_script,
          {k("stream"), k("delayed"), k("dead"), k("slots"), k("stats"), k("paused")},
          {name, std::string(job_queue::group)}};
}

queue_state decode_queue(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() != 14 || !r.elements[9].is_array() || r.elements[9].elements.size() % 4 != 0 ||
      !r.elements[12].is_array() || r.elements[12].elements.size() % 2 != 0)
    broker_error("queue", r);
  const auto& e = r.elements;
  queue_state q;
  q.broker_now_us = broker_us(e[0], e[1]);
  q.length = static_cast<std::uint64_t>(at_least_zero(e[2]));
  q.pending = static_cast<std::uint64_t>(at_least_zero(e[3]));
  q.oldest_waiting = e[4].str;
  q.scheduled = static_cast<std::uint64_t>(at_least_zero(e[5]));
  q.dead_letters = static_cast<std::uint64_t>(at_least_zero(e[6]));
  q.mean_run = std::chrono::microseconds(at_least_zero(e[7]));
  if (!e[8].str.empty()) q.paused_since_ms = number_or(e[8].str, 0);
  const auto& c = e[9].elements;
  for (std::size_t i = 0; i + 3 < c.size(); i += 4) {
    queue_state::consumer one;
    one.name = c[i].str;
    one.slots = static_cast<std::uint64_t>(at_least_zero(c[i + 1]));
    if (!c[i + 2].str.empty()) one.lease_expiry_ms = number_or(c[i + 2].str, 0);
    one.held = static_cast<std::uint64_t>(at_least_zero(c[i + 3]));
    q.consumers.push_back(std::move(one));
  }
  q.retrying = static_cast<std::uint64_t>(at_least_zero(e[10]));
  q.retrying_exact = at_least_zero(e[11]) == 1;
  q.waiting = static_cast<std::uint64_t>(at_least_zero(e[13]));
  const auto& stats = e[12].elements;
  for (std::size_t i = 0; i + 1 < stats.size(); i += 2) {
    if (stats[i].str == "mean_run_us") continue;
    q.totals.emplace_back(stats[i].str,
                          static_cast<std::uint64_t>(std::max<std::int64_t>(number_or(stats[i + 1].str, 0), 0)));
  }
  std::sort(q.totals.begin(), q.totals.end());
  return q;
}

namespace {

std::vector<std::string> dead_keys(const queue_keys& k, std::string_view id) {
  return {k("stream"), k("slots"), k("stats"), k("dead"), k("job:" + std::string(id))};
}

}  // namespace

script_call encode_dead_replay(const queue_keys& k, std::string_view id, duration freshness, duration min_budget,
                               bool admission) {
  return {dead_script,
          dead_keys(k, id),
          {"replay", std::string(job_queue::group), freshness == duration::max() ? "-1" : millis(freshness),
           millis(min_budget), admission ? "1" : "0"}};
}

script_call encode_dead_delete(const queue_keys& k, std::string_view id) {
  return {dead_script, dead_keys(k, id), {"delete", std::string(job_queue::group)}};
}

script_call encode_dead_purge(const queue_keys& k, std::size_t count) {
  return {dead_script,
          dead_keys(k, ""),
          {"purge", std::string(job_queue::group), std::to_string(std::max<std::size_t>(count, 1)), k("job:")}};
}

job_queue::purged decode_purge(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() != 3) broker_error("dead", r);
  job_queue::purged p;
  p.jobs = static_cast<std::uint64_t>(at_least_zero(r.elements[0]));
  p.entries = static_cast<std::uint64_t>(at_least_zero(r.elements[1]));
  p.left = static_cast<std::uint64_t>(at_least_zero(r.elements[2]));
  return p;
}

dead_answer decode_dead(const redis_reply& r) {
  if (!r.is_array() || r.elements.empty()) broker_error("dead", r);
  const auto& e = r.elements;
  dead_answer a;
  const std::string& v = e[0].str;
  if (v == "unknown") return a;
  if (v == "deleted") {
    a.verdict = dead_answer::kind::done;
    return a;
  }
  if (v == "not_dead" && e.size() == 2) {
    a.verdict = dead_answer::kind::not_dead;
    a.state = e[1].str;
    return a;
  }
  if ((v == "accepted" || v == "refused") && e.size() == 3 && e[2].is_integer()) {
    a.verdict = v == "accepted" ? dead_answer::kind::done : dead_answer::kind::refused;
    if (e[2].integer >= 0) a.predicted_wait = std::chrono::microseconds(e[2].integer);
    return a;
  }
  broker_error("dead", r);
}

script_call encode_hand_back(const queue_keys& k, std::string_view consumer, std::string_view lease_token,
                             const std::vector<job_queue::held_entry>& held) {
  // Idle far past any daemon's lease (about three years), so the next reclaim takes them.
  script_call c{hand_back_script,
                {k("stream")},
                {std::string(job_queue::group), std::string(consumer), "100000000000", std::string(lease_token)}};
  for (const job_queue::held_entry& h : held) {
    c.keys.push_back(k("job:" + h.job_id));
    c.args.push_back(h.entry);
  }
  return c;
}

std::size_t decode_hand_back(const redis_reply& r) {
  if (!r.is_integer()) broker_error("hand back", r);
  return static_cast<std::size_t>(at_least_zero(r));
}

script_call encode_release(const queue_keys& k, std::string_view consumer, std::string_view token) {
  return {
      release_script, {k("lease:" + std::string(consumer)), k("slots")}, {std::string(consumer), std::string(token)}};
}

bool decode_release(const redis_reply& r) noexcept { return r.is_integer() && r.integer == 1; }

// ---- schedule, shards, list ----

script_call encode_schedule_look(const queue_keys& k, std::string_view name) {
  return {schedule_script, {k("schedule:" + std::string(name)), k("paused")}, {"look"}};
}

job_queue::schedule_record decode_schedule_look(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() != 7 || !r.elements[0].is_integer()) broker_error("schedule", r);
  job_queue::schedule_record s;
  s.settled_ms = r.elements[0].integer;
  s.last_fire_ms = number_or(r.elements[1].str, 0);
  s.last_job = r.elements[2].str;
  s.queue_paused = !r.elements[6].str.empty();
  s.missed = static_cast<std::uint64_t>(std::max<std::int64_t>(number_or(r.elements[3].str, 0), 0));
  s.broker_now_us = broker_us(r.elements[4], r.elements[5]);
  return s;
}

script_call encode_schedule_settle(const queue_keys& k, std::string_view name, std::int64_t fire_ms,
                                   std::uint64_t missed, std::int64_t settled_ms) {
  return {schedule_script,
          {k("schedule:" + std::string(name)), k("paused")},
          {"settle", std::to_string(fire_ms), std::to_string(missed), std::to_string(settled_ms)}};
}

bool decode_schedule_settle(const redis_reply& r) {
  if (!r.is_integer()) broker_error("schedule", r);
  return r.integer == 1;
}

script_call encode_schedule_ran(const queue_keys& k, std::string_view name, std::string_view job_id) {
  return {schedule_script, {k("schedule:" + std::string(name)), k("paused")}, {"ran", std::string(job_id)}};
}

void decode_schedule_ran(const redis_reply& r) {
  if (!r.is_integer()) broker_error("schedule", r);
}

script_call encode_shards(const queue_keys& k, std::string expected, std::string desired) {
  return {shards_script, {k("shards")}, {std::move(expected), std::move(desired)}};
}

std::string decode_shards(const redis_reply& r) {
  if (!r.is_string()) broker_error("shards", r);
  return r.str;
}

script_call encode_list(const queue_keys& k, std::string_view index, std::string cursor, std::size_t count,
                        std::string_view state) {
  const std::string page = std::to_string(std::clamp<std::size_t>(count, 1, 1000));
  if (index.empty()) {  // no index: SCAN over the job hashes, filtered on their state in the script
    return {list_script, {k("stream")}, {"scan", std::move(cursor), page, state.empty() ? "*" : std::string(state)}};
  }
  return {list_script, {k(index)}, {index == "delayed" ? "zset" : "stream", std::move(cursor), page}};
}

list_page decode_list(const redis_reply& r) {
  if (!r.is_array() || r.elements.empty()) broker_error("list", r);
  list_page p;
  p.next_cursor = r.elements[0].str;
  for (std::size_t i = 1; i < r.elements.size(); ++i) p.ids.push_back(r.elements[i].str);
  return p;
}

}  // namespace hourglass::fleet::detail
