#include "hourglass/fleet/lease.hpp"

#include <algorithm>
#include <charconv>

namespace hourglass::fleet {

lease_timing lease_timing_for(duration lease) noexcept {
  using namespace std::chrono_literals;
  lease_timing t;
  t.lease = std::max<duration>(lease, 3ms);
  t.renew_every = t.lease / 3;
  // The margin, a fifth of the lease, covers the last renewal's round trip
  // and the difference of two hosts' clock rates (ppm, not minutes); two
  // renewals may fail before it is reached.
  t.fence_after = t.lease - t.lease / 5;
  t.reclaim_every = std::min<duration>(t.renew_every, 1s);
  return t;
}

bool must_fence(time_point last_renewed, time_point now, const lease_timing& t) noexcept {
  return now >= last_renewed && now - last_renewed >= t.fence_after;
}

std::string format_lease(const lease_value& v) { return v.token + ":" + std::to_string(v.renewals); }

bool parse_lease(std::string_view text, lease_value& out) noexcept {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view n = text.substr(colon + 1);
  std::uint64_t count = 0;
  const auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
  if (n.empty() || ec != std::errc() || p != n.data() + n.size()) return false;
  out.token = std::string(text.substr(0, colon));
  out.renewals = count;
  return true;
}

name_claim judge_name(std::string_view before, std::string_view after) noexcept {
  if (after.empty()) return name_claim::free;  // expired or released meanwhile
  if (before != after) return name_claim::live_holder;
  return name_claim::dead_holder;
}

}  // namespace hourglass::fleet
