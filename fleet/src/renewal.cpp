#include "renewal.hpp"

#include <algorithm>

namespace hourglass::fleet::detail {

using namespace std::chrono_literals;

time_point renewal_limit(time_point last_renewed, time_point sent, const lease_timing& t) noexcept {
  const time_point fencing_point = saturating_add(last_renewed, t.fence_after);
  return fencing_point > sent ? fencing_point : saturating_add(sent, t.renew_every);
}

renewal_decision after_renewal(const job_queue::renew_answer* answer, const renewal_facts& f, const lease_timing& t) {
  renewal_decision d;
  d.self_fenced = f.self_fenced;
  if (answer == nullptr) {
    // Tried again soon: fencing counts from the last renewal that got through.
    d.next = saturating_add(f.now, std::min<duration>(t.renew_every, 200ms));
    if (f.stopping) return d;
    d.broker_error = true;
    d.fence = !f.self_fenced && must_fence(f.last_renewed, f.now, t);
    d.self_fenced = f.self_fenced || d.fence;
    return d;
  }
  d.next = saturating_add(f.sent, t.renew_every);
  if (answer->fenced) {
    d.name_taken = true;
    d.fence = true;
    d.self_fenced = true;
    return d;
  }
  d.renewed = true;
  d.renewed_again = f.self_fenced;
  d.self_fenced = false;
  for (const std::string& e : answer->marked) d.entries.emplace_back(e, held_event::delete_marked);
  // The script reports an entry deleted from the stream, not lost: the
  // consumer stops renewing it, and nobody else can take it.
  for (const std::string& e : answer->lost) {
    if (std::find(answer->deleted.begin(), answer->deleted.end(), e) == answer->deleted.end())
      d.entries.emplace_back(e, held_event::lost);
  }
  return d;
}

}  // namespace hourglass::fleet::detail
