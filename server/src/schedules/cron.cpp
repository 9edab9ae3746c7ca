#include "schedules/cron.hpp"

#include <date/tz.h>

#include "hourglass/budget_codec.hpp"

#include <array>
#include <cctype>
#include <charconv>
#include <stdexcept>
#include <vector>

namespace hourglass::server::detail {

namespace {

struct field_spec {
  const char* name;
  int lo, hi;
  const std::array<std::string_view, 12>* names;  // nullptr: numbers only
  int first_name_value;                           // the value of names[0]
};

constexpr std::array<std::string_view, 12> month_names{"jan", "feb", "mar", "apr", "may", "jun",
                                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 12> weekday_names{"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

const std::array<field_spec, 5> fields{{
    {"minute", 0, 59, nullptr, 0},
    {"hour", 0, 23, nullptr, 0},
    {"day of month", 1, 31, nullptr, 0},
    {"month", 1, 12, &month_names, 1},
    {"day of week", 0, 7, &weekday_names, 0},
}};

std::optional<int> value_of(std::string_view s, const field_spec& f) {
  if (s.empty()) return std::nullopt;
  if (std::isalpha(static_cast<unsigned char>(s.front())) != 0) {
    if (f.names == nullptr || s.size() != 3) return std::nullopt;
    for (std::size_t i = 0; i < f.names->size(); ++i) {
      const std::string_view n = (*f.names)[i];
      if (n.empty()) break;
      bool same = true;
      for (std::size_t k = 0; k < 3; ++k) same = same && std::tolower(static_cast<unsigned char>(s[k])) == n[k];
      if (same) return f.first_name_value + static_cast<int>(i);
    }
    return std::nullopt;
  }
  int v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// One field into `bits` (bit v for value v); "" when well formed, else why not.
std::string parse_field(std::string_view text, const field_spec& f, std::bitset<64>& bits) {
  const std::string bad = std::string(f.name) + " '" + std::string(text) + "' ";
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    at = comma + 1;
    const std::size_t slash = item.find('/');
    const std::string_view range = item.substr(0, slash);
    int step = 1;
    if (slash != std::string_view::npos) {
      const std::string_view s = item.substr(slash + 1);
      const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
      if (s.empty() || ec != std::errc() || p != s.data() + s.size() || step < 1 || step > f.hi)
        return bad + "has a step that is not 1 to " + std::to_string(f.hi);
    }
    int a = f.lo, b = f.hi;
    if (range != "*") {
      const std::size_t dash = range.find('-');
      const std::optional<int> first = value_of(range.substr(0, dash), f);
      const std::optional<int> last = dash == std::string_view::npos
                                          ? (slash == std::string_view::npos ? first : std::optional<int>(f.hi))
                                          : value_of(range.substr(dash + 1), f);
      if (!first || !last) return bad + "is not a number, range or list";
      a = *first;
      b = *last;
    }
    if (a < f.lo || b > f.hi || a > b)
      return bad + "is outside " + std::to_string(f.lo) + "-" + std::to_string(f.hi) + " or runs backwards";
    for (int v = a; v <= b; v += step) bits.set(static_cast<std::size_t>(v));
  }
  return "";
}

template <std::size_t N>
std::bitset<N> low_bits(const std::bitset<64>& b) {
  std::bitset<N> out;
  for (std::size_t i = 0; i < N; ++i) out[i] = b[i];
  return out;
}

bool day_matches(const cron_expression& e, date::year_month_day ymd) {
  const bool dom = e.days[static_cast<unsigned>(ymd.day())];
  const bool dow = e.weekdays[date::weekday(date::sys_days(ymd)).c_encoding()];
  // Vixie cron's rule: a "*"-led day field defers to the other.
  if (e.any_day || e.any_weekday) return dom && dow;
  return dom || dow;
}

}  // namespace

cron_reading parse_cron(std::string_view text) {
  static const std::array<std::pair<std::string_view, std::string_view>, 8> macros{{
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
      {"", ""},
  }};
  cron_reading r;
  std::vector<std::string_view> parts;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t start = text.find_first_not_of(" \t", at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(text.find_first_of(" \t", start), text.size());
    parts.push_back(text.substr(start, end - start));
    at = end;
  }
  if (parts.size() == 2 && parts[0] == "@every") {
    const duration_parse d = parse_human_duration(parts[1]);
    if (!d.value || *d.value < std::chrono::seconds(1)) {
      r.error = "@every takes a duration of at least 1s (30s, 5m, 1h), not '" + std::string(parts[1]) + "'";
      return r;
    }
    cron_expression e;
    e.every = std::chrono::ceil<std::chrono::microseconds>(*d.value);
    r.expr = e;
    return r;
  }
  if (parts.size() == 1 && parts[0].front() == '@') {
    for (const auto& [name, expansion] : macros) {
      if (!name.empty() && parts[0] == name) return parse_cron(expansion);
    }
    r.error = "'" + std::string(parts[0]) + "' is not a macro (@yearly, @monthly, @weekly, @daily, @hourly, @every)";
    return r;
  }
  if (parts.size() != 5) {
    r.error = "a cron expression has five fields (minute hour day-of-month month day-of-week), not " +
              std::to_string(parts.size());
    return r;
  }
  std::array<std::bitset<64>, 5> bits;
  for (std::size_t i = 0; i < 5; ++i) {
    if (std::string why = parse_field(parts[i], fields[i], bits[i]); !why.empty()) {
      r.error = std::move(why);
      return r;
    }
  }
  cron_expression e;
  e.minutes = low_bits<60>(bits[0]);
  e.hours = low_bits<24>(bits[1]);
  e.days = low_bits<32>(bits[2]);
  e.months = low_bits<13>(bits[3]);
  e.weekdays = low_bits<7>(bits[4]);
  if (bits[4][7]) e.weekdays.set(0);  // 7 is Sunday too
  e.any_day = parts[2].front() == '*';
  e.any_weekday = parts[4].front() == '*';
  r.expr = e;
  return r;
}

std::optional<const date::time_zone*> find_time_zone(std::string_view name) {
  if (name.empty() || name == "UTC") return nullptr;
  try {
    return date::locate_zone(name);
  } catch (const std::runtime_error&) {
    return std::nullopt;
  }
}

std::optional<support::wall_time> next_fire(const cron_expression& e, const date::time_zone* zone,
                                            support::wall_time after) {
  using namespace std::chrono;
  using local_minutes = date::local_time<minutes>;
  if (e.every) {  // the next whole multiple since the epoch
    const auto step = duration_cast<microseconds>(*e.every);
    const auto n = floor<microseconds>(after).time_since_epoch() / step;
    return support::wall_time((n + 1) * step);
  }
  const auto start = floor<minutes>(after) + minutes(1);  // strictly after, at whole minutes
  local_minutes l = zone != nullptr ? floor<minutes>(zone->to_local(start)) : local_minutes(start.time_since_epoch());
  const local_minutes limit = l + date::days(28 * 366);  // a calendar repeats within 28 years
  while (l < limit) {
    const auto day = floor<date::days>(l);
    const date::year_month_day ymd(day);
    if (!e.months[static_cast<unsigned>(ymd.month())]) {
      const date::year_month next = date::year_month(ymd.year(), ymd.month()) + date::months(1);
      l = local_minutes(date::local_days(next / 1));
      continue;
    }
    if (!day_matches(e, ymd)) {
      l = local_minutes(day + date::days(1));
      continue;
    }
    const date::hh_mm_ss<minutes> tod(l - day);
    if (!e.hours[static_cast<std::size_t>(tod.hours().count())]) {
      l = floor<hours>(l) + hours(1);
      continue;
    }
    if (!e.minutes[static_cast<std::size_t>(tod.minutes().count())]) {
      l += minutes(1);
      continue;
    }
    sys_time<minutes> fire(l.time_since_epoch());
    if (zone != nullptr) {
      const date::local_info info = zone->get_info(l);
      if (info.result == date::local_info::nonexistent) {  // a DST gap skips it: it never happens
        l += minutes(1);
        continue;
      }
      fire = sys_time<minutes>(l.time_since_epoch()) - duration_cast<minutes>(info.first.offset);  // a fold: the first
    }
    if (fire > after) return time_point_cast<microseconds>(fire);
    l += minutes(1);  // the fold's second pass: fired already
  }
  return std::nullopt;
}

}  // namespace hourglass::server::detail
