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
// is past its freshness when the deadline is not after `time_sent`.
time_point start_by_on_our_clock(const job_age& age, duration freshness, time_point time_sent) noexcept;

// Whether a job that must start by `start_by` is still worth starting at
// `now`: at least max(min_budget, 1 tick) left, the executor's own rule.
bool worth_starting(time_point start_by, duration min_budget, time_point now) noexcept;

// The fleet's predicted wait for a new job: backlog x mean run time / live
// worker slots. With no live slot nothing will start it: `duration::max()`.
duration fleet_predicted_wait(std::uint64_t backlog, duration mean_run, std::uint64_t live_slots) noexcept;

// The freshness to store with a job enqueued `round_trip` after its
// freshness began counting (one round trip of our own so far): its age
// counts from its entry id, stamped while the enqueue script runs, part of
// a round trip later still. Both come off (the next estimated by the
// first), so the fleet errs early, never late; never below zero.
duration freshness_at_entry(duration freshness, duration round_trip) noexcept;

// Admission at enqueue: the freshness must cover the predicted wait plus the
// minimum useful budget. False: refused (504 deadline_exceeded/admission),
// never entering the stream.
bool admit_at_enqueue(duration freshness, duration predicted_wait, duration min_budget) noexcept;

}  // namespace hourglass::fleet
