// Empty-job throughput (docs/reference/cli.md, "throughput").
//
// One thread submits `jobs` empty jobs as fast as it can to `workers`
// workers, and the clock stops when the last one has run. Idle workers block
// (moodycamel's semaphore spins briefly, then sleeps; asio and the mutex pool
// wait on a condition variable). Measured in the same run, in turn:
//   hourglass   the embedded executor, no deadline, callback completion
//   moodycamel  raw BlockingConcurrentQueue<std::function<void()>> workers
//   asio        boost::asio::thread_pool + post
//   mutex       std::deque<std::function<void()>> + mutex + condition variable
//   tbb         oneTBB task_arena(workers, no slot for the submitter) + enqueue
//               (when built with oneTBB; not under a sanitizer)
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace hourglass::bench {

struct throughput_options {
  std::size_t workers = 0;  // zero: cores - 1 (the submitter keeps a core), at least 1
  std::size_t jobs = 1'000'000;
  int rounds = 3;  // each pool runs `rounds` times, interleaved; the best round counts
  // Pools to run (for profiling one of them); empty: all. A pool not run reports 0.
  std::vector<std::string> pools;
};

struct throughput_report {
  std::size_t workers = 0;
  std::size_t jobs = 0;
  int rounds = 0;
  // jobs per second, best of the rounds
  double hourglass = 0, moodycamel = 0, asio = 0, mutex = 0, tbb = 0;  // tbb: 0 when not built in
  // every round, in order, for the record
  std::vector<double> hourglass_rounds, moodycamel_rounds, asio_rounds, mutex_rounds, tbb_rounds;
};

throughput_report run_throughput(const throughput_options& options,
                                 const std::function<void(const std::string&)>& progress);

}  // namespace hourglass::bench
