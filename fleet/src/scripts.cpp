#include "scripts.hpp"

#include <algorithm>

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

std::string millis(duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

void broker_error(const std::string& what, const redis_reply& r) {
  throw redis_unavailable("redis: " + what + ": " + (r.is_error() ? r.str : std::string("unexpected reply")));
}

snapshot_reply decode_snapshot(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() != 4) broker_error("admission snapshot", r);
  snapshot_reply s;
  s.backlog = static_cast<std::uint64_t>(at_least_zero(r.elements[0]));
  s.mean_run = std::chrono::microseconds(at_least_zero(r.elements[1]));
  s.live_slots = static_cast<std::uint64_t>(at_least_zero(r.elements[2]));
  s.prior_id = r.elements[3].str;
  return s;
}

enqueue_reply decode_enqueue(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() != 2) broker_error("enqueue", r);
  enqueue_reply e;
  const std::string& v = r.elements[0].str;
  e.verdict = v == "duplicate"  ? enqueue_reply::kind::duplicate
              : v == "nostream" ? enqueue_reply::kind::nostream
                                : enqueue_reply::kind::accepted;
  e.id = r.elements[1].str;
  return e;
}

finish_result decode_finish(const redis_reply& r) noexcept {
  if (r.str == "first") return finish_result::first;
  if (r.str == "duplicate") return finish_result::duplicate;
  return finish_result::unknown;
}

cancel_reply decode_cancel(const redis_reply& r) noexcept {
  if (r.str == "cancelled") return cancel_reply::cancelled;
  if (r.str == "marked") return cancel_reply::marked;
  if (r.str == "unknown") return cancel_reply::unknown;
  return cancel_reply::finished;
}

start_reply decode_start(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() < 4) broker_error("start", r);
  start_reply a;
  const std::string& v = r.elements[0].str;
  using verdict = start_reply::verdict;
  a.v = v == "run"         ? verdict::run
        : v == "not_owner" ? verdict::not_owner
        : v == "finished"  ? verdict::finished
        : v == "cancelled" ? verdict::cancelled
        : v == "dead"      ? verdict::dead
                           : verdict::gone;
  a.broker_now_us = broker_us(r.elements[1], r.elements[2]);
  a.deliveries = static_cast<unsigned>(at_least_zero(r.elements[3]));
  if (a.v == verdict::run) {
    if (r.elements.size() != 8) broker_error("start", r);
    a.handler = r.elements[4].str;
    a.payload = r.elements[5].str;
    a.content_type = r.elements[6].str;
    a.idempotency_key = r.elements[7].str;
  }
  return a;
}

renew_reply decode_renew(const redis_reply& r) {
  if (!r.is_array() || r.elements.empty()) broker_error("renew", r);
  renew_reply a;
  if (r.elements[0].str == "fenced") {
    a.fenced = true;
    return a;
  }
  if (r.elements.size() != 8) broker_error("renew", r);
  for (const redis_reply& e : r.elements[1].elements) a.marked.push_back(e.str);
  for (const redis_reply& e : r.elements[2].elements) a.lost.push_back(e.str);
  a.broker_now_us = broker_us(r.elements[3], r.elements[4]);
  a.backlog = at_least_zero(r.elements[5]);
  a.pending = at_least_zero(r.elements[6]);
  for (const redis_reply& e : r.elements[7].elements) a.deleted.push_back(e.str);
  return a;
}

std::size_t decode_hand_back(const redis_reply& r) {
  if (!r.is_integer()) broker_error("hand back", r);
  return static_cast<std::size_t>(at_least_zero(r));
}

bool decode_release(const redis_reply& r) noexcept { return r.is_integer() && r.integer == 1; }

}  // namespace hourglass::fleet::detail
