// The daemon's per-request decisions as pure functions: where a request
// goes, whether it is authorized, what budget it gets, and what a sync call
// does on each event. No sockets, no clocks, no threads: the session reads
// the bytes, asks these, and does what they say. Internal to the server.
#pragma once

#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/job_retry.hpp"
#include "hourglass/support/rfc3339.hpp"
#include "hourglass/time.hpp"
#include "terms/terms.hpp"

namespace hourglass::server::detail {

// ---- routing -----------------------------------------------------------------

// The jobs API's one path prefix: POST jobs_path + {handler} submits a job;
// GET or DELETE jobs_path + {id} reads or cancels one (and 202's Location).
inline constexpr std::string_view jobs_path = "/v1/jobs/";
// GET: jobs by state, a page at a time (job_listing.hpp).
inline constexpr std::string_view job_list_path = "/v1/jobs";
// GET: the periodic jobs, their last and next fires.
inline constexpr std::string_view schedules_path = "/v1/schedules";
// GET: the queues (queue_endpoints.hpp); + "/{name}" one; + "/{name}/pause"
// or "/resume" (POST, admin) its pause switch.
inline constexpr std::string_view queues_path = "/v1/queues";
// POST: many async jobs in one request (bulk_jobs.hpp).
inline constexpr std::string_view bulk_jobs_path = "/v1/jobs:bulk";

enum class route_kind {
  healthz,             // GET/HEAD /healthz
  readyz,              // GET/HEAD /readyz
  metrics,             // GET/HEAD /metrics
  schedules,           // GET/HEAD /v1/schedules
  submit_job,          // POST /v1/jobs/{handler}
  submit_bulk,         // POST /v1/jobs:bulk
  get_job,             // GET /v1/jobs/{id}
  list_jobs,           // GET/HEAD /v1/jobs
  list_queues,         // GET/HEAD /v1/queues
  get_queue,           // GET/HEAD /v1/queues/{name}
  pause_queue,         // POST /v1/queues/{name}/pause (admin)
  resume_queue,        // POST /v1/queues/{name}/resume (admin)
  replay_job,          // POST /v1/jobs/{id}/replay (admin): a dead job admitted again
  delete_dead,         // DELETE /v1/queues/{name}/dead/{id} (admin)
  purge_dead,          // DELETE /v1/queues/{name}/dead?limit=&confirm=yes (admin)
  replay_dead_bulk,    // POST /v1/queues/{name}/dead/replay?limit=&confirm=yes (admin): the oldest admitted again
  cancel_job,          // DELETE /v1/jobs/{id}
  signal_job,          // POST /v1/jobs/{id}/signals/{name}: a person's signal (`item` the name)
  ui_redirect,         // GET/HEAD /ui: to /ui/
  ui_asset,            // GET/HEAD /ui/{file}: the dashboard's files (no token: they hold no data)
  not_found,           // 404
  method_not_allowed,  // 405 with `allow`
};

struct route {
  route_kind kind = route_kind::not_found;
  std::string_view name;     // the {handler}, {id} or {name} segment
  std::string_view allow;    // for method_not_allowed
  bool needs_auth = true;    // everything but /healthz
  bool needs_admin = false;  // the admin token instead (--admin-token-file)
  std::string_view item;     // delete_dead: the {id} after the queue's {name}; signal_job: the signal's {name}
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
// A request that changes something must come from a page of this daemon, if
// from a page at all: a browser names the page's origin in `Origin`
// ("http://host:port", or https:// through a TLS proxy), which must then name the `Host` the request was sent
// to; no Origin (curl, a program) passes. With tokens sent in a header, never
// in a cookie, a forged cross-site request carries no credentials anyway;
// this refuses it before it is read (defence in depth against CSRF).
bool same_origin_or_none(std::string_view origin, std::string_view host) noexcept;

// Whether a request's `Host` names this daemon, against DNS rebinding: a
// page on evil.example whose name is rebound to 127.0.0.1 sends
// `Host: evil.example:8080` (and a matching Origin, so same_origin_or_none
// passes it). An address cannot be rebound, so a Host that is an IPv4 or
// IPv6 literal passes, as do `localhost` and names under `.localhost`
// (RFC 6761: always the loopback, never registered); any other name only
// when the operator allowed it (--allowed-host): exactly (case-insensitive),
// under an entry written with a leading dot (".example.com": its
// subdomains and itself), or with "*" (any). A request without Host (HTTP/1.0
// from a program; every browser sends one) passes. Anything that is not
// host[:port] (userinfo, a path, a bad port) does not.
bool host_allowed(std::string_view host, const std::vector<std::string>& allowed_hosts) noexcept;

bool bearer_authorized(std::string_view authorization, std::string_view token) noexcept;

// Whether a request that needs the access token may go on. The access
// token (`token`) opens every such route; for a read (GET, HEAD) the admin
// token does too: whoever may pause a queue or purge its dead letter may
// look at it. Reads only, so the admin token never reaches a handler or a
// job's record (a bulk job keeps its request's Authorization).
bool request_authorized(std::string_view authorization, bool read, std::string_view token,
                        std::string_view admin_token) noexcept;

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
// the tightest of Request-Timeout, grpc-timeout,
// X-Envoy-Expected-Rq-Timeout-Ms and Connect-Timeout-Ms, the default without any, clamped to the
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
// `always_async`: the route takes async jobs only (bulk), Prefer or not.
budget_reading read_budget(const boost::beast::http::fields& headers, const budget_limits& limits,
                           bool always_async = false);

// ---- retries of async jobs ------------------------------------------------------

inline constexpr std::string_view job_attempts_header = "Job-Attempts";
inline constexpr std::string_view job_backoff_header = "Job-Backoff";
inline constexpr std::string_view job_deadline_header = "Job-Deadline";
// A child job's parent (docs/reference/budgets.md, "Child jobs").
inline constexpr std::string_view job_parent_header = "Job-Parent";

// An async job's retry policy and overall deadline, from its headers over
// its handler's policy:
//   Job-Attempts: N             attempts, the first included (1 to 100)
//   Job-Backoff: BASE[, CAP][; jitter=none]
//                               the backoff's base and cap, each as a grpc-timeout
//                               value ("500m", "30S"); CAP defaults to the handler's,
//                               raised to BASE; neither past `max_backoff` (a retry
//                               is a delay: --max-delay bounds it as it bounds Job-Delay).
//                               jitter=none: each wait is its ceiling; jitter=full
//                               (what the handler says when left out): uniform below it
//   Job-Deadline: DURATION      the whole job's deadline across attempts, counted from
//                               the request's arrival (grpc-timeout syntax)
struct job_retry_reading {
  bool ok = true;
  std::string error;    // !ok: invalid_timeout (Job-Deadline) or invalid_retry_policy
  std::string message;  // !ok: which header, and why
  job_retry_policy policy;
  duration deadline = duration::max();  // max: none stated
};

job_retry_reading read_job_retry(const boost::beast::http::fields& headers, const job_retry_policy& handler_policy,
                                 duration max_backoff = duration::max());

// ---- delayed async jobs ---------------------------------------------------------

inline constexpr std::string_view job_delay_header = "Job-Delay";
inline constexpr std::string_view job_not_before_header = "Job-Not-Before";

// When an async job may start, from its headers (one of the two):
//   Job-Delay: DURATION         this long after the request's arrival (grpc-timeout syntax)
//   Job-Not-Before: TIMESTAMP   an RFC 3339 wall-clock time (in a fleet, judged on the broker's clock)
// Either past `max_delay` from `wall_now` is refused (400 invalid_delay); a
// time already past means at once.
struct job_delay_reading {
  bool ok = true;
  std::string message;                           // !ok: which header, and why (error invalid_delay)
  duration delay = duration::zero();             // Job-Delay
  std::optional<support::wall_time> not_before;  // Job-Not-Before
};
job_delay_reading read_job_delay(const boost::beast::http::fields& headers, duration max_delay,
                                 support::wall_time wall_now);

// ---- reading a request ----------------------------------------------------------

// What a read of a request's headers or body ended with, as the session
// sorts Beast's and the socket's error codes (it decides nothing itself).
enum class read_error {
  none,
  header_limit,     // headers (or the target) above 8 KiB
  body_limit,       // body above --max-body
  partial_message,  // the peer closed in the middle of the message
  malformed,        // any other HTTP parse error: bad syntax, a bad chunk
  end_of_stream,    // the peer closed before the message began
  timeout,          // the header or body timeout closed the socket
  transport,        // a socket error: reset, aborted
};

// Sorts a read's error code (Beast's HTTP errors, its timeout, the socket's).
read_error sort_read_error(const boost::system::error_code& ec) noexcept;

// A read's error code once the connection's timer may have closed its
// socket: after that every read is a timeout, a success too. A read can
// complete from bytes already buffered (pipelined) after the timer fired
// and closed the socket; a request started then would run a job whose
// answer can never be written.
boost::system::error_code read_as_seen(const boost::system::error_code& ec, bool timed_out) noexcept;

enum class read_phase { headers, body };

// What the session does with it. Every answer here also closes the
// connection: after a framing error nothing later on it can be trusted.
enum class read_verdict {
  go_on,              // the headers or body are in
  close,              // nobody to answer (gone, or too slow): close quietly
  headers_too_large,  // 431 headers_too_large
  malformed_request,  // 400 bad_request "malformed HTTP request"
  body_too_large,     // 413 payload_too_large
  malformed_body,     // 400 bad_request "malformed request body" (logged at info)
};

constexpr read_verdict judge_read(read_phase p, read_error e) noexcept {
  using re = read_error;
  switch (e) {
    case re::none: return read_verdict::go_on;
    case re::end_of_stream:
    case re::timeout:
    case re::transport: return read_verdict::close;
    // In a body, a chunk header or trailer past the limit: a malformed body.
    case re::header_limit:
      return p == read_phase::headers ? read_verdict::headers_too_large : read_verdict::malformed_body;
    case re::body_limit: return p == read_phase::body ? read_verdict::body_too_large : read_verdict::malformed_request;
    // Mid-headers the bytes so far are a malformed request; mid-body the
    // caller went away with its request half sent: nobody to answer.
    case re::partial_message: return p == read_phase::headers ? read_verdict::malformed_request : read_verdict::close;
    case re::malformed:
      return p == read_phase::headers ? read_verdict::malformed_request : read_verdict::malformed_body;
  }
  return read_verdict::close;
}

// ---- keep-alive -----------------------------------------------------------------

// Whether the connection stays open after this response: the one rule for
// every answer, a plain response or a stream's head.
struct keep_alive_facts {
  bool requested = true;       // the request's own keep-alive (HTTP/1.1 default, Connection: close, 1.0)
  bool closing = false;        // the session already decided to close after this answer
  bool body_unread = false;    // refused before its body was read: its bytes would be taken for a request
  bool draining = false;       // the daemon is shutting down
  bool http10_stream = false;  // a stream to an HTTP/1.0 client: its body ends with the connection
};

constexpr bool keeps_alive(const keep_alive_facts& f) noexcept {
  return f.requested && !f.closing && !f.body_unread && !f.draining && !f.http10_stream;
}

// ---- a job's bounds ---------------------------------------------------------------

// What the executor is given for a job read from a request: a sync job runs
// within its caller's budget, an async one within its handler's run limit
// (its freshness bounds only its wait to start); the idle limit is the
// tighter of the handler's and the request's Job-Idle-Timeout.
struct job_bounds {
  duration budget{};
  duration idle_limit = duration::max();
};

constexpr job_bounds bounds_of_job(bool async, duration caller_budget, duration handler_run_limit,
                                   duration handler_idle_limit, duration requested_idle_limit) noexcept {
  return {async ? handler_run_limit : caller_budget,
          handler_idle_limit < requested_idle_limit ? handler_idle_limit : requested_idle_limit};
}

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
  outcome_of_stream_ok,    // a streaming handler ended ok (it may have written nothing yet)
  outcome_after_close,     // the outcome arrived after the connection closed under it
  peer_gone,               // the connection was closed or reset by the caller
  first_output,            // a streaming handler's first bytes are ready to go out
};

// Which outcome event a job's result is.
constexpr sync_event outcome_event(bool connection_closed, bool streaming_handler, bool ok) noexcept {
  if (connection_closed) return sync_event::outcome_after_close;
  return streaming_handler && ok ? sync_event::outcome_of_stream_ok : sync_event::outcome;
}

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

constexpr bool is_outcome(sync_event e) noexcept {
  return e == sync_event::outcome || e == sync_event::outcome_of_stream_ok || e == sync_event::outcome_after_close;
}

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
        // A stream that wrote nothing and ended ok is still a stream: its trailers say ok.
        case ev::outcome_of_stream_ok: return {st::finished, act::end_stream};
        case ev::outcome_after_close: return {st::finished, act::log_caller_gone};
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
        case ev::outcome:
        case ev::outcome_of_stream_ok: return {st::finished, act::end_stream};
        case ev::outcome_after_close: return {st::finished, act::log_caller_gone};
        case ev::peer_gone: return {st::caller_gone, act::cancel_job};
        case ev::deadline_while_queued:  // it is running: it wrote
        case ev::first_output: break;
      }
      break;
    case st::answered:
      if (is_outcome(e)) return {st::finished, act::log_outcome};
      break;
    case st::caller_gone:
      if (is_outcome(e)) return {st::finished, act::log_caller_gone};
      break;
    case st::finished: break;
  }
  return {s, act::none};  // a stale timer or a second disconnect: nothing to do
}

}  // namespace hourglass::server::detail
