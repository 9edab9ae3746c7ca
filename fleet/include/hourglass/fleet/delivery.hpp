// A delivered job as a fleet handler sees it, and what the handler gives back:
// the plain values the consumer and its pure decision modules (settlement)
// share, apart from the consumer and the executor it feeds.
#pragma once

#include <optional>
#include <string>

#include "hourglass/time.hpp"

namespace hourglass::fleet {

// A job as a handler gets it.
struct delivered_job {
  std::string id;
  std::string handler;
  std::string payload;
  std::string content_type;
  std::string idempotency_key;  // the Idempotency-Key, or the job id: key side effects by it
  unsigned delivery = 1;        // 1 on its first start; more after its worker died
  // A parent resumed after waiting for its children (job_output::wait):
  // "children" (its rule was met) or "deadline" (its wake time came first).
  std::string woke_by;
  // woke_by "signal": the wait it resumes from ("signal:<name>") and the
  // payload its signaller sent.
  std::string wait_rule;
  std::string signal_payload;
};

// A parent's wait for its children: its rule as the job hash spells it
// ("all", "first:<n>", "first_success") and how long before the job's
// deadline the wait ends whatever has finished. Or a person's wait:
// "signal:<name>", and `keep` the wait's own limit.
struct wait_request {
  std::string rule = "all";
  duration keep{};
};

// What a handler returned: the job's result.
struct job_output {
  std::string body;
  std::string content_type = "application/octet-stream";
  std::optional<wait_request> wait;  // set: no outcome yet, the job waits for its children
};

// How a handler's failure (an exception) is recorded.
struct error_record {
  unsigned http_status = 500;
  std::string code = "handler_error";
  std::string message;
  bool retryable = true;  // another attempt may succeed (a job with a retry policy gets one)
};

}  // namespace hourglass::fleet
