#include "hourglass/support/rfc3339.hpp"

#include <cstdio>

namespace hourglass::support {

namespace {

// `n` digits at `s[at]`, as a number; -1 when they are not all digits.
int digits(std::string_view s, std::size_t at, std::size_t n) noexcept {
  if (at + n > s.size()) return -1;
  int v = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

}  // namespace

std::optional<wall_time> parse_rfc3339(std::string_view s) noexcept {
  using namespace std::chrono;
  // 2026-12-05T10:00:00
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':') return std::nullopt;
  if (s[10] != 'T' && s[10] != 't' && s[10] != ' ') return std::nullopt;
  const int y = digits(s, 0, 4), mo = digits(s, 5, 2), d = digits(s, 8, 2);
  const int h = digits(s, 11, 2), mi = digits(s, 14, 2), sec = digits(s, 17, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0) return std::nullopt;
  if (h > 23 || mi > 59 || sec > 60) return std::nullopt;
  const year_month_day date{year(y), month(static_cast<unsigned>(mo)), day(static_cast<unsigned>(d))};
  if (!date.ok()) return std::nullopt;
  std::size_t at = 19;
  microseconds fraction{0};
  if (at < s.size() && s[at] == '.') {
    ++at;
    const std::size_t first = at;
    long long us = 0;
    while (at < s.size() && s[at] >= '0' && s[at] <= '9') {
      if (at - first < 6) us = us * 10 + (s[at] - '0');
      ++at;
    }
    if (at == first) return std::nullopt;
    for (std::size_t n = at - first; n < 6; ++n) us *= 10;
    fraction = microseconds(us);
  }
  if (at >= s.size()) return std::nullopt;
  minutes offset{0};
  if (s[at] == 'Z' || s[at] == 'z') {
    ++at;
  } else if (s[at] == '+' || s[at] == '-') {
    const int oh = digits(s, at + 1, 2), om = digits(s, at + 4, 2);
    if (oh < 0 || om < 0 || at + 3 >= s.size() || s[at + 3] != ':' || oh > 23 || om > 59) return std::nullopt;
    offset = hours(oh) + minutes(om);
    if (s[at] == '-') offset = -offset;
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != s.size()) return std::nullopt;
  // Local time minus its offset is UTC: still a four-digit year, so it is written back as read.
  const wall_time utc = sys_days(date) + hours(h) + minutes(mi) + seconds(sec) + fraction - offset;
  const int utc_year = static_cast<int>(year_month_day(floor<days>(utc)).year());
  if (utc_year < 0 || utc_year > 9999) return std::nullopt;
  return utc;
}

std::string format_rfc3339(wall_time t) {
  using namespace std::chrono;
  const sys_days day_start = floor<days>(t);
  const year_month_day date(day_start);
  const hh_mm_ss<microseconds> tod(t - day_start);
  char buf[40];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02lld", static_cast<int>(date.year()),
                        static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                        static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
                        static_cast<long long>(tod.seconds().count()));
  std::string out(buf, static_cast<std::size_t>(n));
  if (tod.subseconds().count() != 0) {
    n = std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(tod.subseconds().count()));
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out + "Z";
}

}  // namespace hourglass::support
