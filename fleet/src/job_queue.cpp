#include "hourglass/fleet/job_queue.hpp"

#include <cstdio>
#include <random>
#include <stdexcept>

#include "hourglass/fleet/freshness.hpp"
#include "scripts.hpp"

namespace hourglass::fleet {

namespace {

std::string millis(duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

bool valid_job_id(std::string_view id) noexcept {
  if (id.size() != 32) return false;
  for (const char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

[[noreturn]] void broker_error(const std::string& what, const redis_reply& r) {
  throw redis_unavailable("redis: " + what + ": " + (r.is_error() ? r.str : std::string("unexpected reply")));
}

fleet_job job_from(std::string_view id, const redis_reply& r) {
  fleet_job j;
  j.id = std::string(id);
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) j.fields[r.elements[i].str] = r.elements[i + 1].str;
  return j;
}

}  // namespace

std::string new_job_id() {
  // 128 bits from the OS's generator (getrandom): ids are unguessable and do
  // not collide across a fleet, as a 32-bit-seeded PRNG's would.
  thread_local std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  return buf;
}

job_queue::job_queue(redis_connection& redis, queue_options options) : redis_(redis), options_(std::move(options)) {
  if (options_.name.empty() || options_.name.find_first_of("{}: \t\r\n") != std::string::npos) {
    throw std::invalid_argument("queue name '" + options_.name + "' must be non-empty, without {, }, : or spaces");
  }
}

std::string job_queue::key(std::string_view suffix) const {
  return "hg:{" + options_.name + "}:" + std::string(suffix);
}

void job_queue::ensure_group(const context& ctx) {
  const redis_reply r = redis_.call(ctx, {"XGROUP", "CREATE", key("stream"), std::string(group), "0", "MKSTREAM"});
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) != 0) broker_error("XGROUP CREATE", r);
}

redis_reply job_queue::eval(const context& ctx, const char* script, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
  std::string sha;
  {
    std::lock_guard lock(mu_);
    sha = shas_[script];
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (sha.empty()) {
      const redis_reply loaded = redis_.call(ctx, {"SCRIPT", "LOAD", script});
      if (!loaded.is_string()) broker_error("SCRIPT LOAD", loaded);
      sha = loaded.str;
      std::lock_guard lock(mu_);
      shas_[script] = sha;
    }
    std::vector<std::string> cmd{"EVALSHA", sha, std::to_string(keys.size())};
    cmd.insert(cmd.end(), keys.begin(), keys.end());
    cmd.insert(cmd.end(), args.begin(), args.end());
    redis_reply r = redis_.call(ctx, std::move(cmd));
    if (r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0) {  // a restarted broker forgot it
      sha.clear();
      continue;
    }
    if (r.is_error()) broker_error("script", r);
    return r;
  }
  throw redis_unavailable("redis: the broker keeps forgetting our scripts");
}

enqueued job_queue::enqueue(const context& ctx, const job_spec& job) {
  const bool has_key = !job.idempotency_key.empty();
  const std::string idem_key = key("idem:" + job.idempotency_key);
  enqueued out;
  hourglass::clock& clk = options_.clock != nullptr ? *options_.clock : real_clock();
  const time_point began = clk.now();
  const redis_reply snap = eval(ctx, detail::snapshot_script, {key("stream"), key("slots"), key("stats"), idem_key},
                                {std::string(group), has_key ? "1" : "0"});
  if (!snap.is_array() || snap.elements.size() != 4) broker_error("admission snapshot", snap);
  if (!snap.elements[3].str.empty()) {
    out.verdict = enqueued::kind::duplicate;
    out.id = snap.elements[3].str;
    return out;
  }
  const auto backlog = static_cast<std::uint64_t>(std::max<long long>(0, snap.elements[0].integer));
  const auto mean_run = std::chrono::microseconds(std::max<long long>(0, snap.elements[1].integer));
  const auto slots = static_cast<std::uint64_t>(std::max<long long>(0, snap.elements[2].integer));
  out.predicted_wait = fleet_predicted_wait(backlog, mean_run, slots);
  const duration freshness = freshness_at_entry(job.freshness, elapsed(began, clk.now()));
  if (job.admission && !admit_at_enqueue(freshness, out.predicted_wait, job.min_budget)) {
    out.verdict = enqueued::kind::refused;
    return out;
  }
  const std::string id = new_job_id();
  const std::vector<std::string> keys{key("stream"), key("job:" + id), idem_key};
  const std::vector<std::string> args{id,
                                      job.handler,
                                      job.payload,
                                      job.content_type,
                                      freshness == duration::max() ? "-1" : millis(freshness),
                                      millis(job.min_budget),
                                      has_key ? "1" : "0",
                                      job.idempotency_key,
                                      millis(options_.idempotency_ttl)};
  redis_reply r = eval(ctx, detail::enqueue_script, keys, args);
  if (r.is_array() && r.elements.size() == 2 && r.elements[0].str == "nostream") {
    ensure_group(ctx);  // the stream was deleted (FLUSHALL, a new broker): both again
    r = eval(ctx, detail::enqueue_script, keys, args);
  }
  if (!r.is_array() || r.elements.size() != 2 || r.elements[0].str == "nostream") broker_error("enqueue", r);
  if (r.elements[0].str == "duplicate") {
    out.verdict = enqueued::kind::duplicate;
    out.id = r.elements[1].str;
    return out;
  }
  out.id = id;
  return out;
}

std::optional<fleet_job> job_queue::find(const context& ctx, std::string_view id) {
  if (!valid_job_id(id)) return std::nullopt;
  const redis_reply r = redis_.call(ctx, {"HGETALL", key("job:" + std::string(id))});
  if (!r.is_array()) broker_error("HGETALL", r);
  if (r.elements.empty()) return std::nullopt;
  return job_from(id, r);
}

std::optional<fleet_job> job_queue::cancel(const context& ctx, std::string_view id, bool* cancelled_here) {
  if (cancelled_here != nullptr) *cancelled_here = false;
  if (!valid_job_id(id)) return std::nullopt;
  const redis_reply r = eval(
      ctx, detail::cancel_script, {key("stream"), key("job:" + std::string(id))},
      {std::string(group), millis(std::max<duration>(options_.result_ttl, std::chrono::milliseconds(1)))});
  if (r.str == "unknown") return std::nullopt;
  if (cancelled_here != nullptr) *cancelled_here = r.str == "cancelled";
  return find(ctx, id);
}

finish_result job_queue::finish(const context& ctx, std::string_view id, std::optional<duration> run_time,
                                const std::vector<std::pair<std::string, std::string>>& fields) {
  // The outcome must name a final state, or the job would leave the stream unfinished.
  bool final_state = false;
  for (const auto& [f, v] : fields) {
    if (f == "state") final_state = !v.empty() && v != "queued" && v != "running";
  }
  if (!final_state) throw std::invalid_argument("job_queue::finish needs a final \"state\" field");
  std::vector<std::string> args{
      std::string(group), millis(options_.result_ttl),
      run_time ? std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(*run_time).count()) : "-1"};
  for (const auto& [f, v] : fields) {
    args.push_back(f);
    args.push_back(v);
  }
  const redis_reply r = eval(ctx, detail::finish_script, {key("stream"), key("job:" + std::string(id)), key("stats")},
                             args);
  if (r.str == "first") return finish_result::first;
  if (r.str == "duplicate") return finish_result::duplicate;
  return finish_result::unknown;
}

namespace {

std::int64_t broker_us(const redis_reply& s, const redis_reply& us) {
  const auto t = parse_broker_time(s.str, us.str);
  if (!t) throw redis_unavailable("redis: TIME is not a time");
  return *t;
}

}  // namespace

job_queue::start_answer job_queue::start(const context& ctx, const held_entry& e, std::string_view consumer,
                                         unsigned max_deliveries, std::string_view token) {
  const redis_reply r = eval(
      ctx, detail::start_script, {key("stream"), key("job:" + e.job_id), key("dead")},
      {std::string(group), e.entry, std::string(consumer), std::to_string(max_deliveries), e.job_id,
       millis(std::max<duration>(options_.result_ttl, std::chrono::milliseconds(1))), std::string(token)});
  if (!r.is_array() || r.elements.size() < 4) broker_error("start", r);
  start_answer a;
  const std::string& v = r.elements[0].str;
  using verdict = start_answer::verdict;
  a.v = v == "run"         ? verdict::run
        : v == "not_owner" ? verdict::not_owner
        : v == "finished"  ? verdict::finished
        : v == "cancelled" ? verdict::cancelled
        : v == "dead"      ? verdict::dead
                           : verdict::gone;
  a.broker_now_us = broker_us(r.elements[1], r.elements[2]);
  a.deliveries = static_cast<unsigned>(std::max<long long>(0, r.elements[3].integer));
  if (a.v == verdict::run) {
    if (r.elements.size() != 8) broker_error("start", r);
    a.handler = r.elements[4].str;
    a.payload = r.elements[5].str;
    a.content_type = r.elements[6].str;
    a.idempotency_key = r.elements[7].str;
  }
  return a;
}

job_queue::renew_answer job_queue::renew(const context& ctx, std::string_view consumer, const lease_value& lease_v,
                                         duration lease, std::size_t slots, const std::vector<held_entry>& held) {
  std::vector<std::string> keys{key("lease:" + std::string(consumer)), key("slots"), key("stream")};
  std::vector<std::string> args{std::string(group), std::string(consumer),
                                lease_v.token,      std::to_string(lease_v.renewals),
                                millis(lease),      std::to_string(slots)};
  for (const held_entry& h : held) {
    keys.push_back(key("job:" + h.job_id));
    args.push_back(h.entry);
  }
  const redis_reply r = eval(ctx, detail::renew_script, keys, args);
  renew_answer a;
  if (!r.is_array() || r.elements.empty()) broker_error("renew", r);
  if (r.elements[0].str == "fenced") {
    a.fenced = true;
    return a;
  }
  if (r.elements.size() != 8) broker_error("renew", r);
  for (const redis_reply& e : r.elements[1].elements) a.marked.push_back(e.str);
  for (const redis_reply& e : r.elements[2].elements) a.lost.push_back(e.str);
  a.broker_now_us = broker_us(r.elements[3], r.elements[4]);
  a.backlog = std::max<long long>(0, r.elements[5].integer);
  a.pending = std::max<long long>(0, r.elements[6].integer);
  for (const redis_reply& e : r.elements[7].elements) a.deleted.push_back(e.str);
  return a;
}

std::size_t job_queue::hand_back(const context& ctx, std::string_view consumer, std::string_view lease_token,
                                 const std::vector<held_entry>& held) {
  if (held.empty()) return 0;
  std::vector<std::string> keys{key("stream")};
  // Idle far past any daemon's lease (about three years), so the next reclaim takes them.
  std::vector<std::string> args{std::string(group), std::string(consumer), "100000000000", std::string(lease_token)};
  for (const held_entry& h : held) {
    keys.push_back(key("job:" + h.job_id));
    args.push_back(h.entry);
  }
  const redis_reply r = eval(ctx, detail::hand_back_script, keys, args);
  if (!r.is_integer()) broker_error("hand back", r);
  return static_cast<std::size_t>(std::max<long long>(0, r.integer));
}

void job_queue::release(const context& ctx, std::string_view consumer, std::string_view token) {
  eval(ctx, detail::release_script, {key("lease:" + std::string(consumer)), key("slots")},
       {std::string(consumer), std::string(token)});
}

std::string job_queue::lease_of(const context& ctx, std::string_view consumer) {
  const redis_reply r = redis_.call(ctx, {"GET", key("lease:" + std::string(consumer))});
  if (r.is_error()) broker_error("GET lease", r);
  return r.is_nil() ? std::string() : r.str;
}

}  // namespace hourglass::fleet
