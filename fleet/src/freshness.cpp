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

bool worth_starting(time_point start_by, duration min_budget, time_point now) noexcept {
  if (start_by == never) return true;
  return start_by > now && start_by - now >= std::max(min_budget, duration(1));
}

duration fleet_predicted_wait(std::uint64_t backlog, duration mean_run, std::uint64_t live_slots) noexcept {
  if (backlog == 0) return duration::zero();
  if (live_slots == 0) return duration::max();
  const long double wait = static_cast<long double>(backlog) * static_cast<long double>(mean_run.count()) /
                           static_cast<long double>(live_slots);
  if (wait >= static_cast<long double>(duration::max().count())) return duration::max();
  return duration(static_cast<duration::rep>(wait));
}

duration freshness_at_entry(duration freshness, duration round_trip) noexcept {
  if (freshness == duration::max()) return freshness;
  const duration trips = round_trip <= duration::zero()      ? duration::zero()
                         : round_trip >= duration::max() / 2 ? duration::max()
                                                             : 2 * round_trip;
  return freshness > trips ? freshness - trips : duration::zero();
}

bool admit_at_enqueue(duration freshness, duration predicted_wait, duration min_budget) noexcept {
  if (freshness == duration::max()) return true;
  if (predicted_wait == duration::max()) return false;
  // freshness >= wait + max(min_budget, 1 tick), without overflowing.
  const duration need = std::max(min_budget, duration(1));
  return freshness > predicted_wait && freshness - predicted_wait >= need;
}

}  // namespace hourglass::fleet
