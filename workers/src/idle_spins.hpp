// How long an idle worker polls the admission queue before it sleeps.
// Internal to workers/.
#pragma once

#include <cstddef>

namespace hourglass::detail {

// Idle workers poll before they sleep only when each has a core: with more
// workers than cores (a fleet consumer's slots, I/O-bound handlers) their
// polling takes the cores the producer, the I/O threads and the broker need.
// hourglass-bench fleet, 10 workers on 2 cores: 1.15-1.3x the jobs/s.
int idle_spins_for(std::size_t workers);

}  // namespace hourglass::detail
