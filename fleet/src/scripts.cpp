#include "scripts.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "hourglass/fleet/freshness.hpp"

namespace hourglass::fleet::detail {

namespace {

std::int64_t broker_us(const redis_reply& s, const redis_reply& us) {
  const auto t = parse_broker_time(s.str, us.str);
  if (!t) throw redis_unavailable("redis: TIME is not a time");
  return *t;
}

long long at_least_zero(const redis_reply& r) noexcept { return std::max<long long>(0, r.integer); }

}  // namespace

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

enqueue_batch_reply decode_enqueue(const redis_reply& r, std::size_t jobs) {
  enqueue_batch_reply b;
  if (r.is_array() && r.elements.size() == 1 && r.elements[0].str == "nostream") {
    b.nostream = true;
    return b;
  }
  if (r.is_array() && r.elements.size() == 1 && r.elements[0].str == "paused") {
    b.paused = true;
    return b;
  }
  if (!r.is_array() || r.elements.size() != jobs) broker_error("enqueue", r);
  b.jobs.reserve(jobs);
  for (const redis_reply& j : r.elements) {
    if (!j.is_array() || j.elements.size() != 3 || !j.elements[2].is_integer()) broker_error("enqueue", r);
    enqueue_reply e;
    const std::string& v = j.elements[0].str;
    e.verdict = v == "duplicate"           ? enqueue_reply::kind::duplicate
                : v == "refused"           ? enqueue_reply::kind::refused
                : v == "no_parent"         ? enqueue_reply::kind::no_parent
                : v == "parent_finished"   ? enqueue_reply::kind::parent_finished
                : v == "too_deep"          ? enqueue_reply::kind::too_deep
                : v == "too_many_children" ? enqueue_reply::kind::too_many_children
                                           : enqueue_reply::kind::accepted;
    e.id = j.elements[1].str;
    const long long us = j.elements[2].integer;
    e.predicted_wait = us < 0 ? duration::max() : std::chrono::duration_cast<duration>(std::chrono::microseconds(us));
    b.jobs.push_back(std::move(e));
  }
  return b;
}

std::vector<finish_result> decode_finish(const redis_reply& r, std::size_t jobs, std::vector<std::string>* cancelled) {
  const bool with_cancelled = r.is_array() && r.elements.size() == jobs + 1 && r.elements.back().is_array();
  if (!r.is_array() || (r.elements.size() != jobs && !with_cancelled)) broker_error("finish", r);
  std::vector<finish_result> out;
  out.reserve(jobs);
  if (with_cancelled && cancelled != nullptr) {
    for (const redis_reply& h : r.elements.back().elements) cancelled->push_back(h.str);
  }
  for (std::size_t i = 0; i < jobs; ++i) {
    const redis_reply& j = r.elements[i];
    out.push_back(j.str == "first"       ? finish_result::first
                  : j.str == "scheduled" ? finish_result::scheduled
                  : j.str == "no_budget" ? finish_result::no_budget
                  : j.str == "cancelled" ? finish_result::cancelled
                  : j.str == "duplicate" ? finish_result::duplicate
                  : j.str == "waiting"   ? finish_result::waiting
                  : j.str == "resumed"   ? finish_result::resumed
                                         : finish_result::unknown);
  }
  return out;
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

namespace {

// One start answer of `whole` (for its error message); nullopt: 'late'.
std::optional<job_queue::start_answer> start_answer_of(const redis_reply& j, const redis_reply& whole,
                                                       std::int64_t broker_now_us) {
  if (!j.is_array() || j.elements.size() < 2) broker_error("start", whole);
  using verdict = job_queue::start_answer::verdict;
  const std::string& v = j.elements[0].str;
  if (v == "late") return std::nullopt;
  job_queue::start_answer a;
  a.v = v == "run"         ? verdict::run
        : v == "not_owner" ? verdict::not_owner
        : v == "finished"  ? verdict::finished
        : v == "cancelled" ? verdict::cancelled
        : v == "dead"      ? verdict::dead
                           : verdict::gone;
  a.broker_now_us = broker_now_us;
  a.deliveries = static_cast<unsigned>(at_least_zero(j.elements[1]));
  if (a.v == verdict::dead && j.elements.size() >= 3)
    a.dead_dropped = static_cast<unsigned>(at_least_zero(j.elements[2]));
  if (a.v == verdict::run) {
    if (j.elements.size() != 15) broker_error("start", whole);
    a.handler = j.elements[2].str;
    a.payload = j.elements[3].str;
    a.content_type = j.elements[4].str;
    a.idempotency_key = j.elements[5].str;
    a.attempt = static_cast<int>(std::clamp<std::int64_t>(number_or(j.elements[6].str, 1), 1, 1'000'000));
    a.retry.max_attempts = static_cast<int>(std::clamp<std::int64_t>(number_or(j.elements[7].str, 1), 1, 1'000'000));
    a.retry.base = std::chrono::microseconds(std::max<std::int64_t>(number_or(j.elements[8].str, 0), 0));
    a.retry.cap = std::chrono::microseconds(std::max<std::int64_t>(number_or(j.elements[9].str, 0), 0));
    if (!j.elements[10].str.empty()) a.deadline_us = number_or(j.elements[10].str, 0);
    a.woke_by = j.elements[11].str;
    a.wait_rule = j.elements[12].str;
    a.signal_payload = j.elements[13].str;
    a.retry.jitter = j.elements[14].str != "none";  // '': a job enqueued before the field existed
  }
  return a;
}

}  // namespace

start_batch_reply decode_start(const redis_reply& r, std::size_t jobs) {
  if (!r.is_array() || r.elements.size() != 2 + jobs) broker_error("start", r);
  start_batch_reply b;
  b.broker_now_us = broker_us(r.elements[0], r.elements[1]);
  b.jobs.reserve(jobs);
  for (std::size_t i = 0; i < jobs; ++i) {
    // 'late' is the taken form's only: here it reads as gone, as any unknown verdict
    std::optional<job_queue::start_answer> a = start_answer_of(r.elements[2 + i], r, b.broker_now_us);
    job_queue::start_answer gone;
    gone.broker_now_us = b.broker_now_us;
    b.jobs.push_back(a ? std::move(*a) : std::move(gone));
  }
  return b;
}

job_queue::taken decode_take(const redis_reply& r, std::size_t count) {
  if (!r.is_array() || r.elements.size() < 2 || r.elements.size() > 2 + count) broker_error("take", r);
  job_queue::taken t;
  t.broker_now_us = broker_us(r.elements[0], r.elements[1]);
  t.entries.reserve(r.elements.size() - 2);
  for (std::size_t i = 2; i < r.elements.size(); ++i) {
    const redis_reply& e = r.elements[i];
    if (!e.is_array() || e.elements.size() != 3 || !e.elements[1].is_array() || e.elements[1].elements.size() % 2 != 0)
      broker_error("take", r);
    job_queue::taken_entry te;
    te.id = e.elements[0].str;
    const auto& kv = e.elements[1].elements;
    for (std::size_t k = 0; k < kv.size(); k += 2) te.fields.emplace_back(kv[k].str, kv[k + 1].str);
    te.started = start_answer_of(e.elements[2], r, t.broker_now_us);
    t.entries.push_back(std::move(te));
  }
  return t;
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

promote_reply decode_promote(const redis_reply& r) {
  promote_reply p;
  if (r.is_array() && r.elements.size() == 1 && r.elements[0].str == "nostream") {
    p.nostream = true;
    return p;
  }
  if (!r.is_array() || r.elements.size() != 7 || !r.elements[0].is_integer() || !r.elements[1].is_array() ||
      !r.elements[2].is_integer() || !r.elements[5].is_array() || !r.elements[6].is_array())
    broker_error("promote", r);
  p.moved = static_cast<std::size_t>(at_least_zero(r.elements[0]));
  for (const redis_reply& h : r.elements[1].elements) p.expired_handlers.push_back(h.str);
  if (r.elements[2].integer >= 0) p.next_due_ms = r.elements[2].integer;
  p.broker_now_us = broker_us(r.elements[3], r.elements[4]);
  for (const redis_reply& h : r.elements[5].elements) p.human_wait_handlers.push_back(h.str);
  for (const redis_reply& h : r.elements[6].elements) p.cancelled_handlers.push_back(h.str);
  return p;
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

std::size_t decode_hand_back(const redis_reply& r) {
  if (!r.is_integer()) broker_error("hand back", r);
  return static_cast<std::size_t>(at_least_zero(r));
}

bool decode_release(const redis_reply& r) noexcept { return r.is_integer() && r.integer == 1; }

}  // namespace hourglass::fleet::detail
