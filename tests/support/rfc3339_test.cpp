// RFC 3339 timestamps read strictly and written in UTC: a table of what is
// read (and as which instant) and what is refused.
#include "hourglass/support/rfc3339.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hourglass::support {
namespace {

using namespace std::chrono;

wall_time at(int y, unsigned mo, unsigned d, int h, int mi, int s, long long us = 0) {
  return sys_days(year(y) / mo / d) + hours(h) + minutes(mi) + seconds(s) + microseconds(us);
}

TEST(Rfc3339, ReadsUtcOffsetsFractionsAndTheAllowedSeparators) {
  struct row {
    const char* text;
    wall_time want;
  };
  const std::vector<row> rows{
      {"2026-12-05T10:00:00Z", at(2026, 12, 5, 10, 0, 0)},
      {"2026-12-05t10:00:00z", at(2026, 12, 5, 10, 0, 0)},
      {"2026-12-05 10:00:00Z", at(2026, 12, 5, 10, 0, 0)},
      {"2026-12-05T11:30:00+01:30", at(2026, 12, 5, 10, 0, 0)},
      {"2026-12-05T05:00:00-05:00", at(2026, 12, 5, 10, 0, 0)},
      {"2026-12-06T00:30:00+14:30", at(2026, 12, 5, 10, 0, 0)},
      {"2026-12-05T10:00:00.25Z", at(2026, 12, 5, 10, 0, 0, 250000)},
      {"2026-12-05T10:00:00.123456789Z", at(2026, 12, 5, 10, 0, 0, 123456)},
      {"2024-02-29T23:59:59Z", at(2024, 2, 29, 23, 59, 59)},
      {"2016-12-31T23:59:60Z", at(2017, 1, 1, 0, 0, 0)},
      {"1970-01-01T00:00:00Z", wall_time{}},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.text);
    const auto got = parse_rfc3339(r.text);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(*got, r.want);
  }
}

TEST(Rfc3339, RefusesWhatIsNotATimestamp) {
  for (const char* bad : {"",
                          "2026-12-05",
                          "2026-12-05T10:00:00",
                          "2026-12-05T10:00Z",
                          "2026-12-05T10:00:00+0100",
                          "2026-12-05T10:00:00+01",
                          "2026-13-05T10:00:00Z",
                          "2026-02-30T10:00:00Z",
                          "2025-02-29T10:00:00Z",
                          "2026-12-05T24:00:00Z",
                          "2026-12-05T10:60:00Z",
                          "2026-12-05T10:00:61Z",
                          "2026-12-05T10:00:00.Z",
                          "2026-12-05T10:00:00ZZ",
                          "2026-12-05T10:00:00+24:00",
                          "2026-12-05X10:00:00Z",
                          "+026-12-05T10:00:00Z",
                          "2026-12-05T10:00:00 Z",
                          "now",
                          "1733392800",
                          "0000-01-01T00:00:00+01:00",
                          "9999-12-31T23:00:00-01:00"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(parse_rfc3339(bad).has_value());
  }
}

TEST(Rfc3339, WritesUtcAndReadsBackTheSameInstant) {
  EXPECT_EQ(format_rfc3339(at(2026, 12, 5, 10, 0, 0)), "2026-12-05T10:00:00Z");
  EXPECT_EQ(format_rfc3339(at(2026, 12, 5, 10, 0, 0, 250000)), "2026-12-05T10:00:00.250000Z");
  EXPECT_EQ(format_rfc3339(wall_time{}), "1970-01-01T00:00:00Z");
  for (const wall_time t : {at(2026, 12, 5, 10, 0, 0, 1), at(2024, 2, 29, 23, 59, 59, 999999), wall_time{}}) {
    EXPECT_EQ(parse_rfc3339(format_rfc3339(t)), t);
  }
}

}  // namespace
}  // namespace hourglass::support
