#include "core/stream_output.hpp"

#include <string>

namespace hourglass::server::detail {

void throw_result_too_large(std::size_t max_result) {
  throw handler_error::permanent(500, "result_too_large",
                                 "the job's result is over --max-result (" + std::to_string(max_result) +
                                     " bytes): an async job's result is kept for others to read");
}

void check_stored_result(const handler_result& r, std::size_t max_result) {
  if (r.body.size() > max_result) throw_result_too_large(max_result);
}

}  // namespace hourglass::server::detail
