// Header selection: up to four budget headers, each present or not.
// Properties: any malformed header makes the request invalid and names it;
// otherwise the smallest valid budget wins; the applied budget never exceeds
// the server's maximum.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "hourglass/budget_codec.hpp"

using hourglass::duration;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned present = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<std::string_view> values;
  for (int i = 0; i < 4; ++i) {  // values separated by '\n'
    const auto nl = rest.find('\n');
    values.push_back(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
  }
  hourglass::budget_headers h;
  if (present & 1) h.request_timeout = values[0];
  if (present & 2) h.grpc_timeout = values[1];
  if (present & 4) h.envoy_timeout_ms = values[2];
  if (present & 8) h.connect_timeout_ms = values[3];

  const std::optional<duration> parsed[4] = {
      h.request_timeout ? hourglass::parse_grpc_timeout(*h.request_timeout) : std::nullopt,
      h.grpc_timeout ? hourglass::parse_grpc_timeout(*h.grpc_timeout) : std::nullopt,
      h.envoy_timeout_ms ? hourglass::parse_timeout_ms(*h.envoy_timeout_ms) : std::nullopt,
      h.connect_timeout_ms ? hourglass::parse_connect_timeout_ms(*h.connect_timeout_ms) : std::nullopt};
  const bool given[4] = {h.request_timeout.has_value(), h.grpc_timeout.has_value(), h.envoy_timeout_ms.has_value(),
                         h.connect_timeout_ms.has_value()};
  bool any_bad = false, any_given = false;
  std::optional<duration> smallest;
  for (int i = 0; i < 4; ++i) {
    any_given = any_given || given[i];
    if (given[i] && !parsed[i]) any_bad = true;
    if (parsed[i]) smallest = smallest ? std::min(*smallest, *parsed[i]) : *parsed[i];
  }

  const hourglass::header_budget b = hourglass::tightest_budget(h);
  using kind = hourglass::header_budget::kind;
  if (any_bad) {
    FUZZ_CHECK(b.state == kind::invalid);
    FUZZ_CHECK(!b.bad_header.empty());
    return 0;
  }
  if (!any_given) {
    FUZZ_CHECK(b.state == kind::absent);
  } else {
    FUZZ_CHECK(b.state == kind::ok);
    FUZZ_CHECK(b.budget == *smallest);
  }
  const duration max_budget = std::chrono::seconds(30);
  const duration applied = hourglass::effective_budget(b, std::chrono::seconds(1), max_budget);
  FUZZ_CHECK(applied <= max_budget);
  FUZZ_CHECK(applied >= duration::zero());
  return 0;
}
