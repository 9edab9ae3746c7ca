// Building HTTP responses: JSON error bodies, outcome -> status code,
// Server-Timing. Internal to the server.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>

#include <array>
#include <exception>
#include <string>
#include <string_view>

#include "core/handler_errors.hpp"
#include "hourglass/job.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/server/handler.hpp"
#include "hourglass/support/json.hpp"
#include "http/request_rules.hpp"

namespace hourglass::server::detail {

using response = boost::beast::http::response<boost::beast::http::string_body>;

inline constexpr std::string_view json_type = "application/json";
// Every answer but the dashboard's files (which set their own policy): a
// browser neither guesses a type (a sync echo answers with the caller's
// Content-Type: text/html would otherwise be a page on the dashboard's
// origin) nor runs, loads or frames anything of it.
inline constexpr std::string_view api_content_security_policy = "default-src 'none'; frame-ancestors 'none'; sandbox";
// Sets those headers on a response head.
template <class Fields>
void set_api_safety_headers(Fields& head) {
  head.set("X-Content-Type-Options", "nosniff");
  head.set("Content-Security-Policy", api_content_security_policy);
}

response make_response(unsigned status, std::string body, std::string_view content_type);
// {"error": code, "message": message} with the given status.
response error_response(unsigned status, std::string_view code, std::string_view message);

// "queue;dur=0.012, run;dur=1.250" (milliseconds).
std::string server_timing(const job_timings& t);
// The same, written into `buf` (no allocation: a sync job's answer sets it).
using server_timing_buffer = std::array<char, 64>;  // the longest: two 20-digit durations
std::string_view server_timing(const job_timings& t, server_timing_buffer& buf);

// Appends the head of `res` (status line, fields in order, blank line) to
// `out` exactly as Beast's serializer writes it; the body follows as is,
// since a string_body response carries its framing in its fields
// (Content-Length, or none and a close). Written as two plain buffers, one
// send: Beast's generic buffer sequences cost ~10 % of a small response's
// CPU in a profile of the echo path. Chunked responses are written by Beast
// (session_stream.cpp).
void append_head(std::string& out, const response& res);

// The Job-Outcome trailer that ends a streamed response
// (docs/reference/http-api.md, "Trailers"): the outcome, its stage when it is
// deadline_exceeded ("deadline_exceeded; stage=idle"), and
// "; committed=true" when the job crossed a commit point.
std::string job_outcome_trailer(const status& st, bool committed);

// The HTTP status for a job outcome (docs/reference/outcomes.md, "HTTP status and body").
unsigned http_status_for(const status& st, const error_info* error);

// The JSON error body for a non-ok outcome, with the budget fields.
std::string outcome_body(const status& st, const job_timings& t, duration budget, duration remaining_now,
                         const error_info* error);

// 400 {"error": "invalid_timeout", "outcome": "invalid", "message": ...}: a
// budget header the request carried could not be read.
response invalid_budget_response(std::string_view message);

// The answer to a request whose read failed (judge_read in request_rules.hpp):
// 431 headers_too_large, 400 bad_request or 413 payload_too_large. Not for
// go_on or close, which answer nothing.
response read_refusal_response(read_verdict v);

// 401 unauthorized with WWW-Authenticate: Bearer.
response unauthorized_response();

// 405 method_not_allowed with the Allow the path takes.
response method_not_allowed_response(std::string_view allow);

// 503 broker_unavailable with Retry-After: 1, the one answer when the
// fleet's broker cannot be used; `accepted_nothing` for a submit (no job
// of it was held: a retry cannot make two).
response broker_unavailable_response(bool accepted_nothing = false);

// The full response for a finished sync job.
response job_response(const status& st, const job_timings& t, duration budget, duration remaining_now,
                      handler_result* result, const error_info* error);

}  // namespace hourglass::server::detail
