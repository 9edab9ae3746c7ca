// The async-job endpoints, from a parsed request to a response, on the job
// store (job_store.hpp); no socket (the session sends what they answer).
//   POST /v1/jobs/{handler} with Prefer: respond-async -> 202 + Location
//   POST /v1/jobs:bulk                                  -> 200, one answer per job
//   GET /v1/jobs/{id}, DELETE /v1/jobs/{id}             -> the job object
//   POST /v1/jobs/{id}/signals/{name}                   -> the job object, resumed
// Every answer comes through `done`, exactly once and from any thread.
// Internal to the server.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/job_input.hpp"
#include "core/job_store.hpp"
#include "core/job_view.hpp"
#include "http/responses.hpp"

namespace hourglass::server::detail {

using answer_fn = std::function<void(response)>;

// A refusal booked (core::book_refusal) and answered with `answer`.
inline response refuse(const core& c, const refusal& r, response answer) {
  c.book_refusal(r, answer.result_int());
  return answer;
}

// GET (cancel false) or DELETE (cancel true): 200, or 202 for a DELETE that
// asked a job still unfinished to stop; Server-Timing once finished; never cached.
response job_view_response(const job_view& j, bool cancel);

// 202 for an async job held by its store: {id, state, location[, duplicate]}
// with Location. `duplicate`: the job an Idempotency-Key already named, in its state now.
response accepted_response(const job_view& j, bool duplicate);

// A malformed header of an async job's terms: answer 400 `error`, `message`.
struct terms_error {
  std::string error, message;
};
// Sets `job`'s retry policy and overall deadline (read_job_retry) and its
// delay (read_job_delay) from the request's headers over handler `e`'s
// policy; job.headers_at must be set. nullopt: all well.
std::optional<terms_error> read_job_terms(const core& c, const boost::beast::http::fields& headers,
                                          const handler_entry& e, new_job& job);

// 202 once the store holds the job; its refusal, booked (refuse, core::book_refusal),
// otherwise: 503 queue_full or broker_unavailable, 504 at admission.
void submit_async_job(core& c, new_job job, answer_fn done);

// A client's request's headers, kept for its jobs' handlers
// (job_input::other_header): shared by the jobs of a bulk request.
using request_head = std::shared_ptr<const boost::beast::http::request_header<>>;
// The headers a job names (Content-Type, Idempotency-Key, traceparent) read
// into `in`, the rest kept in `head` for its handler.
void read_request_head(job_input& in, request_head head);

// A bulk request as the session read it: its message (headers every job
// shares, and the list of jobs as its body) and the budget its headers set.
struct bulk_submission {
  boost::beast::http::request<boost::beast::http::string_body> msg;
  time_point headers_at{};
  duration freshness = duration::max();   // Job-Freshness, for jobs that state none
  duration idle_limit = duration::max();  // Job-Idle-Timeout
  std::string remote;
};

// 400 invalid_bulk when the body is not a list of jobs; else 200 with each
// job's own answer, as submit_async_job would give it (bulk_jobs.hpp).
void submit_bulk_jobs(core& c, bulk_submission s, answer_fn done);

// GET (cancel false) or DELETE (cancel true) of /v1/jobs/{id}; 404 when
// unknown or expired, 503 when the store cannot be read.
void answer_job_lookup(core& c, std::string id, bool cancel, answer_fn done);

// POST /v1/jobs/{id}/signals/{name} with the signal's payload as its body:
// 200 with the job object once delivered (the job resumes), 409 not_waiting
// when it waits for no such signal (delivered once: a second finds it not
// waiting), 404, 400 invalid_signal, 413 over 64 KiB, 503 store unavailable.
void answer_signal(core& c, std::string id, std::string name, std::string payload, answer_fn done);
response response_of(const signal_result& r);

// GET /v1/jobs?...: 200 with a page of jobs; 400 invalid_query (or
// invalid_cursor); 503 when the store cannot be read.
void answer_job_list(core& c, std::string_view target, answer_fn done);

// A response for each of the store's answers (pure; `c` books refusals).
response response_of(core& c, const new_job& job, const created& r);
response response_of(const found& r, bool cancel);

}  // namespace hourglass::server::detail
