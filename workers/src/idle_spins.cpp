#include "idle_spins.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "hourglass/admission_queue.hpp"

namespace hourglass::detail {

int idle_spins_for(std::size_t workers) {
  // The cores this process may run on (its affinity: a container's cpuset),
  // not the machine's.
  cpu_set_t set;
  CPU_ZERO(&set);
  const auto cores = static_cast<std::size_t>(
      ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : std::thread::hardware_concurrency());
  return workers <= std::max<std::size_t>(cores, 1) ? admission_queue::options{}.idle_spins : 0;
}

}  // namespace hourglass::detail
