// A delivered job as a fleet handler sees it, and what the handler gives back:
// the plain values the consumer and its pure decision modules (settlement)
// share, apart from the consumer and the executor it feeds.
#pragma once

#include <string>

namespace hourglass::fleet {

// A job as a handler gets it.
struct delivered_job {
  std::string id;
  std::string handler;
  std::string payload;
  std::string content_type;
  std::string idempotency_key;  // the Idempotency-Key, or the job id: key side effects by it
  unsigned delivery = 1;        // 1 on its first start; more after its worker died
};

// What a handler returned: the job's result.
struct job_output {
  std::string body;
  std::string content_type = "application/octet-stream";
};

// How a handler's failure (an exception) is recorded.
struct error_record {
  unsigned http_status = 500;
  std::string code = "handler_error";
  std::string message;
  bool retryable = true;  // another attempt may succeed (a job with a retry policy gets one)
};

}  // namespace hourglass::fleet
