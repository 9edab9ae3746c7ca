#include "core/person_wait.hpp"

#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

namespace {
constexpr std::string_view signal_prefix = "signal:";
}  // namespace

time_point resumed_deadline(time_point deadline, time_point waited_since, time_point now) noexcept {
  if (deadline == time_point::max()) return deadline;
  return saturating_add(deadline, elapsed(waited_since, now));
}

bool valid_signal_name(std::string_view name) noexcept { return valid_handler_name(name); }

void check_wait(const handler_result& r) {
  if (r.wait && r.signal) {
    throw handler_error(500, "invalid_wait", "a job waits for its children or for a signal, not both at once");
  }
  if (r.signal && !valid_signal_name(r.signal->name)) {
    throw handler_error(500, "invalid_signal",
                        "a signal's name is 1 to 64 of [A-Za-z0-9._-]: '" + r.signal->name + "'");
  }
}

std::string signal_rule(std::string_view name) { return std::string(signal_prefix) + std::string(name); }

std::optional<std::string_view> signal_of_rule(std::string_view rule) noexcept {
  if (!rule.starts_with(signal_prefix)) return std::nullopt;
  return rule.substr(signal_prefix.size());
}

}  // namespace hourglass::server::detail
