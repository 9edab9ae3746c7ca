#include "hourglass/fleet/freshness.hpp"

#include <algorithm>
#include <charconv>

namespace hourglass::fleet {

namespace {

template <class T>
std::optional<T> whole_number(std::string_view s) noexcept {
  T v{};
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<stream_id> parse_stream_id(std::string_view text) noexcept {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  const auto ms = whole_number<std::uint64_t>(text.substr(0, dash));
  const auto seq = whole_number<std::uint64_t>(text.substr(dash + 1));
  if (!ms || !seq) return std::nullopt;
  return stream_id{*ms, *seq};
}

std::optional<std::int64_t> parse_broker_time(std::string_view seconds, std::string_view micros) noexcept {
  const auto s = whole_number<std::uint64_t>(seconds);  // unsigned: no sign accepted
  const auto us = whole_number<std::uint64_t>(micros);
  if (!s || !us || *us >= 1'000'000 || *s > static_cast<std::uint64_t>(INT64_MAX / 1'000'000 - 1)) return std::nullopt;
  return static_cast<std::int64_t>(*s * 1'000'000 + *us);
}

job_age age_on_broker(const stream_id& entry, std::int64_t broker_now_us) noexcept {
  const auto added_us = static_cast<std::int64_t>(entry.ms) * 1000;
  job_age a;
  if (broker_now_us < added_us) {
    a.negative = true;
    return a;
  }
  a.waited = std::chrono::microseconds(broker_now_us - added_us);
  return a;
}

time_point start_by_on_our_clock(const job_age& age, duration freshness, time_point time_sent) noexcept {
  if (freshness == duration::max()) return never;
  if (age.waited >= freshness) return time_sent;
  return saturating_add(time_sent, freshness - age.waited);
}

duration freshness_at_entry(duration freshness, duration round_trip) noexcept {
  if (freshness == duration::max()) return freshness;
  const duration trips = round_trip <= duration::zero()      ? duration::zero()
                         : round_trip >= duration::max() / 2 ? duration::max()
                                                             : 2 * round_trip;
  return freshness > trips ? freshness - trips : duration::zero();
}

}  // namespace hourglass::fleet
