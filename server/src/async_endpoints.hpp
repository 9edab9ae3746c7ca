// The async-job endpoints, from a parsed request to a response, on the job
// store and the executor; no socket (the session sends what they return).
//   POST /v1/jobs/{handler} with Prefer: respond-async -> 202 + Location
//   GET /v1/jobs/{id}, DELETE /v1/jobs/{id}             -> the job's state
// Internal to the server.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "async_backend.hpp"
#include "async_store.hpp"
#include "core.hpp"
#include "job_input.hpp"
#include "responses.hpp"

namespace hourglass::server::detail {

// Stores and submits the job: 202 with its location, 503 queue_full when the
// store is full, or the admission refusal (no job to poll then). The job may
// start by headers_at + freshness; it runs at most its handler's run_limit.
response submit_async_job(core& c, std::shared_ptr<const job_input> in, time_point headers_at, duration freshness);

// GET (cancel false) or DELETE (cancel true) of a stored job; 404 when unknown or expired.
response async_job_response(core& c, std::string_view id, bool cancel);

// The JSON body describing `r` at `now` (docs/reference/http-api.md, "The job object").
std::string async_job_json(const async_record& r, time_point now);

}  // namespace hourglass::server::detail
