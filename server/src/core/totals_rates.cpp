#include "core/totals_rates.hpp"

#include <algorithm>

namespace hourglass::server::detail {

void totals_history::add(time_point at, counters totals) {
  while (!samples_.empty() && at - samples_.front().first > keep_) samples_.pop_front();
  if (samples_.size() >= 2 && at - samples_[samples_.size() - 2].first < std::chrono::seconds(1)) {
    samples_.back() = {at, std::move(totals)};  // the previous one is kept as the window's edge
    return;
  }
  samples_.emplace_back(at, std::move(totals));
}

std::optional<window_rates> totals_history::over(duration window, time_point now) const {
  if (samples_.size() < 2) return std::nullopt;
  const auto first = std::find_if(samples_.begin(), samples_.end(),
                                  [&](const auto& s) { return now - s.first <= window; });
  if (first == samples_.end()) return std::nullopt;
  const auto& [from_at, from] = *first;
  const auto& [to_at, to] = samples_.back();
  const duration span = to_at - from_at;
  if (span <= duration::zero() || span * 4 < window) return std::nullopt;
  window_rates r{window, span, {}};
  const double seconds = std::chrono::duration<double>(span).count();
  for (const auto& [name, value] : to) {
    const auto before = std::lower_bound(from.begin(), from.end(), name,
                                         [](const auto& p, const std::string& n) { return p.first < n; });
    const std::uint64_t start = before != from.end() && before->first == name ? before->second : 0;
    r.per_second.emplace_back(name, value >= start ? static_cast<double>(value - start) / seconds : 0.0);
  }
  return r;
}

}  // namespace hourglass::server::detail
