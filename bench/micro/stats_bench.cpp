// Stats recording: the histogram and the metrics recorders the executor
// calls per job, beside a bare relaxed atomic increment.
#include <benchmark/benchmark.h>

#include <array>
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

// What a worker records per job with a deadline (dispatch and finish), into
// the registry's shared histograms or into a shard of its own (range(0) = 1).
void BM_Metrics_PerJob(benchmark::State& state) {
  static metrics m;
  const bool sharded = state.range(0) != 0;
  metrics_shard* shard = sharded ? m.acquire_shard() : nullptr;
  handler_metrics& h = m.handler("bench");
  const auto d = std::chrono::microseconds(250);
  for (auto _ : state) {
    m.on_dispatch(d, d, shard);
    m.on_finished(h, status::ok(), d, false, shard);
  }
  m.release_shard(shard);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Metrics_PerJob)->ArgName("shard")->Arg(0)->Arg(1)->Threads(1)->Threads(2);

void BM_Metrics_Snapshot(benchmark::State& state) {
  static metrics m;
  m.handler("bench");
  for (auto _ : state) benchmark::DoNotOptimize(m.snapshot());
}
BENCHMARK(BM_Metrics_Snapshot);

// What GET /metrics costs on top of the snapshot: the text of four histograms
// with values spread over their range, and a handler.
void BM_Metrics_RenderPrometheus(benchmark::State& state) {
  static metrics m;
  m.handler("bench");
  for (int i = 1; i <= 10'000; ++i) {
    const auto d = std::chrono::microseconds(i * 37 % 2'000'000);
    m.on_dispatch(d, d);
    m.on_finished(m.handler("bench"), status::ok(), d, false);
  }
  const metrics_snapshot snap = m.snapshot();
  for (auto _ : state) benchmark::DoNotOptimize(render_prometheus(snap));
}
BENCHMARK(BM_Metrics_RenderPrometheus);

// The cumulative bucket counts of one rendered histogram: one pass (what
// render_prometheus does) against one count_at_or_below per bound (what it did).
histogram_snapshot spread_snapshot() {
  log_histogram h;
  for (int i = 1; i <= 10'000; ++i) h.record(std::chrono::microseconds(i * 37 % 2'000'000));
  return h.snapshot();
}

void BM_Histogram_CumulativeCountsOnePass(benchmark::State& state) {
  const histogram_snapshot s = spread_snapshot();
  std::array<std::uint64_t, prometheus_bucket_bounds_ns.size()> out{};
  for (auto _ : state) {
    s.counts_at_or_below(prometheus_bucket_bounds_ns, out);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Histogram_CumulativeCountsOnePass);

void BM_Histogram_CumulativeCountsPerBound(benchmark::State& state) {
  const histogram_snapshot s = spread_snapshot();
  std::array<std::uint64_t, prometheus_bucket_bounds_ns.size()> out{};
  for (auto _ : state) {
    for (std::size_t k = 0; k < out.size(); ++k) out[k] = s.count_at_or_below(prometheus_bucket_bounds_ns[k]);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Histogram_CumulativeCountsPerBound);

}  // namespace
