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

using detail::broker_error;

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

redis_reply job_queue::eval(const context& ctx, std::string_view script, const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
  std::string sha;
  {
    std::lock_guard lock(mu_);
    sha = shas_[script.data()];
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (sha.empty()) {
      const redis_reply loaded = redis_.call(ctx, {"SCRIPT", "LOAD", std::string(script)});
      if (!loaded.is_string()) broker_error("SCRIPT LOAD", loaded);
      sha = loaded.str;
      std::lock_guard lock(mu_);
      shas_[script.data()] = sha;
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
  const detail::snapshot_reply snap = detail::decode_snapshot(
      eval(ctx, detail::snapshot_script, {key("stream"), key("slots"), key("stats"), idem_key},
           {std::string(group), has_key ? "1" : "0"}));
  if (!snap.prior_id.empty()) {
    out.verdict = enqueued::kind::duplicate;
    out.id = snap.prior_id;
    return out;
  }
  out.predicted_wait = fleet_predicted_wait(snap.backlog, snap.mean_run, snap.live_slots);
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
  using added_kind = detail::enqueue_reply::kind;
  detail::enqueue_reply added = detail::decode_enqueue(eval(ctx, detail::enqueue_script, keys, args));
  if (added.verdict == added_kind::nostream) {
    ensure_group(ctx);  // the stream was deleted (FLUSHALL, a new broker): both again
    const redis_reply r = eval(ctx, detail::enqueue_script, keys, args);
    added = detail::decode_enqueue(r);
    if (added.verdict == added_kind::nostream) broker_error("enqueue", r);
  }
  if (added.verdict == added_kind::duplicate) {
    out.verdict = enqueued::kind::duplicate;
    out.id = added.id;
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
  const detail::cancel_reply c = detail::decode_cancel(
      eval(ctx, detail::cancel_script, {key("stream"), key("job:" + std::string(id))},
           {std::string(group), millis(std::max<duration>(options_.result_ttl, std::chrono::milliseconds(1)))}));
  if (c == detail::cancel_reply::unknown) return std::nullopt;
  if (cancelled_here != nullptr) *cancelled_here = c == detail::cancel_reply::cancelled;
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
  return detail::decode_finish(
      eval(ctx, detail::finish_script, {key("stream"), key("job:" + std::string(id)), key("stats")}, args));
}

job_queue::start_answer job_queue::start(const context& ctx, const held_entry& e, std::string_view consumer,
                                         unsigned max_deliveries, std::string_view token) {
  return detail::decode_start(
      eval(ctx, detail::start_script, {key("stream"), key("job:" + e.job_id), key("dead")},
           {std::string(group), e.entry, std::string(consumer), std::to_string(max_deliveries), e.job_id,
            millis(std::max<duration>(options_.result_ttl, std::chrono::milliseconds(1))), std::string(token)}));
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
  return detail::decode_renew(eval(ctx, detail::renew_script, keys, args));
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
  return detail::decode_hand_back(eval(ctx, detail::hand_back_script, keys, args));
}

void job_queue::release(const context& ctx, std::string_view consumer, std::string_view token) {
  // Released or not (another process holds the name now), nothing is left to do.
  static_cast<void>(
      detail::decode_release(eval(ctx, detail::release_script, {key("lease:" + std::string(consumer)), key("slots")},
                                  {std::string(consumer), std::string(token)})));
}

std::string job_queue::lease_of(const context& ctx, std::string_view consumer) {
  const redis_reply r = redis_.call(ctx, {"GET", key("lease:" + std::string(consumer))});
  if (r.is_error()) broker_error("GET lease", r);
  return r.is_nil() ? std::string() : r.str;
}

}  // namespace hourglass::fleet
