// The scripts on a job's way through the queue: enqueue, start (given and
// taken), finish and promote; each one's encoder beside its decoder
// (scripts.hpp says what each reads and answers).
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "hourglass/jobs/job_state.hpp"
#include "scripts.hpp"

namespace hourglass::fleet::detail {

// ---- enqueue ----

script_call encode_enqueue(const queue_keys& k, const queue_options& o, bool refuse_paused,
                           const std::vector<enqueue_item>& jobs) {
  script_call c{enqueue_script,
                {k("stream"), k("slots"), k("stats"), k("delayed"), k("paused")},
                {std::string(job_queue::group), millis(o.idempotency_ttl), refuse_paused ? "1" : "0",
                 micros(o.parent_reserve), std::to_string(o.max_job_depth), std::to_string(o.max_children)}};
  c.keys.reserve(5 + 3 * jobs.size());
  c.args.reserve(6 + 16 * jobs.size());
  for (const enqueue_item& item : jobs) {
    const job_spec& job = *item.job;
    c.keys.push_back(k("job:" + std::string(item.id)));
    c.keys.push_back(k("idem:" + job.idempotency_key));
    c.keys.push_back(k("children:" + job.parent));
    c.args.emplace_back(item.id);
    c.args.push_back(job.handler);
    c.args.push_back(job.payload);
    c.args.push_back(job.content_type);
    c.args.push_back(item.freshness == duration::max() ? "-1" : millis(item.freshness));
    c.args.push_back(millis(job.min_budget));
    c.args.push_back(job.idempotency_key);
    c.args.emplace_back(job.admission ? "1" : "0");
    c.args.push_back(std::to_string(job.retry.max_attempts));
    c.args.push_back(micros(job.retry.base));
    c.args.push_back(micros(job.retry.cap));
    c.args.push_back(item.deadline == duration::max() ? "-1" : micros(item.deadline));
    c.args.push_back(micros_up(std::max(job.delay, duration::zero())));
    c.args.push_back(std::to_string(std::max<std::int64_t>(job.not_before_us, 0)));
    c.args.push_back(job.parent);
    c.args.emplace_back(job.retry.jitter ? "full" : "none");
  }
  return c;
}

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

// ---- finish ----

script_call encode_finish(const queue_keys& k, duration result_ttl, std::string_view token,
                          const std::vector<job_queue::outcome>& outcomes) {
  script_call c{finish_script,
                {k("stream"), k("stats"), k("delayed")},
                {std::string(job_queue::group), millis(result_ttl), std::string(token)}};
  for (const job_queue::outcome& o : outcomes) {
    c.keys.push_back(k("job:" + o.job_id));
    c.args.push_back(o.entry);
    c.args.push_back(o.run_time ? micros(*o.run_time) : "-1");
    if (o.wait) {  // no outcome: the job waits for its children
      c.args.emplace_back("wait");
      c.args.push_back(o.wait->rule);
      c.args.push_back(micros_up(std::clamp(o.wait->keep, duration::zero(), duration::max() / 2)));
      c.args.emplace_back("0");
      continue;
    }
    bool final_state = false;
    for (const auto& [f, v] : o.fields) {
      if (f != "state") continue;
      const auto state = jobs::parse_job_state(v);
      final_state = state && jobs::is_final(*state);
    }
    if (!final_state) throw std::invalid_argument("job_queue::finish needs a final \"state\" field");
    if (o.retry) {
      c.args.emplace_back("retry");
      c.args.push_back(micros_up(std::max(o.retry->delay, duration::zero())));
      c.args.push_back(micros_up(std::clamp(o.retry->need, duration::zero(), duration::max() / 2)));
      c.args.push_back(o.retry->error);
      c.args.push_back(o.retry->message);
      c.args.push_back(ms_text(o.retry->run_time));
    } else {
      c.args.emplace_back("final");
    }
    c.args.push_back(std::to_string(2 * o.fields.size()));
    for (const auto& [f, v] : o.fields) {
      c.args.push_back(f);
      c.args.push_back(v);
    }
  }
  return c;
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

// ---- start: given, and taken ----

namespace {

std::vector<std::string> start_args(const queue_options& o, std::string_view consumer, unsigned max_deliveries) {
  return {std::string(job_queue::group),
          std::string(consumer),
          std::to_string(max_deliveries),
          millis(std::max<duration>(o.result_ttl, std::chrono::milliseconds(1))),
          millis(std::max<duration>(o.dead_ttl, std::chrono::milliseconds(1))),
          std::to_string(std::max<std::size_t>(o.dead_max, 1))};
}

}  // namespace

script_call encode_start(const queue_keys& k, const queue_options& o, std::string_view consumer,
                         unsigned max_deliveries, const std::vector<start_item>& jobs) {
  script_call c{start_script, {k("stream"), k("dead"), k("stats")}, start_args(o, consumer, max_deliveries)};
  for (const start_item& j : jobs) {
    c.keys.push_back(k("job:" + std::string(j.job_id)));
    c.args.emplace_back(j.entry);
    c.args.emplace_back(j.job_id);
    c.args.emplace_back(j.token);
  }
  return c;
}

script_call encode_take(const queue_keys& k, const queue_options& o, std::string_view consumer, unsigned max_deliveries,
                        std::size_t count, std::string_view lease_token, bool judge_late) {
  script_call c{start_script, {k("stream"), k("dead"), k("stats")}, start_args(o, consumer, max_deliveries)};
  c.args.insert(c.args.end(), {"take", std::to_string(std::max<std::size_t>(count, 1)), std::string(lease_token),
                               judge_late ? "1" : "0"});
  return c;
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

// ---- promote ----

script_call encode_promote(const queue_keys& k, std::optional<duration> predicted_wait, duration result_ttl,
                           const std::vector<std::string>& job_ids) {
  script_call c{promote_script,
                {k("stream"), k("delayed")},
                {!predicted_wait                      ? std::string()
                 : *predicted_wait == duration::max() ? std::string("-1")
                                                      : micros_up(*predicted_wait),
                 millis(std::max<duration>(result_ttl, std::chrono::milliseconds(1))), std::string(job_queue::group)}};
  for (const std::string& id : job_ids) {
    c.keys.push_back(k("job:" + id));
    c.args.push_back(id);
  }
  return c;
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

}  // namespace hourglass::fleet::detail
