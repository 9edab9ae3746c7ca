#include "http/responses.hpp"

#include <boost/beast/http/field.hpp>

#include <fmt/compile.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "hourglass/context.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

response make_response(unsigned status, std::string body, std::string_view content_type) {
  response res{static_cast<http::status>(status), 11};
  res.set(http::field::server, "hourglassd");
  set_api_safety_headers(res);
  if (!content_type.empty()) res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

response error_response(unsigned status, std::string_view code, std::string_view message) {
  support::json_object o;
  o.add("error", code);
  if (!message.empty()) o.add("message", message);
  return make_response(status, o.str(), json_type);
}

response read_refusal_response(read_verdict v) {
  switch (v) {
    case read_verdict::headers_too_large:
      return error_response(431, "headers_too_large", "request headers exceed 8 KiB");
    case read_verdict::body_too_large:
      return error_response(413, "payload_too_large", "request body exceeds --max-body");
    case read_verdict::malformed_body: return error_response(400, "bad_request", "malformed request body");
    case read_verdict::malformed_request:
    case read_verdict::go_on:
    case read_verdict::close: break;
  }
  return error_response(400, "bad_request", "malformed HTTP request");
}

response unauthorized_response() {
  response res = error_response(401, "unauthorized", "missing or wrong bearer token");
  res.set(http::field::www_authenticate, "Bearer");
  return res;
}

response method_not_allowed_response(std::string_view allow) {
  response res = error_response(405, "method_not_allowed", "method not allowed on this path");
  res.set(http::field::allow, allow);
  return res;
}

response broker_unavailable_response(bool accepted_nothing) {
  response res = error_response(
      503, "broker_unavailable",
      accepted_nothing ? "the job broker cannot be reached; nothing was accepted" : "the job broker cannot be reached");
  res.set(http::field::retry_after, "1");
  return res;
}

std::string_view server_timing(const job_timings& t, server_timing_buffer& buf) {
  // fmt with the format compiled in, not snprintf: glibc's %f, and fmt parsing
  // its format at run time, each took ~3 % of a small response's CPU.
  const auto r = fmt::format_to_n(buf.data(), buf.size(), FMT_COMPILE("queue;dur={:.3f}, run;dur={:.3f}"),
                                  to_millis(t.queue_delay), to_millis(t.run_time));
  return {buf.data(), std::min(r.size, buf.size())};
}

std::string server_timing(const job_timings& t) {
  server_timing_buffer buf;
  return std::string(server_timing(t, buf));
}

void append_head(std::string& out, const response& res) {
  const unsigned v = res.version();
  fmt::format_to(std::back_inserter(out), FMT_COMPILE("HTTP/{}.{} {:03} "), v / 10, v % 10, res.result_int());
  out.append(res.reason());
  out.append("\r\n");
  for (const auto& f : res) {
    out.append(f.name_string());
    out.append(": ");
    out.append(f.value());
    out.append("\r\n");
  }
  out.append("\r\n");
}

std::string job_outcome_trailer(const status& st, bool committed) {
  std::string v(to_string(st.code));
  if (st.code == outcome::deadline_exceeded) v.append("; stage=").append(to_string(st.stage));
  if (committed) v.append("; committed=true");
  return v;
}

unsigned http_status_for(const status& st, const error_info* error) {
  switch (st.code) {
    case outcome::ok: return 200;
    case outcome::error: return error ? error->http_status : 500;
    case outcome::rejected: return 503;
    case outcome::deadline_exceeded: return 504;
    case outcome::cancelled: return st.cause == cancel_cause::shutdown ? 503 : 499;
    case outcome::invalid: return 400;
  }
  return 500;
}

std::string outcome_body(const status& st, const job_timings& t, duration budget, duration remaining_now,
                         const error_info* error) {
  support::json_object o;
  switch (st.code) {
    case outcome::ok: o.add("error", "none"); break;
    case outcome::error:
      o.add("error", error ? std::string_view(error->code) : "error");
      o.add("outcome", "error");
      if (error) o.add("message", error->message);
      break;
    case outcome::rejected:
      o.add("error", to_string(st.reason));
      o.add("outcome", "rejected");
      break;
    case outcome::deadline_exceeded:
      o.add("error", "deadline_exceeded");
      o.add("stage", to_string(st.stage));
      break;
    case outcome::cancelled:
      o.add("error", "cancelled");
      o.add("cause", to_string(st.cause));
      break;
    case outcome::invalid:
      o.add("error", "invalid_timeout");
      o.add("outcome", "invalid");
      break;
  }
  if (budget != duration::max()) o.add("budget_ms", to_millis(budget));
  o.add("queued_ms", to_millis(t.queue_delay));
  if (t.ran) o.add("run_ms", to_millis(t.run_time));
  if (remaining_now != duration::max()) o.add("remaining_ms", to_millis(remaining_now));
  if (t.committed) o.add("committed", true);  // reconcile by the idempotency key: a change may have happened
  return o.str();
}

response invalid_budget_response(std::string_view message) {
  support::json_object o;
  o.add("error", "invalid_timeout").add("outcome", "invalid").add("message", message);
  response res = make_response(400, o.str(), json_type);
  res.set("Server-Timing", server_timing({}));
  return res;
}

response job_response(const status& st, const job_timings& t, duration budget, duration remaining_now,
                      handler_result* result, const error_info* error) {
  response res;
  if (st.is_ok() && result != nullptr) {
    const unsigned code = result->status >= 200 && result->status <= 299 ? result->status : 200;
    res = make_response(code, std::move(result->body), result->content_type);
  } else {
    res = make_response(http_status_for(st, error), outcome_body(st, t, budget, remaining_now, error), json_type);
    // Overload may pass in a moment; an open breaker lets a probe through after --breaker-open.
    if (st.code == outcome::rejected &&
        (st.reason == reject_reason::queue_full || st.reason == reject_reason::circuit_open)) {
      res.set(http::field::retry_after, "1");
    }
  }
  server_timing_buffer timing;
  res.set("Server-Timing", server_timing(t, timing));
  return res;
}

}  // namespace hourglass::server::detail
