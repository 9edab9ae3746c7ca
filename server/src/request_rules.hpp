// The daemon's per-request decisions as pure functions: where a request
// goes, whether it is authorized, what budget it gets, and what a sync call
// does on each event. No sockets, no clocks, no threads: the session reads
// the bytes, asks these, and does what they say. Internal to the server.
#pragma once

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hourglass/time.hpp"

namespace hourglass::server::detail {

// ---- routing -----------------------------------------------------------------

enum class route_kind {
  healthz,             // GET/HEAD /healthz
  readyz,              // GET/HEAD /readyz
  metrics,             // GET/HEAD /metrics
  submit_job,          // POST /v1/jobs/{handler}
  get_job,             // GET /v1/jobs/{id}
  cancel_job,          // DELETE /v1/jobs/{id}
  not_found,           // 404
  method_not_allowed,  // 405 with `allow`
};

struct route {
  route_kind kind = route_kind::not_found;
  std::string_view name;   // the {handler} or {id} segment
  std::string_view allow;  // for method_not_allowed
  bool needs_auth = true;  // everything but /healthz
};

// `target` is the request target as sent (a query string is ignored).
route route_request(boost::beast::http::verb method, std::string_view target) noexcept;

// ---- framing ---------------------------------------------------------------------

// How a request's body is delimited, judged before anything else reads it:
// the shapes behind request smuggling, where two servers on one path would
// split the same bytes into different requests (RFC 9112 section 6). Beast
// already refuses Content-Length beside Transfer-Encoding, and bad values.
enum class framing {
  ok,
  ambiguous,    // 400: more than one Content-Length (even equal), a list, or chunked not the last coding
  unsupported,  // 501: a transfer coding other than chunked (none is decoded here)
};
framing judge_framing(const boost::beast::http::fields& req);

// ---- auth ---------------------------------------------------------------------

// `Authorization: Bearer <token>` (scheme case-insensitive, spaces trimmed),
// compared with `token` in time that depends on the lengths only. An empty
// `token` means the server has no auth: everything is authorized.
bool bearer_authorized(std::string_view authorization, std::string_view token) noexcept;

// Prefer: respond-async (RFC 7240), among other preferences.
bool prefers_async(std::string_view prefer) noexcept;

// ---- budgets --------------------------------------------------------------------

inline constexpr std::string_view job_freshness_header = "Job-Freshness";
inline constexpr std::string_view job_idle_timeout_header = "Job-Idle-Timeout";

struct budget_limits {
  duration default_budget;
  duration max_budget;
};

// The budget a job request gets from its headers (docs/reference/budgets.md):
// the tightest of Request-Timeout, grpc-timeout and
// X-Envoy-Expected-Rq-Timeout-Ms, the default without any, clamped to the
// maximum; for async requests also Job-Freshness (default: the default
// budget); for both, Job-Idle-Timeout (the longest the job may go without
// reporting progress; none: no idle limit; zero is malformed). Any malformed
// or repeated budget header spoils the request.
struct budget_reading {
  bool ok = true;
  std::string message;                    // why not (for the 400 invalid_timeout body)
  bool async = false;                     // Prefer: respond-async
  duration budget{};                      // sync: the caller's budget
  duration freshness{};                   // async: how long it may wait to start
  duration idle_limit = duration::max();  // Job-Idle-Timeout; max: none stated
};
budget_reading read_budget(const boost::beast::http::fields& headers, const budget_limits& limits);

// ---- a job request's gate ----------------------------------------------------------

// What becomes of POST /v1/jobs/{handler} once its headers are in, checked in
// the order of http_server.hpp's "request's path": 404, 413 before any of the
// body is read, 400 invalid_timeout, 503 shutting_down; else the body is read
// (after a 100 Continue when the client asked and the body is still to come).
enum class job_gate {
  unknown_handler,  // 404 not_found
  body_too_large,   // 413 payload_too_large
  invalid_budget,   // 400 invalid_timeout (outcome invalid)
  shutting_down,    // 503 shutting_down (rejected)
  read_body,
  continue_then_read_body,  // write 100 Continue first
};

struct job_request_facts {
  bool handler_known = false;
  std::optional<std::uint64_t> content_length;  // none: chunked or absent
  std::size_t max_body = 0;
  bool budget_ok = false;  // read_budget(...).ok
  bool draining = false;
  bool expects_continue = false;  // Expect: 100-continue
  bool body_complete = false;     // all of it already arrived (or there is none)
};

constexpr job_gate gate_job_request(const job_request_facts& f) noexcept {
  if (!f.handler_known) return job_gate::unknown_handler;
  if (f.content_length && *f.content_length > f.max_body) return job_gate::body_too_large;
  if (!f.budget_ok) return job_gate::invalid_budget;
  if (f.draining) return job_gate::shutting_down;
  return f.expects_continue && !f.body_complete ? job_gate::continue_then_read_body : job_gate::read_body;
}

// ---- the sync call ----------------------------------------------------------------

// A sync job's life on its connection, as an explicit state machine. The
// session feeds it events and does the action each returns.
//
// A streaming handler's answer starts with its first bytes: from then on the
// status line is out, so every ending (the outcome, or the deadline's grace
// running out) ends the stream with trailers saying how the job ended
// (Job-Outcome, Server-Timing) instead of sending a status of its own.
enum class sync_state {
  waiting,       // queued or running, nothing answered yet
  grace,         // the deadline passed while running: the handler has a moment to stop
  streaming,     // a stream's headers and first bytes went out; more may follow
  stream_grace,  // streaming, and the deadline passed: the handler has a moment to stop
  answered,      // answered at the deadline (a 504, or a stream ended); the outcome is still to come
  caller_gone,   // the peer disconnected; the job was cancelled, its outcome is to come
  finished,      // the outcome is in and dealt with
};

// The caller still waits for the answer (or the rest of a stream): a
// disconnect now is a caller gone, and the connection keeps watching for it.
constexpr bool still_open(sync_state s) noexcept {
  return s == sync_state::waiting || s == sync_state::grace || s == sync_state::streaming ||
         s == sync_state::stream_grace;
}

enum class sync_event {
  deadline_while_queued,   // the deadline timer fired and the job had not started (it never will)
  deadline_while_running,  // the deadline timer fired and the job is running
  grace_over,              // the grace timer fired
  outcome,                 // the job's one outcome arrived
  peer_gone,               // the connection was closed or reset by the caller
  first_output,            // a streaming handler's first bytes are ready to go out
};

enum class sync_action {
  none,
  answer_expired_queue,  // 504 deadline_exceeded/queue now
  arm_grace,             // start the grace timer
  answer_expired_run,    // 504 deadline_exceeded/run now (a handler that ignores its context)
  answer_outcome,        // answer with the job's outcome
  log_outcome,           // the caller was answered already: log (and count) only
  cancel_job,            // cancel it (cause caller_gone) and wait for its outcome
  log_caller_gone,       // log the outcome as 499 and close the connection
  start_stream,          // send the stream's status line and headers, then its bytes
  end_stream,            // send what is left of the stream, then trailers with the outcome
  end_stream_expired,    // end the stream now with trailers deadline_exceeded/run
};

struct sync_step {
  sync_state next;
  sync_action action;
};

constexpr sync_step on_sync_event(sync_state s, sync_event e) noexcept {
  using st = sync_state;
  using ev = sync_event;
  using act = sync_action;
  switch (s) {
    case st::waiting:
    case st::grace:
      switch (e) {
        case ev::deadline_while_queued:
          return s == st::waiting ? sync_step{st::answered, act::answer_expired_queue} : sync_step{s, act::none};
        case ev::deadline_while_running:
          return s == st::waiting ? sync_step{st::grace, act::arm_grace} : sync_step{s, act::none};
        case ev::grace_over:
          return s == st::grace ? sync_step{st::answered, act::answer_expired_run} : sync_step{s, act::none};
        case ev::outcome: return {st::finished, act::answer_outcome};
        case ev::peer_gone: return {st::caller_gone, act::cancel_job};
        // Bytes written as the deadline fired are not sent: the answer is a 504.
        case ev::first_output:
          return s == st::waiting ? sync_step{st::streaming, act::start_stream} : sync_step{s, act::none};
      }
      break;
    case st::streaming:
    case st::stream_grace:
      switch (e) {
        case ev::deadline_while_running:
          return s == st::streaming ? sync_step{st::stream_grace, act::arm_grace} : sync_step{s, act::none};
        case ev::grace_over:
          return s == st::stream_grace ? sync_step{st::answered, act::end_stream_expired} : sync_step{s, act::none};
        case ev::outcome: return {st::finished, act::end_stream};
        case ev::peer_gone: return {st::caller_gone, act::cancel_job};
        case ev::deadline_while_queued:  // it is running: it wrote
        case ev::first_output: break;
      }
      break;
    case st::answered:
      if (e == ev::outcome) return {st::finished, act::log_outcome};
      break;
    case st::caller_gone:
      if (e == ev::outcome) return {st::finished, act::log_caller_gone};
      break;
    case st::finished: break;
  }
  return {s, act::none};  // a stale timer or a second disconnect: nothing to do
}

}  // namespace hourglass::server::detail
