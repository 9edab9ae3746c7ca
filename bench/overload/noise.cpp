#include "overload/noise.hpp"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace hourglass::bench {

namespace {

std::size_t cores() { return std::max(1u, std::thread::hardware_concurrency()); }

void pin_self(std::size_t first, std::size_t count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (std::size_t c = first; c < first + count; ++c) CPU_SET(c, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    throw std::runtime_error("--noise: cannot pin threads to cores");
  }
}

}  // namespace

cpu_noise::cpu_noise(double share, duration period, std::size_t workers) {
  if (share <= 0) return;
  if (share >= 1 || period <= duration::zero()) throw std::invalid_argument("--noise must be in [0, 1)");
  if (workers >= cores()) throw std::invalid_argument("--noise needs a core for the generator (workers < cores)");
  pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_);
  const std::size_t first = cores() - workers;
  pin_self(first, workers);
  pinned_ = true;
  const auto busy = std::chrono::duration_cast<duration>(period * share);
  for (std::size_t c = first; c < cores(); ++c) {
    hogs_.emplace_back([this, c, busy, period] {
      pin_self(c, 1);
      while (!stop_.load(std::memory_order_relaxed)) {
        const auto until = std::chrono::steady_clock::now() + busy;
        while (std::chrono::steady_clock::now() < until) {
        }
        std::this_thread::sleep_for(period - busy);
      }
    });
  }
}

cpu_noise::~cpu_noise() {
  stop_.store(true);
  for (auto& t : hogs_) t.join();
  if (pinned_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
}

void cpu_noise::pin_to_generator_cores(std::size_t workers) { pin_self(0, cores() - workers); }

}  // namespace hourglass::bench
