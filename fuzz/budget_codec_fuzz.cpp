// The budget codec: gRPC timeout syntax, the Envoy header and human
// durations; and RFC 3339 times (Job-Not-Before). Properties: parsers never
// throw; formatting for the wire never grows a budget and never writes more
// than 8 digits; parse(format(x)) <= x; human durations and RFC 3339 times
// round-trip exactly.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "fuzz_check.hpp"
#include "hourglass/budget_codec.hpp"
#include "hourglass/support/rfc3339.hpp"

using hourglass::duration;

namespace {

void check_wire_format(duration d) {
  const std::string s = hourglass::format_grpc_timeout(d);
  FUZZ_CHECK(s.size() >= 2 && s.size() <= 9);  // 1..8 digits and a unit
  for (std::size_t i = 0; i + 1 < s.size(); ++i) FUZZ_CHECK(s[i] >= '0' && s[i] <= '9');
  const auto back = hourglass::parse_grpc_timeout(s);
  FUZZ_CHECK(back.has_value());
  FUZZ_CHECK(*back <= std::max(d, duration::zero()));  // never lengthens a budget
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto d = hourglass::parse_grpc_timeout(text)) {
    FUZZ_CHECK(*d >= duration::zero());
    FUZZ_CHECK(size >= 2 && size <= 9);
    check_wire_format(*d);
  }
  if (const auto d = hourglass::parse_timeout_ms(text)) {
    FUZZ_CHECK(*d >= duration::zero());
    check_wire_format(*d);
  }
  if (const auto d = hourglass::parse_connect_timeout_ms(text)) {
    FUZZ_CHECK(*d > duration::zero());
    FUZZ_CHECK(size >= 1 && size <= 10);
    FUZZ_CHECK(hourglass::parse_timeout_ms(text) == d);  // the same digits, a narrower range
    check_wire_format(*d);
  }
  const hourglass::duration_parse h = hourglass::parse_human_duration(text);
  FUZZ_CHECK(h.value.has_value() == h.error.empty());
  if (h.value) {
    const std::string again = hourglass::format_human_duration(*h.value);
    const hourglass::duration_parse back = hourglass::parse_human_duration(again);
    FUZZ_CHECK(back.value == h.value);  // the shortest exact form parses to the same value
  }
  if (const auto t = hourglass::support::parse_rfc3339(text)) {
    FUZZ_CHECK(hourglass::support::parse_rfc3339(hourglass::support::format_rfc3339(*t)) == t);
  }
  // Any 64-bit count of nanoseconds, negative and huge included.
  if (size >= sizeof(std::int64_t)) {
    std::int64_t ns = 0;
    std::memcpy(&ns, data, sizeof ns);
    check_wire_format(duration(ns));
  }
  return 0;
}
