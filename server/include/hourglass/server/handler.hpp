// What an hourglassd handler is: a function from (context, request) to a
// result, run on an executor worker inside the job's context.
//
//   server.add_handler("resize", [](const hourglass::context& ctx, const request_view& req) {
//     auto image = decode(req.body);          // throw handler_error::bad_input(...) on junk
//     for (auto& tile : image.tiles()) { ctx.check(); resize(tile); }
//     return handler_result{encode(image), "image/png"};
//   });
//
// Outcomes (docs/reference/outcomes.md):
//  - return normally inside the deadline        -> ok, HTTP `status` (200 by default)
//  - throw handler_error                          -> error, its HTTP status (4xx: bad input)
//  - throw anything else                          -> error, 500 (the message is logged, not sent)
//  - stop because the context stopped             -> throw context::check()'s stopped_error, so
//                                                    the job is not counted as completed late
//  - a downstream hop ran out of budget           -> throw stopped_error(status::expired(
//                                                    expiry_stage::downstream))
//  - return normally after the deadline           -> deadline_exceeded/run, result discarded,
//                                                    counted as completed late (wasted work)
//
// Thread safety: a handler is called concurrently from several workers.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "hourglass/context.hpp"
#include "hourglass/job_retry.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass::server {

// A child job as its waiting parent finds it when resumed
// (handler_result::wait_for): its job object's outcome, in brief.
struct child_outcome {
  std::string id;
  std::string handler;
  // Its state: an outcome ("ok", "error", "deadline_exceeded", "cancelled",
  // "rejected") once finished, else "queued", "running", "scheduled" or
  // "waiting"; "gone" when its record expired.
  std::string state;
  std::string detail;        // deadline_exceeded: the stage; cancelled: the cause; error: its code
  std::string result;        // ok: its result
  std::string content_type;  // ok: its result's
  unsigned http_status = 0;  // error: the handler's status

  bool finished() const noexcept {
    return state != "queued" && state != "running" && state != "scheduled" && state != "waiting";
  }
  bool ok() const noexcept { return state == "ok"; }
};

// One request as a handler sees it. Views stay valid for the handler call.
struct request_view {
  std::string_view handler;       // the {handler} of POST /v1/jobs/{handler}
  std::string_view body;          // the request body (at most --max-body bytes)
  std::string_view content_type;  // empty when absent
  std::string_view traceparent;   // W3C trace context; empty when absent
  std::string_view remote;        // the caller's "addr:port"; empty in views made by hand
  // Sync jobs: the budget the server applied (stated or default, clamped).
  // Async jobs: the handler's run limit.
  duration budget = duration::max();
  bool async = false;
  // Key side effects by this: the request's Idempotency-Key, or for an async
  // job without one its job id (a fleet job may run more than once).
  std::string_view idempotency_key;
  // Async jobs: this job's id (the parent its children name); empty for a
  // sync job.
  std::string_view job_id;
  // A parent called again after handler_result::wait_for: why it woke
  // ("children": what it waited for has finished; "deadline": its deadline
  // less fan_in::keep came first, so some may not have) and every child it
  // has enqueued, in order, as they were then. Empty on a first run.
  // ("signal": a person's signal came, see below).
  std::string_view woke_by;
  std::span<const child_outcome> children;
  // A job resumed by the signal it waited for (handler_result::
  // wait_for_signal): its name and the small payload the signaller sent.
  std::string_view signal_name;
  std::string_view signal_payload;
  // Looks up any other request header by name (case-insensitive); empty when
  // absent. Left empty in views made by hand (tests).
  std::function<std::string_view(std::string_view)> header_lookup;

  std::string_view header(std::string_view name) const {
    return header_lookup ? header_lookup(name) : std::string_view{};
  }
};

// What a parent async job waits for (handler_result::wait_for): its
// children, all of them, the first n to finish, or the first to succeed.
struct fan_in {
  enum class rule { all, first_n, first_success };
  rule until = rule::all;
  std::size_t n = 1;  // first_n
  // The wait ends this long before the job's overall deadline whatever has
  // finished, so the resumed run has time to answer with partial results.
  // zero: the handler's minimum budget.
  duration keep = duration::zero();

  static fan_in all() { return {}; }
  static fan_in first(std::size_t count) { return {rule::first_n, count}; }
  static fan_in first_success() { return {rule::first_success}; }
};

// What a job waits for from a person (handler_result::wait_for_signal): a
// named signal (POST /v1/jobs/{id}/signals/{name}), for at most `limit` on
// a clock of its own. While it waits its machine budget does not run down:
// resumed, it has what it had left when it began to wait.
struct signal_wait {
  std::string name;  // 1 to 64 of [A-Za-z0-9._-], as handler names
  duration limit{};  // past it: deadline_exceeded, stage human_wait
};

struct handler_result {
  std::string body;
  std::string content_type = "application/octet-stream";
  unsigned status = 200;  // a 2xx code
  // Set by wait_for: no outcome yet. The job frees its worker and waits
  // (state "waiting") for its children; the handler is then called again
  // with request_view::woke_by and children set. Async jobs only: a sync
  // job that returns it ends in error.
  std::optional<fan_in> wait;
  // Set by wait_for_signal: no outcome yet. The job frees its worker and
  // waits (state "waiting") for a person's signal; the handler is then
  // called again with woke_by "signal" and the signal's name and payload.
  // Async jobs only.
  std::optional<signal_wait> signal;

  static handler_result wait_for(fan_in f = fan_in::all()) {
    handler_result r;
    r.wait = f;
    return r;
  }
  static handler_result wait_for_signal(std::string name, duration limit) {
    handler_result r;
    r.signal = signal_wait{std::move(name), limit};
    return r;
  }
};

// The handler's own failure, with the HTTP status and a short code for the
// JSON error body: {"error": code, "outcome": "error", "message": what()}.
// An async job with retries (job_retry_policy) is tried again after a
// retryable error: by default a 5xx-class one (a dependency failed; another
// attempt may not), never a 4xx-class one (the input is bad; the same input
// fails the same way). permanent() marks a 5xx-class error final too.
class handler_error : public std::runtime_error {
 public:
  handler_error(unsigned http_status, std::string code, const std::string& message)
      : std::runtime_error(message), http_status_(http_status), code_(std::move(code)) {}

  // 400 invalid_argument: the input was bad; retrying it cannot help.
  static handler_error bad_input(const std::string& message) { return {400, "invalid_argument", message}; }
  // A failure no retry can mend, whatever its status.
  static handler_error permanent(unsigned http_status, std::string code, const std::string& message) {
    handler_error e(http_status, std::move(code), message);
    e.permanent_ = true;
    return e;
  }

  unsigned http_status() const noexcept { return http_status_; }
  const std::string& code() const noexcept { return code_; }
  bool retryable() const noexcept { return !permanent_ && http_status_ >= 500; }

 private:
  unsigned http_status_;
  std::string code_;
  bool permanent_ = false;
};

using handler_fn = std::function<handler_result(const context&, const request_view&)>;

// An async job a handler enqueues as its child (http_server::enqueue_child).
// What it asks for is cut to what its parent has left: min(asked, the
// parent context's remaining budget - call_reserve), for its freshness and
// for its whole deadline alike, so no child works after its parent's
// caller has given up.
struct child_job {
  std::string handler;
  std::string body;
  std::string content_type = "application/octet-stream";
  duration freshness = duration::max();  // how long it may wait to start
  duration deadline = duration::max();   // the whole job's, across attempts, from now (Job-Deadline)
  std::string idempotency_key;           // empty: none
};

// What enqueue_child did.
struct child_answer {
  enum class kind {
    accepted,   // held: `id`
    duplicate,  // its idempotency key names an earlier job: `id` is that one
    refused,    // not held: `refusal` says why
  };
  kind verdict = kind::refused;
  std::string id;
  // deadline_exceeded/admission when the parent has less left than the
  // child's handler's minimum budget (or its queue's predicted wait);
  // rejected (queue_full, broker_unavailable, shutting_down); invalid for
  // an unknown handler.
  status refusal;
  std::string message;                   // refused: why, in words
  duration deadline = duration::max();   // accepted: the whole deadline it carries, from when it was sent
  duration freshness = duration::max();  // accepted: how long it may wait to start
};

// Where a streaming handler writes its output (http_server::add_stream_handler):
//
//   server.add_stream_handler("rows", "text/csv", [](const context& ctx, const request_view&, output_stream& out) {
//     for (auto& row : query(ctx)) out.write(to_csv(row));   // progress on each write
//   });
//
// A sync request gets the bytes as they are written, in a chunked response
// whose trailers say how the job ended (Job-Outcome, Server-Timing); its
// status line (200) goes out with the first bytes, so a handler that fails
// before writing anything still gets its own status (a 400 for bad input).
// An async job's output is collected into its result.
//
// write() reports progress; it waits while the reader is slow (that wait
// counts against the deadline and is not progress), and throws
// stopped_error when the context stops or the caller went away
// (hourglass/output_channel.hpp has the rules). Outcomes as for handler_fn;
// after the first bytes they are told in the trailers only.
class output_stream {
 public:
  virtual ~output_stream() = default;
  virtual void write(std::string_view chunk) = 0;
};

using stream_handler_fn = std::function<void(const context&, const request_view&, output_stream&)>;

struct handler_options {
  // Async jobs run at most this long (their caller does not wait, so the
  // handler bounds itself). zero: the server's --max-budget.
  duration run_limit = duration::zero();
  // A sync job with less budget than this left at admission is refused
  // (deadline_exceeded/admission). nullopt: the server's --min-budget.
  std::optional<duration> min_budget;
  // A job that reports no progress (ctx.progress()) for this long is stopped:
  // deadline_exceeded, stage idle. A request's Job-Idle-Timeout can only
  // tighten it. max: no limit of the handler's own.
  duration idle_limit = duration::max();
  // For handlers that take microseconds and never block (no I/O, no locks
  // held long): a sync job is run by the connection's I/O thread itself when
  // nothing is queued and a worker idles, in that worker's place (admitted,
  // timed and counted as any job). It saves two thread hand-offs, most of
  // the cost of a tiny job; a handler that blocks would stall the
  // connections that thread serves. Streaming handlers and async jobs always
  // go through the queue.
  bool run_inline = false;
  // Async jobs: attempts and backoff after a retryable error (handler_error::
  // retryable), each retry inside the job's overall deadline (job_retry.hpp).
  // A request's Job-Attempts and Job-Backoff replace it. Default: one attempt.
  job_retry_policy retry{};
};

// Handler names: 1 to 64 of [A-Za-z0-9._-]. They appear in URLs and metric labels.
bool valid_handler_name(std::string_view name) noexcept;

}  // namespace hourglass::server
