// The memory job store's table (job_store.hpp, make_memory_job_store): id ->
// state, timings and result, bounded in count and in how long finished jobs
// are kept. Internal to the server.
//
// The table owns its jobs' state transitions:
//   create -> queued -> (started) running -> (finish) finished -> expired
// with cancel() as a request that reaches the job through its job_ref. The
// rest of the daemon reads copies (async_record) and never writes a job's
// fields.
//
// Every transition on an id the store no longer holds (evicted, expired,
// removed) does nothing: a job may outlive its record.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/executor.hpp"
#include "hourglass/server/handler.hpp"
#include "job_view.hpp"

namespace hourglass::server::detail {

enum class async_state { queued, running, finished };

// A job as the store reports it: a copy, taken under the store's lock.
struct async_record {
  std::string id;
  std::string handler;
  time_point created{};
  async_state state = async_state::queued;
  bool cancel_requested = false;
  // Once finished:
  status st;
  job_timings timings;
  time_point finished_at{};
  handler_result result;    // when ok
  unsigned error_http = 0;  // when error
  std::string error_code;
  std::string error_message;
};

// What a job ended with, as finish() records it.
struct async_outcome {
  status st;
  job_timings timings;
  handler_result result;  // when ok
  unsigned error_http = 0;
  std::string error_code;
  std::string error_message;
};

// What the submitter does once the executor has the job (submitted()).
struct after_submit {
  bool cancel_now = false;        // a DELETE came first: cancel the job_ref
  std::optional<status> refused;  // refused at admission: the record is gone, answer this
};

class memory_jobs {
 public:
  // At most `max_jobs` (the oldest finished job is evicted for a new one),
  // each finished job kept for `ttl`.
  memory_jobs(std::size_t max_jobs, duration ttl) : max_jobs_(max_jobs), ttl_(ttl) {}

  // A new queued job's id, or nullopt when the table is full and no finished
  // job can be evicted to make room.
  std::optional<std::string> create(std::string_view handler, time_point now);
  // The executor has the job: DELETE reaches it through `ref` from now on.
  // A job refused at admission (its outcome already in) is removed here.
  after_submit submitted(const std::string& id, job_ref ref);
  // queued -> running (the job's function started).
  void started(const std::string& id);
  // The job's one outcome: starts its TTL.
  void finish(const std::string& id, async_outcome outcome, time_point now);
  // Requests cancellation (not for a finished job) and returns the job as it
  // is afterwards: a queued job is finished (cancelled) at once.
  std::optional<async_record> cancel(const std::string& id, time_point now);
  // nullopt for an unknown or expired id.
  std::optional<async_record> find(const std::string& id, time_point now);
  // Up to `limit` jobs whose state matches `state` ("" any, "finished", or a
  // state's name), in id order from just after `after` ("" from the start).
  // Ids are fixed, so a job held throughout a walk is listed exactly once.
  std::vector<async_record> list(std::string_view state, const std::string& after, std::size_t limit, time_point now);
  std::size_t size() const;

 private:
  struct entry {
    async_record rec;
    job_ref ref;  // set once submitted
    bool submitted = false;
  };

  void purge_locked(time_point now);
  bool evict_one_locked();
  std::string new_id_locked();

  const std::size_t max_jobs_;
  const duration ttl_;
  mutable std::mutex mu_;
  std::map<std::string, entry, std::less<>> jobs_;           // by id: listing walks them in order
  std::deque<std::pair<time_point, std::string>> finished_;  // in finishing order
  std::random_device rng_;
};

// The job object of `r` at `now`.
job_view view_of(const async_record& r, time_point now);

}  // namespace hourglass::server::detail
