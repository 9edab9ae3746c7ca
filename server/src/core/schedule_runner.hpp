// The daemon's periodic jobs: one thread looks at every schedule through the
// job store (which settles each fire once, memory or fleet) every quarter
// second of the daemon's clock, counts what each look did
// (hourglass_schedule_fires_total{schedule,result}) and keeps each
// schedule's last and next fire for GET /v1/schedules. Internal to the server.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/job_store.hpp"
#include "hourglass/cancellation.hpp"
#include "hourglass/exposition.hpp"
#include "schedules/schedules.hpp"

namespace hourglass::server::detail {

struct core;

class schedule_runner {
 public:
  // Reads the daemon's schedules (options checked them already).
  explicit schedule_runner(core& c);
  ~schedule_runner();  // stop()
  schedule_runner(const schedule_runner&) = delete;
  schedule_runner& operator=(const schedule_runner&) = delete;

  // Throws std::invalid_argument for a schedule whose handler is not registered.
  void check_handlers() const;
  void start();  // nothing to do without schedules
  void stop();   // the look under way finishes first

  struct view {
    const schedule* s = nullptr;
    schedule_state state;
    std::uint64_t enqueued = 0, missed = 0, skipped_overlap = 0;
    bool looked = false;  // at least one look went through
  };
  std::vector<view> views() const;
  // GET /v1/schedules: {"schedules": [{name, cron, zone, handler, overlap, freshness_ms?, last_fire?,
  // last_job?, next_fire?, fires: {enqueued, missed, skipped_overlap}}]}
  std::string json() const;
  void write_metrics(exposition_writer& w) const;

 private:
  void loop();

  core& c_;
  std::vector<schedule> schedules_;
  mutable std::mutex mu_;
  std::vector<view> views_;
  context_source stop_;
  std::thread thread_;
};

}  // namespace hourglass::server::detail
