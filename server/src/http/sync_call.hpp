// A sync job in flight on its connection: the record the session and the job
// share, and the job's function itself. The session (session_sync.cpp) feeds
// the call's state machine (request_rules.hpp); the job, on a worker, only
// claims its start and shows its context while it runs. Internal to the server.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "core/job_input.hpp"
#include "hourglass/context.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/output_channel.hpp"
#include "hourglass/server/handler.hpp"
#include "http/request_rules.hpp"

namespace hourglass::server::detail {

// A sync job's race between its start and its deadline's answer.
enum class job_phase : int { queued, running, abandoned };

struct sync_call {
  std::atomic<job_phase> phase{job_phase::queued};
  job_ref ref;
  const handler_entry* entry = nullptr;
  duration budget{};
  time_point deadline{};
  time_point submitted_at{};
  sync_state state = sync_state::waiting;            // strand only (request_rules.hpp)
  unsigned early_status = 0;                         // strand only: the status sent at the deadline, if any
  std::optional<job_result<handler_result>> result;  // strand only: the outcome, once in
  // While the handler runs: its context, so a 504 sent at the deadline can
  // say whether the job already crossed a commit point (not a copy: a copy
  // would keep the context alive after its job).
  std::mutex running_mu;
  const context* running = nullptr;
  bool committed_after_run = false;      // set as the handler returns, before its outcome reaches the strand
  std::optional<time_point> started_at;  // when the handler began (under running_mu)
  // A streaming handler's output on its way out (session_stream.cpp); the
  // flags are the strand's.
  std::shared_ptr<output_channel> out;
  bool stream_started = false;  // its status line is to go out first
  bool head_sent = false;
  bool stream_ending = false;  // the trailers go out once the buffered bytes have
  bool stream_done = false;    // the last chunk, with the trailers, is out

  // The timings of an answer sent before the outcome (at the deadline or the
  // grace's end): queued until the handler began, running since.
  job_timings timings_so_far(time_point now);
};

// The job's function: runs `in`'s handler unless the caller was already
// answered at the deadline (then it throws deadline_exceeded/queue and never
// starts), with the context shown on `call` while it runs; a streaming
// handler writes into call->out.
handler_result run_sync_job(const context& ctx, const job_input& in, sync_call& call);

}  // namespace hourglass::server::detail
