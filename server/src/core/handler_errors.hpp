// What a handler's exception says, as its job's outcome records it and
// its answer shows it: one reading for the HTTP path and both stores.
// Internal to the server.
#pragma once

#include <exception>
#include <string>

namespace hourglass::server::detail {

// What a handler's exception says: HTTP status, code, public message.
struct error_info {
  unsigned http_status = 500;
  std::string code = "error";
  std::string message = "the handler failed";
  std::string detail;     // for the log only
  bool retryable = true;  // another attempt may succeed (handler_error::retryable; any other exception)
};
error_info describe_error(const std::exception_ptr& e);

}  // namespace hourglass::server::detail
