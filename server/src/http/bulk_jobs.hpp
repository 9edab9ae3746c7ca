// POST /v1/jobs:bulk, read and answered as pure functions: the body's jobs
// in, one answer per job out (docs/reference/http-api.md, "Bulk enqueue").
// Each job is judged on its own: one that cannot be read gets its own 400
// and the others still go in, as Sidekiq's push_bulk and BullMQ's addBulk
// take many jobs in one call. Only a body that is not a list of jobs at all
// is refused whole. Internal to the server.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/time.hpp"

namespace hourglass::server::detail {

// At most this many jobs in one request: a bigger batch only adds latency to
// the jobs at its front (the fleet sends a batch as one script call).
inline constexpr std::size_t max_bulk_jobs = 1000;

// One job of the list, or why it cannot be taken.
struct bulk_item {
  std::string handler;
  std::string payload;       // a string as is; any other JSON value as its JSON text
  std::string content_type;  // "" none stated (a JSON payload: application/json)
  std::optional<std::string> idempotency_key;
  std::optional<duration> freshness;  // freshness_ms; nullopt: the request's Job-Freshness
  std::string error;                  // not "": a 400 with this code and `message`
  std::string message;
};

struct bulk_reading {
  bool ok = false;
  std::string message;  // !ok: why the body is not a list of jobs (400 invalid_bulk)
  std::vector<bulk_item> items;
};

// {"jobs": [{"handler": ..., "payload": ..., "content_type": ...,
//            "idempotency_key": ..., "freshness_ms": ...}, ...]}
bulk_reading read_bulk_body(std::string_view body);

// One job's answer: what POST /v1/jobs/{handler} would have answered.
struct bulk_answer {
  unsigned status = 0;
  std::string body;  // that answer's JSON body
};

// {"errors": any status but 202, "jobs": [{"status": 202, "body": {...}}, ...]},
// in the order of the request.
std::string bulk_response_body(const std::vector<bulk_answer>& answers);

}  // namespace hourglass::server::detail
