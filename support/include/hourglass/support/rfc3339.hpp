// RFC 3339 timestamps ("2026-12-05T10:00:00Z", "2026-12-05T11:00:00.25+01:00"):
// the wall-clock times of the API (Job-Not-Before, a schedule's next fire),
// read strictly and written in UTC. Pure: no clock is read here.
//
// GCC 12's standard library has the calendar (year_month_day) but not
// std::chrono::parse, and Boost.DateTime's ISO reader takes no UTC offset:
// so a small reader of our own, table-tested and fuzzed.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace hourglass::support {

using wall_time = std::chrono::sys_time<std::chrono::microseconds>;

// YYYY-MM-DD "T" HH:MM:SS [.fraction] ("Z" | ("+" | "-") HH:MM), with "t",
// "z" and a space for "T" accepted (RFC 3339 section 5.6); a leap second
// (:60) reads as the next second's start; fractions past microseconds are
// cut. nullopt for anything else, a day the month lacks included.
std::optional<wall_time> parse_rfc3339(std::string_view text) noexcept;

// "2026-12-05T10:00:00Z", or "2026-12-05T10:00:00.250000Z" with a fraction.
std::string format_rfc3339(wall_time t);

}  // namespace hourglass::support
