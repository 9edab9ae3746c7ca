// What becomes of a delivered entry once our executor is done with its job:
// its outcome to record, a hand-back to the fleet, or nothing from us. A
// pure function of the job's result and what we knew of the delivery, so
// each rule is tested without a broker or threads.
#pragma once

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "broker_error.hpp"
#include "hourglass/fleet/delivery.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/job.hpp"
#include "hourglass/job_retry.hpp"

namespace hourglass::fleet::detail {

using field_list = std::vector<std::pair<std::string, std::string>>;

// An outcome's `state` field: the final state of a job that ended with `o`,
// named as the job object names it.
std::pair<std::string, std::string> state_field(outcome o);

// What the job's function (the start script, then the handler) returns.
struct run_value {
  enum class kind {
    ran,        // the handler ran: `out` is its result
    expired,    // the start script's TIME said its freshness had run out
    skipped,    // not ours any more, or an outcome is recorded already
    dead,       // max_deliveries reached: the start script dead-lettered it
    cancelled,  // a DELETE marked it: the start script recorded it cancelled
  };
  kind k = kind::skipped;
  job_output out;
  unsigned dead_dropped = 0;  // dead: entries of the dead list its dead-lettering dropped (--dead-max)
};

// What the retry rule (job_retry.hpp) needs of a job whose attempt ended,
// on the broker's clock: microseconds since the epoch as time_points.
struct retry_facts {
  job_retry_policy policy;      // max_attempts 1: never retried
  int attempt = 1;              // this attempt's number
  time_point deadline = never;  // the whole job's, across attempts
  time_point now{};             // the broker's time now, as we estimate it: never behind it
  duration predicted_wait{};    // the fleet's, at the last renewal
  duration min_budget{};
  double jitter = 0;  // in [0, 1)
};

// What we knew of the delivery when its job ended.
struct delivery_facts {
  bool reclaimed = false;       // taken over from a dead holder: late is stage reclaim
  bool started = false;         // the start script said run
  duration queued{};            // the broker's age of the job when it started (or expired)
  std::optional<duration> run;  // how long the handler ran, when it did
  retry_facts retry;
};

struct settlement {
  enum class action {
    write,      // record `fields` as the job's outcome
    hand_back,  // not the job's outcome: back to the fleet at once, delivery uncounted
    forget,     // nothing from us: recorded by the start script, not ours, or left to reclaim
  };
  enum class tally { none, expired, dead_lettered, cancelled_at_start, broker_error };
  action what = action::forget;
  field_list fields;
  tally counted = tally::none;
  // The job's outcome as the metrics count it: for write, once the finish
  // says it was the first; for dead_lettered and cancelled_at_start, at once
  // (the start script recorded it).
  status recorded;
  // A failed attempt the rule retries: the finish schedules it, or records
  // `fields` (deadline_exceeded/retry) when it no longer fits on the broker.
  std::optional<job_queue::outcome::retry_request> retry;
  // The rule's verdict, for hourglass_job_retries_total: set for a job with
  // more than one attempt whose attempt ended in a way the rule judges.
  std::optional<job_retry_verdict> retry_verdict;
  // The handler asked to wait for its children: written as a wait (no
  // fields, nothing counted), not an outcome.
  std::optional<wait_request> wait;
};

// The fields of a job recorded deadline_exceeded before it ran.
field_list expired_fields(duration queued, expiry_stage stage);

settlement settle(const delivery_facts& d, job_result<run_value>&& r,
                  const std::function<error_record(std::exception_ptr)>& describe);

}  // namespace hourglass::fleet::detail
