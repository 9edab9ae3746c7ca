// A CPU hog sharing the workers' cores (hourglass-bench overload --noise):
// the CPU hiccups that let work in that then cannot finish, made on purpose.
//
// While a cpu_noise lives, the thread that made it (and every thread it
// starts from then on: executors, pools) runs on the last `workers` cores
// only, and one hog thread per such core spins for `share` of each `period`
// and sleeps for the rest. The generator keeps the other cores
// (pin_to_generator_cores). share 0: nothing is pinned or started.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

#include <sched.h>

#include "hourglass/time.hpp"

namespace hourglass::bench {

class cpu_noise {
 public:
  cpu_noise(double share, duration period, std::size_t workers);
  ~cpu_noise();
  cpu_noise(const cpu_noise&) = delete;
  cpu_noise& operator=(const cpu_noise&) = delete;

  // Pins the calling thread to the cores the workers do not use.
  static void pin_to_generator_cores(std::size_t workers);

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> hogs_;
  cpu_set_t saved_{};
  bool pinned_ = false;
};

}  // namespace hourglass::bench
