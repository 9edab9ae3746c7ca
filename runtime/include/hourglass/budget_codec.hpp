// How a budget is written outside a process (docs/reference/budgets.md), and
// how durations are written on command lines.
//
// Wire form: gRPC timeout syntax, 1 to 8 ASCII digits and one unit
// (H M S m u n), carrying a *remaining* duration, never a timestamp.
//
// Contract:
// - Parsers are strict: anything outside the grammar is rejected (no sign, no
//   whitespace, no "0x", no extra characters). They never throw and never
//   allocate, except parse_human_duration, which builds an error message.
// - Formatting for the wire rounds DOWN, so a forwarded budget is never longer
//   than what remains (gRPC does the same).
// - Saturation: values too large for `duration` (int64 nanoseconds, ~292
//   years) become duration::max() when parsed from the wire. Only `H` can
//   overflow: anything above 2562047H saturates, so "99999999H" parses to
//   duration::max(). Servers clamp budgets to their maximum anyway.
//
// Thread safety: every function here is pure and may be called concurrently.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "hourglass/time.hpp"

namespace hourglass {

// ---- gRPC timeout syntax -------------------------------------------------

// "800m" -> 800ms. nullopt unless `text` is exactly 1..8 ASCII digits then one
// of H M S m u n. Leading zeros count as digits ("00000001S" is fine).
[[nodiscard]] std::optional<duration> parse_grpc_timeout(std::string_view text) noexcept;

// The finest unit (n, u, m, S, M, H) whose value fits in 8 digits, rounded
// down. Zero or negative -> "0n". The largest `duration` is "2562047H"; should
// the value not fit even in hours it would saturate to "99999999H".
// Guarantee: parse_grpc_timeout(format_grpc_timeout(d)) <= max(d, 0), short by
// less than one unit of the chosen format.
[[nodiscard]] std::string format_grpc_timeout(duration d);

// X-Envoy-Expected-Rq-Timeout-Ms: 1..12 ASCII digits of milliseconds, nothing
// else (no sign, space or fraction). 12 digits always fit in `duration`.
[[nodiscard]] std::optional<duration> parse_timeout_ms(std::string_view text) noexcept;

// Connect-Timeout-Ms (the Connect protocol's): a positive integer of
// milliseconds in 1..10 ASCII digits, nothing else. Zero is not positive.
[[nodiscard]] std::optional<duration> parse_connect_timeout_ms(std::string_view text) noexcept;

// ---- request headers -------------------------------------------------------

// Header names as docs/reference/budgets.md spells them. HTTP header names are
// case-insensitive; matching them is the server's job, not this codec's.
inline constexpr std::string_view request_timeout_header = "Request-Timeout";
inline constexpr std::string_view grpc_timeout_header = "grpc-timeout";
inline constexpr std::string_view envoy_timeout_ms_header = "X-Envoy-Expected-Rq-Timeout-Ms";
inline constexpr std::string_view connect_timeout_ms_header = "Connect-Timeout-Ms";

// The raw values of the budget headers a request carried; nullopt = absent.
struct budget_headers {
  // Initialised so designated initialisers may name just one header.
  std::optional<std::string_view> request_timeout = std::nullopt;     // gRPC syntax
  std::optional<std::string_view> grpc_timeout = std::nullopt;        // gRPC syntax
  std::optional<std::string_view> envoy_timeout_ms = std::nullopt;    // decimal milliseconds
  std::optional<std::string_view> connect_timeout_ms = std::nullopt;  // decimal milliseconds, positive
};

struct header_budget {
  enum class kind { absent, ok, invalid };
  kind state = kind::absent;
  duration budget{};            // meaningful only when state == ok
  std::string_view bad_header;  // when invalid: one of the *_header names above (static storage)
};

// The budget the request states. Any malformed header makes the whole request
// invalid, even when another header is valid (the daemon answers 400
// invalid_timeout); bad_header names the first malformed one in the order
// Request-Timeout, grpc-timeout, X-Envoy-Expected-Rq-Timeout-Ms,
// Connect-Timeout-Ms. Among valid
// headers the smallest budget wins. No header -> absent.
[[nodiscard]] header_budget tightest_budget(const budget_headers& headers) noexcept;

// The budget the server applies: absent -> default_budget; the result is then
// clamped to max_budget, so it never exceeds the server's maximum.
// Precondition: state != invalid (such requests are refused with 400). If it
// is violated anyway the result is zero, so the job cannot be admitted.
[[nodiscard]] duration effective_budget(const header_budget& stated, duration default_budget,
                                        duration max_budget) noexcept;

// ---- human durations (command line, config files) ------------------------

// Grammar: DIGITS [ "." DIGITS ] UNIT, UNIT one of ns us ms s m h (lower case).
// Examples: "250ms", "2s", "1m", "1h", "1500us", "10ns", "1.5s". No sign, no
// whitespace, one number and one unit only. The value must be a whole number
// of nanoseconds and fit in `duration`; nothing is rounded or saturated here,
// because a configuration typo should be loud, not silently changed.
struct duration_parse {
  std::optional<duration> value;
  std::string error;  // empty on success; otherwise names the input and what was expected
};
[[nodiscard]] duration_parse parse_human_duration(std::string_view text);

// Shortest exact form: an integer in the largest unit that divides `d`
// exactly ("250ms", "2s", "1m", "1500us", "90m"); zero is "0s". Negative
// values get a leading '-' (for display; the parser refuses them). For
// non-negative d, parse_human_duration(format_human_duration(d)) == d.
[[nodiscard]] std::string format_human_duration(duration d);

}  // namespace hourglass
