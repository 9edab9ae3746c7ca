// The queue object of the API (GET /v1/queues): a queue's health against the
// deadlines its jobs carry, as a store reports it, and its JSON. Internal to
// the server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/support/rfc3339.hpp"

namespace hourglass::server::detail {

struct queue_view {
  std::string name;
  std::string store;                               // "memory" or "fleet"
  std::optional<support::wall_time> paused_since;  // nullopt: running
  std::uint64_t queued = 0;                        // waiting to start
  std::uint64_t running = 0;                       // started (fleet: delivered to a daemon, not finished)
  std::uint64_t scheduled = 0;                     // waiting for a due time (delayed jobs and retries)
  std::uint64_t waiting = 0;                       // suspended: for children, a wake time or a person's signal
  std::optional<std::uint64_t> dead;               // dead-lettered (fleet only)
  std::uint64_t retrying = 0;                      // of the scheduled: on an attempt after their first
  bool retrying_partial = false;                   // fleet: retrying and waiting counted among the first 1,000 due only
  std::optional<double> oldest_queued_age_ms;      // the oldest waiting job's age (fleet: on the broker's clock)
  bool predicts_wait = false;                      // the store predicts waits (fleet): predicted_wait_ms is set
  std::optional<double> predicted_wait_ms;         // what admission promises a new job; nullopt: unbounded
  std::optional<double> mean_run_ms;               // the fleet's mean run time
  std::uint64_t live_slots = 0;                    // worker slots taking jobs
  struct consumer {
    std::string name;
    std::uint64_t slots = 0;
    std::uint64_t held = 0;               // jobs it holds
    std::optional<double> lease_left_ms;  // nullopt: none recorded; <= 0: expired (it left or died)
    bool draining = false;                // a live lease and no slots: finishing its jobs, taking none
  };
  std::vector<consumer> consumers;  // fleet: every daemon with slots or jobs held
  // fleet: the fleet's counters since the queue began, as the broker keeps
  // them ("finished:ok", "expired:queue", "retries", "dead_dropped", ...).
  std::vector<std::pair<std::string, std::uint64_t>> totals;
  // fleet: the same counters per second over the last minute and 5 minutes
  // (totals_rates.hpp), when this daemon has read the queue over enough of them.
  struct recent_rates {
    double window_s = 0, span_s = 0;
    std::vector<std::pair<std::string, double>> per_second;
  };
  std::vector<recent_rates> recent;
};

// What a queue request asks of the store.
enum class queue_action { look, pause, resume };

std::string queue_json(const queue_view& q);

}  // namespace hourglass::server::detail
