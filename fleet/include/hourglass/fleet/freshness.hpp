// Freshness on the broker's clock, and admission by the fleet's predicted
// wait: the fleet's time decisions as pure functions (docs/fleet.md, "The
// clock rule"; docs/reference/fleet-layout.md, "Time").
//
// The clock rule: a job's age is the broker's TIME minus the milliseconds in
// its stream entry id (both the broker's own clock), never one host's wall
// clock against another's. What is left of its freshness becomes a deadline
// on this daemon's monotonic clock, counted from when the TIME call was *sent*
// (so it errs early by at most one round trip, never late).
//
// Worked example: a job added at broker time 1000.000 s (entry id
// "1000000-0") with Job-Freshness 5 s. A daemon sends TIME at its monotonic
// t = 42.0 s and reads 1003.200 s: waited 3.2 s, 1.8 s left, local deadline
// 43.8 s. The daemon's wall clock may be off by an hour: it is never read.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "hourglass/time.hpp"

namespace hourglass::fleet {

// A stream entry id "MS-SEQ"; nullopt when it is not one.
struct stream_id {
  std::uint64_t ms = 0;
  std::uint64_t seq = 0;
  friend bool operator==(const stream_id&, const stream_id&) = default;
};
std::optional<stream_id> parse_stream_id(std::string_view text) noexcept;

// Redis TIME's reply (seconds, microseconds) as microseconds since the epoch.
std::optional<std::int64_t> parse_broker_time(std::string_view seconds, std::string_view micros) noexcept;

struct job_age {
  duration waited{};      // broker now - entry time, never negative
  bool negative = false;  // the entry is newer than TIME: counted, treated as zero
};
job_age age_on_broker(const stream_id& entry, std::int64_t broker_now_us) noexcept;

// What is left of `freshness` once a job has waited `age`, as a deadline on
// our monotonic clock from `time_sent` (when the TIME call went out). The job
// is past its freshness when the deadline is not after `time_sent`. Whether
// it is still worth starting is the executor's rule (starts_in_time,
// hourglass/job_bounds.hpp), and the fleet's predicted wait its
// predicted_wait (hourglass/admission_policy.hpp) on the broker's counts.
time_point start_by_on_our_clock(const job_age& age, duration freshness, time_point time_sent) noexcept;

// The freshness to store with a job enqueued `round_trip` after its
// freshness began counting (one round trip of our own so far): its age
// counts from its entry id, stamped while the enqueue script runs, part of
// a round trip later still. Both come off (the next estimated by the
// first), so the fleet errs early, never late; never below zero.
duration freshness_at_entry(duration freshness, duration round_trip) noexcept;

}  // namespace hourglass::fleet
