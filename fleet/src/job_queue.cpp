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

std::string job_queue::key(std::string_view suffix) const { return keys()(suffix); }

detail::queue_keys job_queue::keys() const { return {tag_}; }

void job_queue::ensure_group(const context& ctx) {
  const redis_reply r = redis_.call(ctx, {"XGROUP", "CREATE", key("stream"), std::string(group), "0", "MKSTREAM"});
  if (r.is_error() && r.str.rfind("BUSYGROUP", 0) != 0) broker_error("XGROUP CREATE", r);
}

std::vector<finish_result> job_queue::finish_batch(const context& ctx, const std::vector<outcome>& outcomes,
                                                   std::string_view token, std::vector<std::string>* cancelled) {
  if (outcomes.empty()) return {};
  return detail::decode_finish(eval(ctx, detail::encode_finish(keys(), options_.result_ttl, token, outcomes)),
                               outcomes.size(), cancelled);
}

finish_result job_queue::finish(const context& ctx, std::string_view id, std::optional<duration> run_time,
                                const std::vector<std::pair<std::string, std::string>>& fields) {
  return finish_batch(ctx, {{std::string(id), run_time, fields}}).front();
}

job_queue::renew_answer job_queue::renew(const context& ctx, std::string_view consumer, const lease_value& lease_v,
                                         duration lease, std::size_t slots, const std::vector<held_entry>& held) {
  return detail::decode_renew(eval(ctx, detail::encode_renew(keys(), consumer, lease_v, lease, slots, held)));
}

std::size_t job_queue::hand_back(const context& ctx, std::string_view consumer, std::string_view lease_token,
                                 const std::vector<held_entry>& held) {
  if (held.empty()) return 0;
  return detail::decode_hand_back(eval(ctx, detail::encode_hand_back(keys(), consumer, lease_token, held)));
}

void job_queue::release(const context& ctx, std::string_view consumer, std::string_view token) {
  // Released or not (another process holds the name now), nothing is left to do.
  static_cast<void>(detail::decode_release(eval(ctx, detail::encode_release(keys(), consumer, token))));
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
  const detail::script_call call = detail::encode_promote(keys(), predicted_wait, options_.result_ttl, job_ids);
  detail::promote_reply p = detail::decode_promote(eval(ctx, call));
  if (p.nostream) {
    // The stream was deleted (FLUSHALL, a new broker): made again, with its group, and once more.
    ensure_group(ctx);
    p = detail::decode_promote(eval(ctx, call));
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
  return detail::decode_shards(eval(ctx, detail::encode_shards(keys(), expected, desired)));
}

job_queue::schedule_record job_queue::look_schedule(const context& ctx, std::string_view name) {
  return detail::decode_schedule_look(eval(ctx, detail::encode_schedule_look(keys(), name)));
}

bool job_queue::settle_schedule(const context& ctx, std::string_view name, const schedule_record& looked,
                                std::int64_t fire_ms, std::uint64_t missed) {
  return detail::decode_schedule_settle(
      eval(ctx, detail::encode_schedule_settle(keys(), name, fire_ms, missed, looked.settled_ms)));
}

void job_queue::schedule_ran(const context& ctx, std::string_view name, std::string_view job_id) {
  detail::decode_schedule_ran(eval(ctx, detail::encode_schedule_ran(keys(), name, job_id)));
}

std::string job_queue::lease_of(const context& ctx, std::string_view consumer) {
  const redis_reply r = redis_.call(ctx, {"GET", key("lease:" + std::string(consumer))});
  if (r.is_error()) broker_error("GET lease", r);
  return r.is_nil() ? std::string() : r.str;
}

}  // namespace hourglass::fleet
