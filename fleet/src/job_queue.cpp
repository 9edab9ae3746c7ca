#include "hourglass/fleet/job_queue.hpp"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "batch_lane.hpp"
#include "hourglass/fleet/freshness.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "scripts.hpp"

namespace hourglass::fleet {

namespace {

using detail::broker_error;
using detail::millis;

}  // namespace

std::string new_job_id() {
  // 128 bits from the OS's CSPRNG (getrandom): ids are unguessable and do
  // not collide across a fleet, as a 32-bit-seeded PRNG's would. Read 4 KiB
  // at a time per thread: one system call per 256 ids, not four per id.
  struct random_bytes {
    std::array<unsigned char, 4096> buf{};
    std::size_t used = buf.size();
  };
  thread_local random_bytes r;
  if (r.used + 16 > r.buf.size()) {
    std::size_t got = 0;
    while (got < r.buf.size()) {
      const ssize_t n = ::getrandom(r.buf.data() + got, r.buf.size() - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
      got += static_cast<std::size_t>(n);
    }
    r.used = 0;
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (std::size_t i = 0; i < 16; ++i) {
    const unsigned char b = r.buf[r.used + i];
    id[2 * i] = hex[b >> 4];
    id[2 * i + 1] = hex[b & 0xf];
  }
  std::fill_n(r.buf.begin() + static_cast<std::ptrdiff_t>(r.used), 16, 0);  // never handed out twice
  r.used += 16;
  return id;
}

job_queue::job_queue(redis_client& redis, queue_options options)
    : redis_(redis),
      options_(std::move(options)),
      alive_(std::make_shared<detail::liveness>()),
      enqueue_lane_(new_enqueue_lane()),
      start_lane_(new_start_lane()) {
  if (options_.name.empty() || options_.name.find_first_of("{}: \t\r\n") != std::string::npos) {
    throw std::invalid_argument("queue name '" + options_.name + "' must be non-empty, without {, }, : or spaces");
  }
  if (options_.shards < 1 || options_.shards > 64 || options_.shard >= options_.shards) {
    throw std::invalid_argument("queue " + options_.name + ": shard " + std::to_string(options_.shard) + " of " +
                                std::to_string(options_.shards) + " (1 to 64 shards)");
  }
  tag_ = !options_.tag.empty() ? options_.tag
         : options_.shard == 0 ? options_.name
                               : options_.name + ":" + std::to_string(options_.shard);
}

unsigned shard_of_job(std::string_view id, unsigned shards) noexcept {
  if (shards <= 1 || id.size() < 2) return 0;
  unsigned v = 0;
  for (const char c : id.substr(id.size() - 2)) {
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= static_cast<unsigned>(c - 'a' + 10);
    } else {
      return 0;
    }
  }
  return v < shards ? v : 0;
}

job_queue::~job_queue() {
  const std::lock_guard lock(alive_->mu);
  alive_->alive = false;
}

std::string job_queue::key(std::string_view suffix) const {
  std::string k;
  k.reserve(6 + tag_.size() + suffix.size());
  return k.append("hg:{").append(tag_).append("}:").append(suffix);
}

void job_queue::ensure_group(const context& ctx) {
  const redis_reply r = redis_.call(ctx, {"XGROUP", "CREATE", key("stream"), std::string(group), "0", "MKSTREAM"});
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) != 0) broker_error("XGROUP CREATE", r);
}

std::vector<finish_result> job_queue::finish_batch(const context& ctx, const std::vector<outcome>& outcomes,
                                                   std::string_view token, std::vector<std::string>* cancelled) {
  if (outcomes.empty()) return {};
  std::vector<std::string> keys{key("stream"), key("stats"), key("delayed")};
  std::vector<std::string> args{std::string(group), millis(options_.result_ttl), std::string(token)};
  for (const outcome& o : outcomes) {
    keys.push_back(key("job:" + o.job_id));
    args.push_back(o.entry);
    args.push_back(o.run_time ? detail::micros(*o.run_time) : "-1");
    if (o.wait) {  // no outcome: the job waits for its children
      args.emplace_back("wait");
      args.push_back(o.wait->rule);
      args.push_back(detail::micros_up(std::clamp(o.wait->keep, duration::zero(), duration::max() / 2)));
      args.emplace_back("0");
      continue;
    }
    // The outcome must name a final state, or the job would leave the stream unfinished.
    bool final_state = false;
    for (const auto& [f, v] : o.fields) {
      if (f != "state") continue;
      const auto state = jobs::parse_job_state(v);
      final_state = state && jobs::is_final(*state);
    }
    if (!final_state) throw std::invalid_argument("job_queue::finish needs a final \"state\" field");
    if (o.retry) {
      args.emplace_back("retry");
      args.push_back(detail::micros_up(std::max(o.retry->delay, duration::zero())));
      args.push_back(detail::micros_up(std::clamp(o.retry->need, duration::zero(), duration::max() / 2)));
      args.push_back(o.retry->error);
      args.push_back(o.retry->message);
      args.push_back(detail::ms_text(o.retry->run_time));
    } else {
      args.emplace_back("final");
    }
    args.push_back(std::to_string(2 * o.fields.size()));
    for (const auto& [f, v] : o.fields) {
      args.push_back(f);
      args.push_back(v);
    }
  }
  return detail::decode_finish(eval(ctx, detail::finish_script, keys, args), outcomes.size(), cancelled);
}

finish_result job_queue::finish(const context& ctx, std::string_view id, std::optional<duration> run_time,
                                const std::vector<std::pair<std::string, std::string>>& fields) {
  return finish_batch(ctx, {{std::string(id), run_time, fields}}).front();
}

job_queue::renew_answer job_queue::renew(const context& ctx, std::string_view consumer, const lease_value& lease_v,
                                         duration lease, std::size_t slots, const std::vector<held_entry>& held) {
  std::vector<std::string> keys{
      key("lease:" + std::string(consumer)), key("slots"), key("stream"), key("stats"), key("delayed"), key("paused")};
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

std::vector<job_queue::delayed_job> job_queue::first_delayed(const context& ctx, std::size_t count) {
  if (count == 0) return {};
  const redis_reply r = redis_.call(ctx, {"ZRANGE", key("delayed"), "0", std::to_string(count - 1), "WITHSCORES"});
  if (!r.is_array() || r.elements.size() % 2 != 0) broker_error("ZRANGE delayed", r);
  std::vector<delayed_job> out;
  for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    // A score is a double's text ("1733390000000"); a whole number of ms here.
    double ms = 0;
    try {
      ms = std::stod(r.elements[i + 1].str);
    } catch (const std::exception&) {
      broker_error("ZRANGE delayed", r);
    }
    out.push_back({r.elements[i].str, static_cast<std::int64_t>(ms)});
  }
  return out;
}

job_queue::promoted job_queue::promote(const context& ctx, const std::vector<std::string>& job_ids,
                                       std::optional<duration> predicted_wait) {
  std::vector<std::string> keys{key("stream"), key("delayed")};
  std::vector<std::string> args{!predicted_wait                      ? std::string()
                                : *predicted_wait == duration::max() ? std::string("-1")
                                                                     : detail::micros_up(*predicted_wait),
                                millis(std::max<duration>(options_.result_ttl, std::chrono::milliseconds(1))),
                                std::string(group)};
  for (const std::string& id : job_ids) {
    keys.push_back(key("job:" + id));
    args.push_back(id);
  }
  detail::promote_reply p = detail::decode_promote(eval(ctx, detail::promote_script, keys, args));
  if (p.nostream) {
    // The stream was deleted (FLUSHALL, a new broker): made again, with its group, and once more.
    ensure_group(ctx);
    p = detail::decode_promote(eval(ctx, detail::promote_script, keys, args));
    if (p.nostream) throw redis_unavailable("redis: promote: the stream is gone");
  }
  return std::move(static_cast<promoted&>(p));
}

std::string job_queue::shard_tags(const context& ctx) {
  const redis_reply r = redis_.call(ctx, {"GET", key("shards")});
  if (r.is_error()) broker_error("GET shards", r);
  return r.str;  // nil: ""
}

std::string job_queue::exchange_shard_tags(const context& ctx, const std::string& expected,
                                           const std::string& desired) {
  const redis_reply r = eval(ctx, detail::shards_script, {key("shards")}, {expected, desired});
  if (!r.is_string()) broker_error("shards", r);
  return r.str;
}

job_queue::schedule_record job_queue::look_schedule(const context& ctx, std::string_view name) {
  const redis_reply r = eval(ctx, detail::schedule_script, {key("schedule:" + std::string(name)), key("paused")},
                             {"look"});
  if (!r.is_array() || r.elements.size() != 7 || !r.elements[0].is_integer()) broker_error("schedule", r);
  schedule_record s;
  s.settled_ms = r.elements[0].integer;
  s.last_fire_ms = detail::number_or(r.elements[1].str, 0);
  s.last_job = r.elements[2].str;
  s.queue_paused = !r.elements[6].str.empty();
  s.missed = static_cast<std::uint64_t>(std::max<std::int64_t>(detail::number_or(r.elements[3].str, 0), 0));
  const auto now = parse_broker_time(r.elements[4].str, r.elements[5].str);
  if (!now) throw redis_unavailable("redis: TIME is not a time");
  s.broker_now_us = *now;
  return s;
}

bool job_queue::settle_schedule(const context& ctx, std::string_view name, const schedule_record& looked,
                                std::int64_t fire_ms, std::uint64_t missed) {
  const redis_reply r = eval(
      ctx, detail::schedule_script, {key("schedule:" + std::string(name))},
      {"settle", std::to_string(fire_ms), std::to_string(missed), std::to_string(looked.settled_ms)});
  if (!r.is_integer()) broker_error("schedule", r);
  return r.integer == 1;
}

void job_queue::schedule_ran(const context& ctx, std::string_view name, std::string_view job_id) {
  const redis_reply r = eval(ctx, detail::schedule_script, {key("schedule:" + std::string(name))},
                             {"ran", std::string(job_id)});
  if (!r.is_integer()) broker_error("schedule", r);
}

std::string job_queue::lease_of(const context& ctx, std::string_view consumer) {
  const redis_reply r = redis_.call(ctx, {"GET", key("lease:" + std::string(consumer))});
  if (r.is_error()) broker_error("GET lease", r);
  return r.is_nil() ? std::string() : r.str;
}

}  // namespace hourglass::fleet
