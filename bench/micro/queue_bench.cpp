// Queue enqueue + dequeue: hourglass's admission queue beside the raw
// moodycamel queue it wraps. Arg = jobs pushed then popped per iteration;
// Threads = concurrent producer-consumers on one queue.
#include <benchmark/benchmark.h>
#include <concurrentqueue/concurrentqueue.h>

#include <chrono>
#include <memory>
#include <vector>

#include "hourglass/admission_queue.hpp"

namespace {

using namespace hourglass;

admission_queue& shared_queue() {
  static admission_queue q(admission_queue::options{1 << 16, 1, {}});
  return q;
}

void BM_AdmissionQueue_PushPop(benchmark::State& state) {
  admission_queue& q = shared_queue();
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<queued_job> jobs(n);
  for (auto& j : jobs) j.bounds.deadline = never;
  const time_point now = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (auto& j : jobs) benchmark::DoNotOptimize(q.try_push(&j, now));
    for (std::size_t i = 0; i < n; ++i) benchmark::DoNotOptimize(q.try_pop());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_AdmissionQueue_PushPop)->Arg(1)->Arg(64)->Arg(1024)->Threads(1)->Threads(2)->UseRealTime();

void BM_Moodycamel_PushPop(benchmark::State& state) {
  static moodycamel::ConcurrentQueue<void*> q(1 << 16);
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<queued_job> jobs(n);
  for (auto _ : state) {
    for (auto& j : jobs) benchmark::DoNotOptimize(q.enqueue(&j));
    void* out = nullptr;
    for (std::size_t i = 0; i < n; ++i) benchmark::DoNotOptimize(q.try_dequeue(out));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_Moodycamel_PushPop)->Arg(1)->Arg(64)->Arg(1024)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
