// A schedule's fires in memory mode: settled in this process only (lost on
// a restart, as every memory job is), on the wall clock as the daemon reads
// it through its own clock since the store began (a manual clock in tests
// moves it; a stepped system clock does not). Internal to the server.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/job_store.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/support/rfc3339.hpp"
#include "schedules/schedules.hpp"

namespace hourglass::server::detail {

class memory_fires {
 public:
  explicit memory_fires(hourglass::clock& clk);

  // Settles `s`'s fires up to now: the one due now, if any, is enqueued by
  // `enqueue(fresh_for)` (its job's id; "" when the store refused it, a
  // missed fire; nullopt when it has no handler) unless the previous
  // fire's job is `unfinished` and the schedule allows no overlap.
  schedule_tick tick(const schedule& s, const std::function<bool(const std::string&)>& unfinished,
                     const std::function<std::optional<std::string>(duration fresh_for)>& enqueue);

 private:
  struct fire_record {
    bool seen = false;
    support::wall_time settled{};
    schedule_state state;
  };
  support::wall_time wall_now() const;

  hourglass::clock& clk_;
  const time_point clk_at_start_;
  const support::wall_time wall_at_start_;
  std::mutex mu_;
  std::map<std::string, fire_record, std::less<>> records_;
};

}  // namespace hourglass::server::detail
