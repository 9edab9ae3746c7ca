#include "hourglass/budget_codec.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <numeric>

namespace hourglass {
namespace {

using rep = duration::rep;
constexpr rep rep_max = std::numeric_limits<rep>::max();

// Locale-free on purpose: std::isdigit may accept other characters.
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

struct unit {
  char symbol;
  rep ns;
};

// Finest first, the order format_grpc_timeout tries them in.
constexpr std::array<unit, 6> grpc_units{{
    {'n', 1},
    {'u', 1'000},
    {'m', 1'000'000},
    {'S', 1'000'000'000},
    {'M', 60'000'000'000},
    {'H', 3'600'000'000'000},
}};

constexpr rep grpc_max_value = 99'999'999;

// Parses 1..max_digits ASCII digits; nullopt for anything else.
constexpr std::optional<rep> parse_digits(std::string_view digits, std::size_t max_digits) noexcept {
  if (digits.empty() || digits.size() > max_digits) return std::nullopt;
  rep value = 0;
  for (char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    value = value * 10 + (c - '0');  // max_digits <= 18 keeps this in range
  }
  return value;
}

constexpr duration saturating_mul(rep value, rep unit_ns) noexcept {
  if (value > rep_max / unit_ns) return duration::max();
  return duration(value * unit_ns);
}

// The input as it appears in an error message: quoted, control bytes escaped,
// long inputs cut, so a hostile config line cannot garble a terminal or log.
std::string quoted(std::string_view text) {
  constexpr std::size_t max_shown = 64;
  constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < max_shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max_shown) out += "...";
  out += '"';
  return out;
}

duration_parse fail(std::string_view text, std::string_view why) {
  return {std::nullopt, "invalid duration " + quoted(text) + ": " + std::string(why)};
}

struct human_unit {
  std::string_view symbol;
  rep ns;
};

// Largest first, the order format_human_duration tries them in.
constexpr std::array<human_unit, 6> human_units{{
    {"h", 3'600'000'000'000},
    {"m", 60'000'000'000},
    {"s", 1'000'000'000},
    {"ms", 1'000'000},
    {"us", 1'000},
    {"ns", 1},
}};

constexpr std::string_view unit_hint = " (use ns, us, ms, s, m or h)";

}  // namespace

std::optional<duration> parse_grpc_timeout(std::string_view text) noexcept {
  if (text.size() < 2) return std::nullopt;
  const char symbol = text.back();
  const auto value = parse_digits(text.substr(0, text.size() - 1), 8);
  if (!value) return std::nullopt;
  for (const unit& u : grpc_units) {
    if (u.symbol == symbol) return saturating_mul(*value, u.ns);
  }
  return std::nullopt;
}

std::string format_grpc_timeout(duration d) {
  if (d <= duration::zero()) return "0n";
  for (const unit& u : grpc_units) {
    const rep value = d.count() / u.ns;  // positive, so division is floor
    if (value <= grpc_max_value) return std::to_string(value) + u.symbol;
  }
  // Unreachable with int64 nanoseconds (max is 2562047H); kept so the
  // contract holds if `duration` ever widens.
  return std::to_string(grpc_max_value) + 'H';
}

std::optional<duration> parse_timeout_ms(std::string_view text) noexcept {
  const auto value = parse_digits(text, 12);
  if (!value) return std::nullopt;
  return duration(*value * 1'000'000);  // 10^12 ms = 10^18 ns < 9.2 * 10^18
}

std::optional<duration> parse_connect_timeout_ms(std::string_view text) noexcept {
  const auto value = parse_digits(text, 10);
  if (!value || *value == 0) return std::nullopt;
  return duration(*value * 1'000'000);
}

header_budget tightest_budget(const budget_headers& headers) noexcept {
  struct source {
    const std::optional<std::string_view>& value;
    std::string_view name;
    std::optional<duration> (*parse)(std::string_view) noexcept;
  };
  const std::array<source, 4> sources{{
      {headers.request_timeout, request_timeout_header, &parse_grpc_timeout},
      {headers.grpc_timeout, grpc_timeout_header, &parse_grpc_timeout},
      {headers.envoy_timeout_ms, envoy_timeout_ms_header, &parse_timeout_ms},
      {headers.connect_timeout_ms, connect_timeout_ms_header, &parse_connect_timeout_ms},
  }};

  header_budget result;
  for (const source& s : sources) {
    if (!s.value) continue;
    const auto parsed = s.parse(*s.value);
    if (!parsed) return {header_budget::kind::invalid, duration::zero(), s.name};
    if (result.state == header_budget::kind::absent || *parsed < result.budget) {
      result.state = header_budget::kind::ok;
      result.budget = *parsed;
    }
  }
  return result;
}

duration effective_budget(const header_budget& stated, duration default_budget, duration max_budget) noexcept {
  duration budget = default_budget;
  switch (stated.state) {
    case header_budget::kind::absent: break;
    case header_budget::kind::ok: budget = stated.budget; break;
    case header_budget::kind::invalid: return duration::zero();
  }
  return budget < max_budget ? budget : max_budget;
}

duration_parse parse_human_duration(std::string_view text) {
  if (text.empty()) return fail(text, "empty (expected a number and a unit, e.g. 250ms or 2s)");
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      return fail(text, "whitespace is not allowed (write e.g. 250ms, not 250 ms)");
    }
  }
  if (text.front() == '-') return fail(text, "negative durations are not allowed");
  if (!is_digit(text.front())) return fail(text, "expected a number first, e.g. 250ms or 1.5s");

  std::size_t pos = 0;
  const auto scan_digits = [&] {
    const std::size_t start = pos;
    while (pos < text.size() && is_digit(text[pos])) ++pos;
    return text.substr(start, pos - start);
  };
  const std::string_view whole = scan_digits();
  std::string_view fraction;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    fraction = scan_digits();
    if (fraction.empty()) return fail(text, "expected digits after the decimal point");
  }

  const std::string_view symbol = text.substr(pos);
  if (symbol.empty()) return fail(text, std::string("missing unit").append(unit_hint));
  const human_unit* u = nullptr;
  for (const human_unit& candidate : human_units) {
    if (candidate.symbol == symbol) u = &candidate;
  }
  if (u == nullptr) {
    for (char c : symbol) {
      if (is_digit(c) || c == '.') {
        return fail(text, "one number and one unit only (e.g. 90m, not 1h30m)");
      }
    }
    return fail(text, "unknown unit " + quoted(symbol) + std::string(unit_hint));
  }

  const duration_parse too_large = fail(text, "too large (at most " + std::to_string(rep_max) + "ns, about 292 years)");

  rep value = 0;
  for (char c : whole) {
    const rep digit = c - '0';
    if (value > (rep_max - digit) / 10) return too_large;
    value = value * 10 + digit;
  }
  if (value > rep_max / u->ns) return too_large;
  value *= u->ns;

  // The fraction f / 10^k of a unit must be a whole number of nanoseconds.
  // Trailing zeros change nothing; beyond 13 significant digits no unit (at
  // most 3.6 * 10^12 ns) can give whole nanoseconds.
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (!fraction.empty()) {
    constexpr std::string_view finer = "finer than one nanosecond";
    if (fraction.size() > 13) return fail(text, finer);
    rep f = 0;
    rep scale = 1;
    for (char c : fraction) {
      f = f * 10 + (c - '0');
      scale *= 10;
    }
    // f * ns / scale without overflow: reduce by the common factor first.
    const rep g = std::gcd(u->ns, scale);
    const rep need = scale / g;
    if (f % need != 0) return fail(text, finer);
    const rep extra = (f / need) * (u->ns / g);  // < one unit, so it fits
    if (value > rep_max - extra) return too_large;
    value += extra;
  }
  return {duration(value), {}};
}

std::string format_human_duration(duration d) {
  if (d == duration::zero()) return "0s";
  // Magnitude in unsigned arithmetic, so duration::min() has one too.
  const auto raw = static_cast<std::uint64_t>(d.count());
  const std::uint64_t magnitude = d.count() < 0 ? 0 - raw : raw;
  std::string sign = d.count() < 0 ? "-" : "";
  for (const human_unit& u : human_units) {
    const auto ns = static_cast<std::uint64_t>(u.ns);
    if (magnitude % ns == 0) return sign + std::to_string(magnitude / ns) + std::string(u.symbol);
  }
  return sign + std::to_string(magnitude) + "ns";  // not reached: every value is whole ns
}

}  // namespace hourglass
