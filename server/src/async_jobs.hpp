// The store of async jobs (Prefer: respond-async): id -> state, timings and
// result, bounded in count and in how long finished jobs are kept.
// Internal to the server.
//
// Thread safety: every member may be called from any thread. An async_job's
// fields below `mu` are guarded by it; `phase` is atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>

#include "hourglass/executor.hpp"
#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

enum class job_phase : int { queued, running, abandoned };

struct async_job {
  std::string id;
  std::string handler;
  time_point created{};
  std::atomic<job_phase> phase{job_phase::queued};

  std::mutex mu;
  job_ref ref;                  // set once submitted
  bool submitted = false;
  bool cancel_requested = false;
  bool finished = false;
  status st;
  job_timings timings;
  time_point finished_at{};
  handler_result result;        // when ok
  unsigned error_http = 0;      // when error
  std::string error_code;
  std::string error_message;
};

class async_store {
 public:
  async_store(std::size_t max_jobs, duration ttl) : max_jobs_(max_jobs), ttl_(ttl) {}

  // A new queued job, or nullptr when max_jobs are stored and none is finished.
  std::shared_ptr<async_job> create(std::string handler, time_point now);
  std::shared_ptr<async_job> find(std::string_view id, time_point now);
  void remove(const std::string& id);
  // The job has its outcome (its fields are already set): start its TTL.
  void finished(const async_job& job, time_point now);
  std::size_t size() const;

 private:
  void purge_locked(time_point now);
  bool evict_one_locked();
  std::string new_id_locked();

  const std::size_t max_jobs_;
  const duration ttl_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<async_job>> jobs_;
  std::deque<std::pair<time_point, std::string>> finished_;  // in finishing order
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace hourglass::server::detail
