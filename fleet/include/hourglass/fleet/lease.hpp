// A daemon's lease on its consumer name and its running jobs, and the
// decisions about it, as pure functions of (state, now) (--consumer, --lease:
// docs/reference/fleet-layout.md, "Time").
//
// A daemon renews its lease every `renew_every`; each renewal also resets the
// idle time of every stream entry it holds, so the others reclaim an entry
// only when its holder stopped renewing for a whole lease. A daemon that has
// not renewed for `fence_after` (the lease minus a margin for the round trip
// and clock rate differences) must presume the others are about to reclaim
// its jobs: it stops them itself (self-fencing) and records no outcome.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "hourglass/time.hpp"

namespace hourglass::fleet {

struct lease_timing {
  duration lease{};
  duration renew_every{};    // lease / 3: two renewals may fail before fencing
  duration fence_after{};    // lease - margin
  duration reclaim_every{};  // how often a daemon looks for entries idle past the lease
};
lease_timing lease_timing_for(duration lease) noexcept;

// Self-fencing: the last renewal that succeeded was *sent* at `last_renewed`
// (the broker may have applied it any time after), so the lease is counted
// from there, erring early.
bool must_fence(time_point last_renewed, time_point now, const lease_timing& t) noexcept;

// The lease key's value: "<token>:<renewal count>". A process owns a name
// while the token is its own; a renewal count that changes within one renewal
// period means another live process holds it.
struct lease_value {
  std::string token;
  std::uint64_t renewals = 0;
};
std::string format_lease(const lease_value& v);
bool parse_lease(std::string_view text, lease_value& out) noexcept;

// Taking a name over at start. `before` and `after` are the lease key's
// values read one renewal period apart (empty: no key). A holder that renewed
// in between is alive: the new daemon must refuse to start.
enum class name_claim { free, dead_holder, live_holder };
name_claim judge_name(std::string_view before, std::string_view after) noexcept;

}  // namespace hourglass::fleet
