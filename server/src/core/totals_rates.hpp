// Rates over recent minutes from the fleet's totals (counters at the
// broker: queue_view::totals), as the daemon has read them: each read of the
// queue (GET /v1/queues, the dashboard's polls, the hourglass command) adds
// a sample; a window's rate is the change across the samples it holds. Pure:
// the samples and `now` in, the rates out, tested without a broker.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/time.hpp"

namespace hourglass::server::detail {

using counters = std::vector<std::pair<std::string, std::uint64_t>>;  // sorted by name

// Per second over `span`, by counter name (every name of the latest sample).
struct window_rates {
  duration window{};  // asked for
  duration span{};    // covered: from the window's oldest sample to the latest
  std::vector<std::pair<std::string, double>> per_second;
};

class totals_history {
 public:
  explicit totals_history(duration keep = std::chrono::minutes(6)) : keep_(keep) {}

  // A reading at `at`; samples older than `keep` are dropped, and samples
  // closer than a second to the one before replace it (a dashboard polling
  // every 2 s, or many pages at once, need no more).
  void add(time_point at, counters totals);

  // The rates over the last `window` before `now`, from the oldest sample in
  // it to the latest; nullopt when the samples in it span less than a
  // quarter of it (too little history to call it a rate over that window).
  std::optional<window_rates> over(duration window, time_point now) const;

 private:
  duration keep_;
  std::deque<std::pair<time_point, counters>> samples_;
};

}  // namespace hourglass::server::detail
