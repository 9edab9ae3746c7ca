// What the `call` handler decides about an upstream's answer, as pure
// functions: no sockets, no clocks. Internal to the server.
#pragma once

#include <string_view>

#include "hourglass/circuit_breaker.hpp"

namespace hourglass::server::detail {

// What an upstream's HTTP answer says about the upstream's health: the
// verdict its circuit breaker records (docs/guards.md, "Circuit breakers").
//  - 2xx: success.
//  - 4xx: ignored. The upstream answered; our request was at fault.
//  - 504 with stage `admission`: ignored. It was given less budget than it
//    needs, so its deadline_exceeded says nothing about its health. Any other
//    504 is a failure: it had the budget it needed and did not finish in it.
//  - any other status (500, 503 overload or its own open breaker, 1xx, 3xx):
//    failure.
// `stage` is the "stage" member of a 504's JSON body (empty when absent).
constexpr call_verdict verdict_of_answer(unsigned http_status, std::string_view stage) noexcept {
  if (http_status >= 200 && http_status <= 299) return call_verdict::success;
  if (http_status >= 400 && http_status <= 499) return call_verdict::ignored;
  if (http_status == 504 && stage == "admission") return call_verdict::ignored;
  return call_verdict::failure;
}

// A streamed answer's status line went out before its job ended: a 2xx whose
// Job-Outcome trailer is not `ok` was cut off, and is judged as the answer its
// outcome would have had without streaming: deadline_exceeded as a 504 of its
// stage, anything else as a 500. Other answers stand as they are.
// `job_outcome` is the trailer ("deadline_exceeded; stage=idle"), empty when absent.
struct effective_answer {
  unsigned http_status;
  std::string_view stage;
};
constexpr effective_answer effective_answer_of(unsigned http_status, std::string_view stage,
                                               std::string_view job_outcome) noexcept {
  if (http_status < 200 || http_status > 299 || job_outcome.empty()) return {http_status, stage};
  const std::string_view code = job_outcome.substr(0, job_outcome.find(';'));
  if (code == "ok") return {http_status, stage};
  if (code != "deadline_exceeded") return {500, {}};
  constexpr std::string_view key = "stage=";
  const auto at = job_outcome.find(key);
  std::string_view st = at == std::string_view::npos ? std::string_view{} : job_outcome.substr(at + key.size());
  st = st.substr(0, st.find_first_of("; "));
  return {504, st};
}

// What a call that ended without an answer says: an I/O failure (refused,
// reset, garbage) is a failure; a call our own context stopped is a failure
// only when the context's deadline ran out while the upstream held the call
// (it had at least its minimum budget, and took longer); a cancellation or
// our own idle limit says nothing about the upstream.
constexpr call_verdict verdict_of_abort(const status& context_stop) noexcept {
  if (context_stop.is_ok()) return call_verdict::failure;  // an I/O error
  if (context_stop.code == outcome::deadline_exceeded && context_stop.stage != expiry_stage::idle) {
    return call_verdict::failure;
  }
  return call_verdict::ignored;
}

}  // namespace hourglass::server::detail
