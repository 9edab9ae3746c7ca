// The async-job endpoints, from a parsed request to a response, on the job
// store (job_store.hpp); no socket (the session sends what they answer).
//   POST /v1/jobs/{handler} with Prefer: respond-async -> 202 + Location
//   GET /v1/jobs/{id}, DELETE /v1/jobs/{id}             -> the job object
// Every answer comes through `done`, exactly once and from any thread.
// Internal to the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "job_store.hpp"
#include "responses.hpp"

namespace hourglass::server::detail {

using answer_fn = std::function<void(response)>;

// 202 once the store holds the job; its refusal, booked (core::refuse),
// otherwise: 503 queue_full or broker_unavailable, 504 at admission.
void submit_async_job(core& c, new_job job, answer_fn done);

// GET (cancel false) or DELETE (cancel true) of /v1/jobs/{id}; 404 when
// unknown or expired, 503 when the store cannot be read.
void answer_job_lookup(core& c, std::string id, bool cancel, answer_fn done);

// A response for each of the store's answers (pure; `c` books refusals).
response response_of(core& c, const new_job& job, const created& r);
response response_of(const found& r, bool cancel);

}  // namespace hourglass::server::detail
