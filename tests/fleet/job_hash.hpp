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

  // The command, for redis.call / a fixture's call.
  operator std::vector<std::string>() const { return command_; }  // NOLINT(google-explicit-constructor)

 private:
  std::vector<std::string> command_;
};

}  // namespace hourglass::fleet::testing
