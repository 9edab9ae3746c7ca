// Cron expressions: what is read and what is refused, and the next fire
// after an instant, in UTC and across a named zone's DST gap and fold.
#include "schedules/cron.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hourglass::server::detail {
namespace {

using namespace std::chrono;
using support::parse_rfc3339;
using support::wall_time;

wall_time utc(const char* text) {
  const auto t = parse_rfc3339(text);
  EXPECT_TRUE(t.has_value()) << text;
  return t.value_or(wall_time{});
}

cron_expression cron(const char* text) {
  const cron_reading r = parse_cron(text);
  EXPECT_TRUE(r.expr.has_value()) << text << ": " << r.error;
  return r.expr.value_or(cron_expression{});
}

std::string next_text(const char* expr, const char* after, const char* zone = "UTC") {
  const auto z = find_time_zone(zone);
  EXPECT_TRUE(z.has_value()) << zone;
  const std::optional<wall_time> t = next_fire(cron(expr), z.value_or(nullptr), utc(after));
  return t ? support::format_rfc3339(*t) : "never";
}

TEST(Cron, ReadsNumbersRangesStepsListsAndNames) {
  const cron_expression e = cron("*/15 9-17/4 1,15 jan-MAR,dec mon-fri");
  EXPECT_EQ(e.minutes, (std::bitset<60>().set(0).set(15).set(30).set(45)));
  EXPECT_EQ(e.hours, (std::bitset<24>().set(9).set(13).set(17)));
  EXPECT_EQ(e.days, (std::bitset<32>().set(1).set(15)));
  EXPECT_EQ(e.months, (std::bitset<13>().set(1).set(2).set(3).set(12)));
  EXPECT_EQ(e.weekdays, (std::bitset<7>().set(1).set(2).set(3).set(4).set(5)));
  EXPECT_FALSE(e.any_day);
  EXPECT_FALSE(e.any_weekday);
  EXPECT_EQ(cron("0 0 * * 7").weekdays, std::bitset<7>().set(0)) << "7 is Sunday too";
  EXPECT_EQ(cron("5/20 * * * *").minutes, (std::bitset<60>().set(5).set(25).set(45))) << "a/n: from a to the end";
  EXPECT_TRUE(cron("  0\t12 * * *  ").any_day) << "any spaces or tabs between fields";
  EXPECT_EQ(cron("@hourly").minutes, std::bitset<60>().set(0));
  EXPECT_EQ(cron("@weekly").weekdays, std::bitset<7>().set(0));
}

TEST(Cron, RefusesWhatIsNotFiveWellFormedFields) {
  for (const char* bad : {"",
                          "* * * *",
                          "* * * * * *",
                          "60 * * * *",
                          "* 24 * * *",
                          "* * 0 * *",
                          "* * 32 * *",
                          "* * * 0 *",
                          "* * * 13 *",
                          "* * * * 8",
                          "5-1 * * * *",
                          "*/0 * * * *",
                          "*/61 * * * *",
                          "a * * * *",
                          "1,,2 * * * *",
                          "1, * * * *",
                          "* * * jan-foo *",
                          "* * * * sunday",
                          "* mon * * *",
                          "1-2-3 * * * *",
                          "@every",
                          "@daily extra",
                          "-1 * * * *",
                          "+1 * * * *",
                          "@every 500ms",
                          "@every soon",
                          "@every 1s 2s"}) {
    SCOPED_TRACE(std::string("'") + bad + "'");
    const cron_reading r = parse_cron(bad);
    EXPECT_FALSE(r.expr.has_value());
    EXPECT_FALSE(r.error.empty());
  }
}

TEST(Cron, TheNextFireInUtcIsStrictlyAfterTheGivenInstant) {
  struct row {
    const char* expr;
    const char* after;
    const char* want;
  };
  const std::vector<row> rows{
      {"*/15 * * * *", "2026-12-05T10:07:30Z", "2026-12-05T10:15:00Z"},
      {"*/15 * * * *", "2026-12-05T10:15:00Z", "2026-12-05T10:30:00Z"},
      {"0 0 * * *", "2026-12-05T00:00:00Z", "2026-12-06T00:00:00Z"},
      {"0 0 * * *", "2026-12-31T23:59:59.999999Z", "2027-01-01T00:00:00Z"},
      {"0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"},
      {"0 0 30 2 *", "2026-03-01T00:00:00Z", "never"},
      {"0 12 13 * 5", "2026-12-01T00:00:00Z", "2026-12-04T12:00:00Z"},   // both restricted: either day
      {"0 12 13 * 5", "2026-12-11T12:00:00Z", "2026-12-13T12:00:00Z"},   // the 13th, a Sunday
      {"0 12 * * 5", "2026-12-05T00:00:00Z", "2026-12-11T12:00:00Z"},    // Fridays only
      {"0 12 */2 * 5", "2026-12-01T00:00:00Z", "2026-12-11T12:00:00Z"},  // "*"-led: odd days that are Fridays
      {"30 23 31 * *", "2026-11-01T00:00:00Z", "2026-12-31T23:30:00Z"},  // November has no 31st
      {"@hourly", "2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z"},
      {"@yearly", "2026-12-05T10:00:00Z", "2027-01-01T00:00:00Z"},
      {"@every 1s", "2026-12-05T10:00:00.250Z", "2026-12-05T10:00:01Z"},
      {"@every 1s", "2026-12-05T10:00:01Z", "2026-12-05T10:00:02Z"},
      {"@every 90m", "2026-12-05T10:00:00Z", "2026-12-05T10:30:00Z"},  // multiples of 90 min since 1970
  };
  for (const row& r : rows) {
    SCOPED_TRACE(std::string(r.expr) + " after " + r.after);
    EXPECT_EQ(next_text(r.expr, r.after), r.want);
  }
}

TEST(Cron, ANamedZoneSkipsATimeItsDstGapSkipsAndFiresOnceInAFold) {
  // Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 2026-10-25 03:00 CEST -> 02:00 CET.
  EXPECT_EQ(next_text("0 9 * * *", "2026-12-05T00:00:00Z", "Europe/Berlin"), "2026-12-05T08:00:00Z") << "CET, +1";
  EXPECT_EQ(next_text("0 9 * * *", "2026-07-01T00:00:00Z", "Europe/Berlin"), "2026-07-01T07:00:00Z") << "CEST, +2";
  EXPECT_EQ(next_text("30 2 * * *", "2026-03-28T12:00:00Z", "Europe/Berlin"), "2026-03-30T00:30:00Z")
      << "02:30 on the 29th never happens";
  EXPECT_EQ(next_text("30 2 * * *", "2026-10-24T12:00:00Z", "Europe/Berlin"), "2026-10-25T00:30:00Z")
      << "the fold's first 02:30, CEST";
  EXPECT_EQ(next_text("30 2 * * *", "2026-10-25T00:30:00Z", "Europe/Berlin"), "2026-10-26T01:30:00Z")
      << "not its second, an hour later";
  // 02:45 CEST; the fold's 02:00 and 02:30 CET fired already as CEST (00:00Z, 00:30Z): next is 03:00 CET.
  EXPECT_EQ(next_text("*/30 * * * *", "2026-10-25T00:45:00Z", "Europe/Berlin"), "2026-10-25T02:00:00Z");
}

TEST(Cron, ZonesAreFoundByName) {
  EXPECT_EQ(find_time_zone("UTC"), std::optional<const date::time_zone*>(nullptr));
  EXPECT_EQ(find_time_zone(""), std::optional<const date::time_zone*>(nullptr));
  ASSERT_TRUE(find_time_zone("Europe/Berlin").has_value());
  EXPECT_NE(*find_time_zone("Europe/Berlin"), nullptr);
  EXPECT_FALSE(find_time_zone("Nowhere/City").has_value());
}

}  // namespace
}  // namespace hourglass::server::detail
