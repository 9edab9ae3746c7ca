// A job's hash as a script would leave it, put in place by a test: an HSET
// whose field names are the record's (fleet/src/job_fields.hpp, the names
// fleet_job is decoded through) and whose state is one of the daemon's
// (jobs::job_state), so a renamed field or state fails to compile here
// rather than setting up a hash no script reads.
//
//   call(job_hash(job(id)).state(job_state::running).set(job_field::deliveries, 3));
#pragma once

#include <concepts>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hourglass/jobs/job_state.hpp"
#include "job_fields.hpp"

namespace hourglass::fleet::testing {

namespace job_field = detail::job_field;
using jobs::job_state;

class job_hash {
 public:
  explicit job_hash(std::string key) : command_{"HSET", std::move(key)} {}

  job_hash& state(job_state s) { return set(job_field::state, jobs::to_string(s)); }
  job_hash& set(std::string_view field, std::string_view value) {
    command_.emplace_back(field);
    command_.emplace_back(value);
    return *this;
  }
  job_hash& set(std::string_view field, std::integral auto n) { return set(field, std::to_string(n)); }
  // The fields enqueue.lua writes for a job without a retry policy or a key,
  // its entry in the stream `entry`; its state and deliveries are the caller's.
  job_hash& enqueued(std::string_view id, std::string_view handler, std::string_view payload, std::string_view entry,
                     std::string_view freshness_ms = "-1") {
    return set(job_field::id, id)
        .set(job_field::handler, handler)
        .set(job_field::payload, payload)
        .set(job_field::content_type, "text/plain")
        .set(job_field::freshness_ms, freshness_ms)
        .set(job_field::min_budget_ms, 0)
        .set(job_field::entry, entry)
        .set(job_field::idempotency_key, "");
  }

  // The command, for redis.call / a fixture's call.
  operator std::vector<std::string>() const { return command_; }  // NOLINT(google-explicit-constructor)

 private:
  std::vector<std::string> command_;
};

}  // namespace hourglass::fleet::testing
