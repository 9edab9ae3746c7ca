// What the renewer does with a renewal's answer (or its failure): fence, take
// note of a name taken, renew again when, and which held entries get which
// event (held_entry.hpp). A pure function of the answer, our clock's
// readings and the lease timing, tested without a broker or threads
// (tests/fleet/renewal_test.cpp). The renewer's thread only calls the
// broker, feeds the held entries and logs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "held_entry.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/lease.hpp"
#include "hourglass/time.hpp"

namespace hourglass::fleet::detail {

// When a renewal sent at `sent` stops waiting for its answer: at the fencing
// point (an answer after it is of no use), or a renewal period on when that
// point has passed already (the first renewal, or one after a fence).
time_point renewal_limit(time_point last_renewed, time_point sent, const lease_timing& t) noexcept;

// What the renewer knew as a renewal ended, on its own clock.
struct renewal_facts {
  time_point sent;           // when it was sent
  time_point now;            // when its answer (or failure) came
  time_point last_renewed;   // when the last one that was answered was sent
  bool self_fenced = false;  // this daemon stopped its jobs, not renewed since
  bool stopping = false;     // the consumer is stopping: a failure is ours, not the broker's
};

struct renewal_decision {
  bool broker_error = false;   // count a broker error
  bool fence = false;          // every held entry gets `fenced`: its job stops, nothing from us
  bool name_taken = false;     // another process renews this name: stop reading, for good
  bool renewed = false;        // the lease is ours again until sent + lease: last_renewed = sent
  bool renewed_again = false;  // ... after this daemon had fenced itself (log it)
  bool self_fenced = false;    // the consumer's flag from now on (reading waits while it is set)
  time_point next;             // when to send the next renewal
  std::vector<std::pair<std::string, held_event>> entries;  // entry -> lost, delete_marked
};

// `answer`: the renew script's reply; nullptr when the broker could not be
// used (or the renewal was cut off at its limit).
renewal_decision after_renewal(const job_queue::renew_answer* answer, const renewal_facts& f, const lease_timing& t);

}  // namespace hourglass::fleet::detail
