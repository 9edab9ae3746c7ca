// The fleet's durable queue on Redis Streams, producer side: enqueue with
// admission and idempotency, a job's record by id, cancel by id, and the
// first-outcome-wins finish (docs/fleet.md has the layout).
//
//   hourglass::fleet::job_queue q(redis, {.name = "default"});
//   q.ensure_group(ctx);
//   enqueued e = q.enqueue(ctx, {.handler = "resize", .payload = body, .freshness = 30s});
//   if (e.verdict == enqueued::kind::accepted) ... e.id ...
//
// Every call is one or two round trips on the given connection and throws
// redis_unavailable when the broker cannot be used (nothing was accepted
// then: a 503, never a 202), or stopped_error when `ctx` stopped.
//
// Thread safety: as the redis_connection it uses; the object itself holds
// only constants and the scripts' SHA1s (guarded).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/context.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet {

struct queue_options {
  std::string name = "default";  // --queue
  duration result_ttl = std::chrono::hours(24);
  duration idempotency_ttl = std::chrono::hours(24);
};

struct job_spec {
  std::string handler;
  std::string payload;
  std::string content_type = "application/octet-stream";
  duration freshness = duration::max();  // how long it may wait to start
  duration min_budget = duration::zero();
  std::string idempotency_key;  // empty: none
};

struct enqueued {
  enum class kind { accepted, duplicate, refused };
  kind verdict = kind::accepted;
  std::string id;             // accepted: the new job; duplicate: the first one
  duration predicted_wait{};  // what admission judged
};

// A job as the broker holds it: the fields of its hash, as written.
struct fleet_job {
  std::string id;
  std::map<std::string, std::string, std::less<>> fields;  // handler, state, entry, outcome fields ...
  std::string_view field(std::string_view name) const {
    const auto it = fields.find(name);
    return it == fields.end() ? std::string_view() : std::string_view(it->second);
  }
  std::string_view state() const { return field("state"); }  // queued, running, ok, ..., dead
};

// How a finish was recorded.
enum class finish_result { first, duplicate, unknown };

class job_queue {
 public:
  job_queue(redis_connection& redis, queue_options options);

  // Creates the stream and its consumer group if missing (idempotent).
  void ensure_group(const context& ctx);

  enqueued enqueue(const context& ctx, const job_spec& job);
  std::optional<fleet_job> find(const context& ctx, std::string_view id);
  // Cancels a queued job at once or marks a running one; the job as it is afterwards.
  std::optional<fleet_job> cancel(const context& ctx, std::string_view id);

  // Records the job's outcome (`fields`: state and the outcome's details)
  // unless one is recorded already. `run_time`: how long it ran, for the
  // fleet's mean run time (nullopt: it did not run).
  finish_result finish(const context& ctx, std::string_view id, std::optional<duration> run_time,
                       const std::vector<std::pair<std::string, std::string>>& fields);

  // "hg:{name}:suffix": every key of this queue, in one hash slot.
  std::string key(std::string_view suffix) const;
  const queue_options& options() const noexcept { return options_; }
  static constexpr std::string_view group = "hourglass";

 private:
  redis_reply eval(const context& ctx, const char* script, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args);

  redis_connection& redis_;
  queue_options options_;
  std::mutex mu_;
  std::map<const char*, std::string> shas_;  // script -> SHA1 from SCRIPT LOAD
};

// A new job id: 32 hex digits from a CSPRNG-seeded generator.
std::string new_job_id();

}  // namespace hourglass::fleet
