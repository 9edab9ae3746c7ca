// Stats recording: the histogram and the metrics recorders the executor
// calls per job, beside a bare relaxed atomic increment.
#include <benchmark/benchmark.h>

#include <atomic>

#include "hourglass/histogram.hpp"
#include "hourglass/metrics.hpp"

namespace {

using namespace hourglass;

void BM_Atomic_Increment(benchmark::State& state) {
  static std::atomic<std::uint64_t> n{0};
  for (auto _ : state) n.fetch_add(1, std::memory_order_relaxed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Atomic_Increment)->Threads(1)->Threads(2);

void BM_Histogram_Record(benchmark::State& state) {
  static log_histogram h(log_histogram::default_precision);
  std::uint64_t v = 1000 + static_cast<std::uint64_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    h.record_ns(v);
    v = v * 6364136223846793005ULL + 1442695040888963407ULL;
    v = (v >> 40) + 1000;  // 1 µs .. ~16 ms
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Histogram_Record)->Threads(1)->Threads(2);

void BM_Metrics_OnFinished(benchmark::State& state) {
  static metrics m;
  handler_metrics& h = m.handler("bench");
  for (auto _ : state) m.on_finished(h, status::ok(), std::chrono::microseconds(250), false);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Metrics_OnFinished)->Threads(1)->Threads(2);

void BM_Metrics_Snapshot(benchmark::State& state) {
  static metrics m;
  m.handler("bench");
  for (auto _ : state) benchmark::DoNotOptimize(m.snapshot());
}
BENCHMARK(BM_Metrics_Snapshot);

}  // namespace
