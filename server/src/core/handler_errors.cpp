#include "core/handler_errors.hpp"

#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

error_info describe_error(const std::exception_ptr& e) {
  error_info info;
  if (!e) return info;
  try {
    std::rethrow_exception(e);
  } catch (const handler_error& he) {
    info.http_status = he.http_status() >= 400 && he.http_status() <= 599 ? he.http_status() : 500;
    info.code = he.code().empty() ? "error" : he.code();
    info.message = he.what();
    info.detail = he.what();
    info.retryable = he.retryable();
  } catch (const std::exception& ex) {
    info.detail = ex.what();  // may hold internals: logged, not sent
  } catch (...) {
    info.detail = "unknown exception";
  }
  return info;
}

}  // namespace hourglass::server::detail
