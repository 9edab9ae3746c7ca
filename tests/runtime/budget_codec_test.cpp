#include "hourglass/budget_codec.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace hourglass {
namespace {

using namespace std::chrono_literals;
using kind = header_budget::kind;

// ---- parse_grpc_timeout ----------------------------------------------------

struct grpc_case {
  std::string_view text;
  duration expected;
};

TEST(ParseGrpcTimeout, AcceptsExactValues) {
  const std::vector<grpc_case> cases = {
      {"0n", 0ns},
      {"1n", 1ns},
      {"800m", 800ms},
      {"2S", 2s},
      {"1500u", 1500us},
      {"5M", 5min},
      {"3H", 3h},
      {"99999999n", 99'999'999ns},
      {"00000001S", 1s},
      {"0H", 0ns},
      {"99999999M", std::chrono::minutes(99'999'999)},  // 6e18 ns: fits
      {"2562047H", std::chrono::hours(2'562'047)},      // largest H that fits
      {"99999999H", duration::max()},                   // saturates
      {"2562048H", duration::max()},                    // first H that overflows
  };
  for (const auto& c : cases) {
    const auto parsed = parse_grpc_timeout(c.text);
    ASSERT_TRUE(parsed.has_value()) << "input \"" << c.text << "\"";
    EXPECT_EQ(parsed->count(), c.expected.count()) << "input \"" << c.text << "\"";
  }
}

TEST(ParseGrpcTimeout, RejectsMalformed) {
  const std::vector<std::string_view> cases = {
      "",           " ",
      "x",          "1",
      "1x",         "1ux",
      "!",          "n1",
      "-1u",        "123456789H",
      "oneH",       "82f",
      "1 S",        "+1S",
      "1S ",        " 1S",
      "0x10S",      "S",
      "1.5S",       "1s",
      "1h",         "1e3m",
      "1,000m",     "1SS",
      "\t1S",       "\xef\xbc\x91S" /* fullwidth 1 */,
      "000000000n",
  };
  for (const auto text : cases) {
    EXPECT_FALSE(parse_grpc_timeout(text).has_value()) << "input \"" << text << "\" was accepted";
  }
  // Embedded NUL: a string_view may carry one even where C strings cannot.
  EXPECT_FALSE(parse_grpc_timeout(std::string_view("1\0S", 3)).has_value());
  EXPECT_FALSE(parse_grpc_timeout(std::string_view("1S\0", 3)).has_value());
}

// ---- format_grpc_timeout ---------------------------------------------------

TEST(FormatGrpcTimeout, ChoosesFinestUnitThatFits) {
  const std::vector<std::pair<duration, std::string_view>> cases = {
      {0ns, "0n"},
      {-1ns, "0n"},
      {duration::min(), "0n"},
      {1ns, "1n"},
      {99'999'999ns, "99999999n"},
      {100'000'000ns, "100000u"},
      {800ms, "800000u"},
      {2s, "2000000u"},
      {99'999'999'999ns, "99999999u"},
      {100'000'000'000ns, "100000m"},
      {1'234'567'891ns, "1234567u"},  // rounds down, never up
      {1'999'999'999ns, "1999999u"},
      {99'999'999'999'999ns, "99999999m"},
      {100'000'000'000'000ns, "100000S"},
      {99'999'999s, "99999999S"},
      {std::chrono::seconds(100'000'000), "1666666M"},
      {std::chrono::minutes(99'999'999), "99999999M"},
      {std::chrono::minutes(100'000'000), "1666666H"},
      {duration::max(), "2562047H"},
  };
  for (const auto& [d, expected] : cases) {
    EXPECT_EQ(format_grpc_timeout(d), expected) << d.count() << "ns";
  }
}

TEST(FormatGrpcTimeout, OutputIsAlwaysValidWireSyntax) {
  for (const duration d :
       {duration(0ns), duration(1ns), duration(999ms), duration(1h), duration::max(), duration(-5s)}) {
    const std::string text = format_grpc_timeout(d);
    EXPECT_LE(text.size(), 9u) << text;
    EXPECT_TRUE(parse_grpc_timeout(text).has_value()) << text;
  }
}

// Unit of a formatted value, to bound the loss of rounding down.
duration unit_of(const std::string& text) {
  switch (text.back()) {
    case 'n': return 1ns;
    case 'u': return 1us;
    case 'm': return 1ms;
    case 'S': return 1s;
    case 'M': return 1min;
    case 'H': return 1h;
  }
  ADD_FAILURE() << "no unit in " << text;
  return 1ns;
}

TEST(FormatGrpcTimeout, RoundTripNeverLengthensAndLosesLessThanOneUnit) {
  std::mt19937_64 rng(20240501);  // fixed seed: the same 100k samples every run
  std::uniform_int_distribution<int> bits(0, 62);
  for (int i = 0; i < 100'000; ++i) {
    // Uniform magnitude in bits, so every unit of the format gets exercised.
    const int b = bits(rng);
    const auto mask = (std::uint64_t{1} << b) | ((std::uint64_t{1} << b) - 1);
    const duration d(static_cast<duration::rep>(rng() & mask));
    const std::string text = format_grpc_timeout(d);
    const auto back = parse_grpc_timeout(text);
    ASSERT_TRUE(back.has_value()) << d.count() << "ns -> " << text;
    ASSERT_LE(*back, d) << d.count() << "ns -> " << text;
    ASSERT_LT(d - *back, unit_of(text)) << d.count() << "ns -> " << text;
  }
}

TEST(FormatGrpcTimeout, ReformattingAParsedBudgetNeverLengthensIt) {
  std::mt19937_64 rng(7);
  const std::string_view units = "numSMH";
  std::uniform_int_distribution<int> digits(1, 8);
  std::uniform_int_distribution<std::size_t> pick(0, units.size() - 1);
  for (int i = 0; i < 100'000; ++i) {
    std::string text;
    for (int n = digits(rng); n > 0; --n) text += static_cast<char>('0' + rng() % 10);
    text += units[pick(rng)];
    const auto parsed = parse_grpc_timeout(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    const auto again = parse_grpc_timeout(format_grpc_timeout(*parsed));
    ASSERT_TRUE(again.has_value()) << text;
    ASSERT_LE(*again, *parsed) << text << " -> " << format_grpc_timeout(*parsed);
  }
}

// ---- parse_timeout_ms ------------------------------------------------------

TEST(ParseTimeoutMs, AcceptsDigitsOnly) {
  const std::vector<grpc_case> cases = {
      {"0", 0ms},
      {"1", 1ms},
      {"250", 250ms},
      {"015", 15ms},
      {"999999999999", std::chrono::milliseconds(999'999'999'999)},
  };
  for (const auto& c : cases) {
    const auto parsed = parse_timeout_ms(c.text);
    ASSERT_TRUE(parsed.has_value()) << "input \"" << c.text << "\"";
    EXPECT_EQ(*parsed, c.expected) << "input \"" << c.text << "\"";
  }
}

TEST(ParseTimeoutMs, RejectsMalformed) {
  const std::vector<std::string_view> cases = {
      "",    " ",     "-1", "+1", "1.5", " 1", "1 ", "1ms", "250m", "0x10", "1e3", "1000000000000" /* 13 digits */,
      "abc", "1_000",
  };
  for (const auto text : cases) {
    EXPECT_FALSE(parse_timeout_ms(text).has_value()) << "input \"" << text << "\" was accepted";
  }
}

// ---- parse_connect_timeout_ms ----------------------------------------------

TEST(ParseConnectTimeoutMs, APositiveIntegerOfAtMostTenDigits) {
  EXPECT_EQ(parse_connect_timeout_ms("1"), 1ms);
  EXPECT_EQ(parse_connect_timeout_ms("2000"), 2s);
  EXPECT_EQ(parse_connect_timeout_ms("0015"), 15ms);
  EXPECT_EQ(parse_connect_timeout_ms("9999999999"), std::chrono::milliseconds(9'999'999'999));
  for (const std::string_view text :
       {"", "0", "0000", "-1", "+1", "1.5", " 1", "1 ", "1ms", "10000000000" /* 11 digits */, "1e3"}) {
    EXPECT_FALSE(parse_connect_timeout_ms(text).has_value()) << "input \"" << text << "\" was accepted";
  }
}

// ---- tightest_budget / effective_budget --------------------------------------

TEST(TightestBudget, NoHeadersIsAbsent) {
  const header_budget b = tightest_budget({});
  EXPECT_EQ(b.state, kind::absent);
  EXPECT_TRUE(b.bad_header.empty());
}

TEST(TightestBudget, EachHeaderAloneIsRead) {
  EXPECT_EQ(tightest_budget({.request_timeout = "2S"}).budget, 2s);
  EXPECT_EQ(tightest_budget({.grpc_timeout = "800m"}).budget, 800ms);
  EXPECT_EQ(tightest_budget({.envoy_timeout_ms = "1500"}).budget, 1500ms);
  EXPECT_EQ(tightest_budget({.envoy_timeout_ms = "1500"}).state, kind::ok);
  EXPECT_EQ(tightest_budget({.connect_timeout_ms = "1200"}).budget, 1200ms);
}

TEST(TightestBudget, SmallestOfSeveralWins) {
  struct test_case {
    const char* name;
    budget_headers headers;
    duration expected;
  };
  const std::vector<test_case> cases = {
      {"request-timeout tightest", {"100m", "2S", "3000"}, 100ms},
      {"grpc-timeout tightest", {"2S", "100m", "3000"}, 100ms},
      {"envoy tightest", {"2S", "3S", "100"}, 100ms},
      {"equal", {"1S", "1000m", "1000"}, 1s},
      {"zero wins", {"1S", std::nullopt, "0"}, 0ms},
      {"two of three", {std::nullopt, "700m", "900"}, 700ms},
      {"connect tightest", {"2S", "3S", "1000", "250"}, 250ms},
      {"connect beside a tighter one", {std::nullopt, "100m", std::nullopt, "250"}, 100ms},
  };
  for (const auto& c : cases) {
    const header_budget b = tightest_budget(c.headers);
    EXPECT_EQ(b.state, kind::ok) << c.name;
    EXPECT_EQ(b.budget, c.expected) << c.name;
  }
}

TEST(TightestBudget, AnyMalformedHeaderMakesTheRequestInvalid) {
  struct test_case {
    const char* name;
    budget_headers headers;
    std::string_view bad;
  };
  const std::vector<test_case> cases = {
      {"bad request-timeout alone", {"2x", std::nullopt, std::nullopt}, "Request-Timeout"},
      {"bad grpc-timeout among valid", {"1S", "-1S", "500"}, "grpc-timeout"},
      {"bad envoy among valid", {"1S", "2S", "1.5"}, "X-Envoy-Expected-Rq-Timeout-Ms"},
      {"empty value is malformed", {"", std::nullopt, std::nullopt}, "Request-Timeout"},
      {"first malformed is named", {std::nullopt, "9", "x"}, "grpc-timeout"},
      {"gRPC syntax in the ms header", {std::nullopt, std::nullopt, "100m"}, "X-Envoy-Expected-Rq-Timeout-Ms"},
      {"zero is not a Connect timeout", {"1S", std::nullopt, std::nullopt, "0"}, "Connect-Timeout-Ms"},
      {"eleven digits", {std::nullopt, std::nullopt, std::nullopt, "10000000000"}, "Connect-Timeout-Ms"},
  };
  for (const auto& c : cases) {
    const header_budget b = tightest_budget(c.headers);
    EXPECT_EQ(b.state, kind::invalid) << c.name;
    EXPECT_EQ(b.bad_header, c.bad) << c.name;
  }
}

TEST(EffectiveBudget, DefaultWhenAbsentAndClampedToMax) {
  const duration def = 1s;
  const duration max = 30s;
  EXPECT_EQ(effective_budget({}, def, max), 1s);
  EXPECT_EQ(effective_budget({kind::ok, 5s, {}}, def, max), 5s);
  EXPECT_EQ(effective_budget({kind::ok, 30s, {}}, def, max), 30s);
  EXPECT_EQ(effective_budget({kind::ok, 31s, {}}, def, max), 30s);
  EXPECT_EQ(effective_budget({kind::ok, duration::max(), {}}, def, max), 30s);
  EXPECT_EQ(effective_budget({kind::ok, 0ns, {}}, def, max), 0ns);
  // A default above the maximum is clamped as well: the maximum always holds.
  EXPECT_EQ(effective_budget({}, 1min, max), 30s);
  // Precondition violated: defensive zero, never a usable budget.
  EXPECT_EQ(effective_budget({kind::invalid, 5s, "grpc-timeout"}, def, max), 0ns);
}

TEST(EffectiveBudget, EndToEndFromHeaders) {
  EXPECT_EQ(effective_budget(tightest_budget({.grpc_timeout = "99999999H"}), 1s, 1min), 1min);
  EXPECT_EQ(effective_budget(tightest_budget({.request_timeout = "250m"}), 1s, 1min), 250ms);
}

// ---- human durations -------------------------------------------------------

TEST(ParseHumanDuration, AcceptsExactValues) {
  const std::vector<grpc_case> cases = {
      {"250ms", 250ms},
      {"2s", 2s},
      {"1m", 1min},
      {"1h", 1h},
      {"1500us", 1500us},
      {"10ns", 10ns},
      {"0s", 0ns},
      {"1.5s", 1500ms},
      {"0.25s", 250ms},
      {"1.500000000000000000000s", 1500ms},  // trailing zeros add nothing
      {"0.001us", 1ns},
      {"0.000000001s", 1ns},
      {"1.5m", 90s},
      {"0.0000000000025h", 9ns},  // 13 fraction digits, still whole ns
      {"007s", 7s},
      {"9223372036854775807ns", duration::max()},
      {"2562047h", std::chrono::hours(2'562'047)},
      {"9223372036.854775807s", duration::max()},
  };
  for (const auto& c : cases) {
    const duration_parse p = parse_human_duration(c.text);
    ASSERT_TRUE(p.value.has_value()) << "input \"" << c.text << "\": " << p.error;
    EXPECT_EQ(p.value->count(), c.expected.count()) << "input \"" << c.text << "\"";
    EXPECT_TRUE(p.error.empty()) << "input \"" << c.text << "\"";
  }
}

TEST(ParseHumanDuration, RejectsWithAClearMessage) {
  struct test_case {
    std::string_view text;
    std::string_view error;
  };
  const std::vector<test_case> cases = {
      {"2x", R"(invalid duration "2x": unknown unit "x" (use ns, us, ms, s, m or h))"},
      {"2S", R"(invalid duration "2S": unknown unit "S" (use ns, us, ms, s, m or h))"},
      {"2sec", R"(invalid duration "2sec": unknown unit "sec" (use ns, us, ms, s, m or h))"},
      {"250", R"(invalid duration "250": missing unit (use ns, us, ms, s, m or h))"},
      {"", R"(invalid duration "": empty (expected a number and a unit, e.g. 250ms or 2s))"},
      {"ms", R"(invalid duration "ms": expected a number first, e.g. 250ms or 1.5s)"},
      {".5s", R"(invalid duration ".5s": expected a number first, e.g. 250ms or 1.5s)"},
      {"+1s", R"(invalid duration "+1s": expected a number first, e.g. 250ms or 1.5s)"},
      {"-1s", R"(invalid duration "-1s": negative durations are not allowed)"},
      {"2 s", R"(invalid duration "2 s": whitespace is not allowed (write e.g. 250ms, not 250 ms))"},
      {" 2s", R"(invalid duration " 2s": whitespace is not allowed (write e.g. 250ms, not 250 ms))"},
      {"2s ", R"(invalid duration "2s ": whitespace is not allowed (write e.g. 250ms, not 250 ms))"},
      {"1.s", R"(invalid duration "1.s": expected digits after the decimal point)"},
      {"1h30m", R"(invalid duration "1h30m": one number and one unit only (e.g. 90m, not 1h30m))"},
      {"1.5.5s", R"(invalid duration "1.5.5s": one number and one unit only (e.g. 90m, not 1h30m))"},
      {"0.5ns", R"(invalid duration "0.5ns": finer than one nanosecond)"},
      {"0.0000000001s", R"(invalid duration "0.0000000001s": finer than one nanosecond)"},
      {"0.0000000000001h", R"(invalid duration "0.0000000000001h": finer than one nanosecond)"},
      {"1.00000000000001h", R"(invalid duration "1.00000000000001h": finer than one nanosecond)"},
      {"9223372036854775808ns",
       R"(invalid duration "9223372036854775808ns": too large (at most 9223372036854775807ns, about 292 years))"},
      {"2562048h", R"(invalid duration "2562048h": too large (at most 9223372036854775807ns, about 292 years))"},
      {"9223372036.854775808s",
       R"(invalid duration "9223372036.854775808s": too large (at most 9223372036854775807ns, about 292 years))"},
      {"99999999999999999999999s",
       R"(invalid duration "99999999999999999999999s": too large (at most 9223372036854775807ns, about 292 years))"},
      {"2\x01s", R"(invalid duration "2\x01s": unknown unit "\x01s" (use ns, us, ms, s, m or h))"},
      {"2\"s", R"(invalid duration "2\"s": unknown unit "\"s" (use ns, us, ms, s, m or h))"},
  };
  for (const auto& c : cases) {
    const duration_parse p = parse_human_duration(c.text);
    EXPECT_FALSE(p.value.has_value()) << "input \"" << c.text << "\" was accepted";
    EXPECT_EQ(p.error, c.error) << "input \"" << c.text << "\"";
  }
}

TEST(ParseHumanDuration, LongInputIsCutInTheMessage) {
  const std::string text(200, 'z');
  const duration_parse p = parse_human_duration(text);
  EXPECT_FALSE(p.value.has_value());
  EXPECT_LT(p.error.size(), 150u) << p.error;  // bounded, whatever the input
  EXPECT_NE(p.error.find("...\""), std::string::npos) << p.error;
}

TEST(FormatHumanDuration, ShortestExactForm) {
  const std::vector<std::pair<duration, std::string_view>> cases = {
      {0ns, "0s"},
      {250ms, "250ms"},
      {2s, "2s"},
      {1min, "1m"},
      {1h, "1h"},
      {90min, "90m"},
      {1500us, "1500us"},
      {1500ms, "1500ms"},
      {10ns, "10ns"},
      {-2s, "-2s"},
      {duration::max(), "9223372036854775807ns"},
      {duration::min(), "-9223372036854775808ns"},
  };
  for (const auto& [d, expected] : cases) {
    EXPECT_EQ(format_human_duration(d), expected) << d.count() << "ns";
  }
}

TEST(FormatHumanDuration, RoundTripsExactly) {
  std::mt19937_64 rng(42);
  const std::vector<duration::rep> scales = {1, 1'000, 1'000'000, 1'000'000'000, 60'000'000'000, 3'600'000'000'000};
  std::uniform_int_distribution<std::size_t> pick(0, scales.size() - 1);
  std::uniform_int_distribution<int> bits(0, 62);
  for (int i = 0; i < 100'000; ++i) {
    // Multiples of each unit, so every unit of the format gets exercised.
    const duration::rep scale = scales[pick(rng)];
    const auto mask = (std::uint64_t{1} << bits(rng)) - 1;
    const duration d(static_cast<duration::rep>(rng() & mask) / scale * scale);
    const std::string text = format_human_duration(d);
    const duration_parse p = parse_human_duration(text);
    ASSERT_TRUE(p.value.has_value()) << d.count() << "ns -> " << text << ": " << p.error;
    ASSERT_EQ(*p.value, d) << d.count() << "ns -> " << text;
  }
}

}  // namespace
}  // namespace hourglass
