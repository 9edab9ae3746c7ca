// The store of async jobs (Prefer: respond-async): id -> state, timings and
// result, bounded in count and in how long finished jobs are kept. Internal
// to the server.
//
// The store owns its jobs' state transitions:
//   create -> queued -> (started) running -> (finish) finished -> expired
// with cancel() as a request that reaches the job through its job_ref. The
// rest of the daemon reads copies (async_record) and never writes a job's
// fields. make_memory_store is the process-local store behind the memory
// backend (async_backend.hpp); fleet mode has a backend of its own
// (fleet_backend.hpp), whose store is the broker.
//
// Every transition on an id the store no longer holds (evicted, expired,
// removed) does nothing: a job may outlive its record.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "hourglass/executor.hpp"
#include "hourglass/server/handler.hpp"

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

class async_store {
 public:
  virtual ~async_store() = default;

  // A new queued job's id, or nullopt when the store is full and no finished
  // job can be evicted to make room.
  virtual std::optional<std::string> create(std::string_view handler, time_point now) = 0;
  // The executor has the job: DELETE reaches it through `ref` from now on.
  // A job refused at admission (its outcome already in) is removed here.
  virtual after_submit submitted(const std::string& id, job_ref ref) = 0;
  // queued -> running (the job's function started).
  virtual void started(const std::string& id) = 0;
  // The job's one outcome: starts its TTL.
  virtual void finish(const std::string& id, async_outcome outcome, time_point now) = 0;
  // Requests cancellation (not for a finished job) and returns the job as it
  // is afterwards: a queued job is finished (cancelled) at once.
  virtual std::optional<async_record> cancel(const std::string& id, time_point now) = 0;
  // nullopt for an unknown or expired id.
  virtual std::optional<async_record> find(const std::string& id, time_point now) = 0;
  virtual std::size_t size() const = 0;
};

// In process memory: at most `max_jobs` (the oldest finished job is evicted
// for a new one), each finished job kept for `ttl`.
std::unique_ptr<async_store> make_memory_store(std::size_t max_jobs, duration ttl);

}  // namespace hourglass::server::detail
