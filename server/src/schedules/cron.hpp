// Cron expressions for periodic jobs: five fields, read strictly, and the
// next fire after a given instant in UTC or a named time zone. Pure: the
// caller passes `after`; nothing reads a clock. Internal to the server.
//
//   minute  hour  day-of-month  month  day-of-week
//   0-59    0-23  1-31          1-12   0-7 (0 and 7: Sunday)
//
// Each field: "*", a number, a range "a-b", a step "*/n", "a-b/n" or
// "a/n" (from a to the field's end), or a list of those ("1,15,30-35").
// Months and weekdays also by name (jan-dec, sun-sat, any case). Macros:
// @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly;
// and "@every DURATION" ("@every 30s", "@every 90m"), fires at the whole
// multiples of DURATION since the Unix epoch, whatever the zone.
// As in Vixie cron, when both day fields are restricted a day matching
// either fires; when one is "*", the other decides.
//
// A named zone's local times: a time that a DST gap skips never fires (it
// never happens); a time that a DST fold repeats fires once, at its first
// occurrence. Debian has no cron library in C++; the zones come from the
// system's tzdata through Howard Hinnant's date library (libdate-tz).
#pragma once

#include <bitset>
#include <optional>
#include <string>
#include <string_view>

#include "hourglass/support/rfc3339.hpp"
#include "hourglass/time.hpp"

namespace date {
class time_zone;
}

namespace hourglass::server::detail {

struct cron_expression {
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days;           // 1-31
  std::bitset<13> months;         // 1-12
  std::bitset<7> weekdays;        // 0-6, Sunday 0
  bool any_day = true;            // day-of-month was "*"
  bool any_weekday = true;        // day-of-week was "*"
  std::optional<duration> every;  // "@every": the fields are unused
};

struct cron_reading {
  std::optional<cron_expression> expr;
  std::string error;  // when !expr: which field, and why
};
cron_reading parse_cron(std::string_view text);

// The zone named `name` ("Europe/Berlin"): nullptr for UTC ("UTC" or ""),
// nullopt when tzdata has no zone by that name.
std::optional<const date::time_zone*> find_time_zone(std::string_view name);

// The first fire strictly after `after`, in `zone` (nullptr: UTC); nullopt
// when the expression never fires (the 30th of February) within 28 years.
std::optional<support::wall_time> next_fire(const cron_expression& e, const date::time_zone* zone,
                                            support::wall_time after);

}  // namespace hourglass::server::detail
