// Contexts: making a child, cancelling N children of one parent, and
// cancelling a fan-out of N (fan_out.hpp) when a sibling fails; beside
// std::stop_source with N std::stop_callbacks (asio has no fan-out).
#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <vector>

#include "hourglass/context.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/fan_out.hpp"

namespace {

using namespace hourglass;
using namespace std::chrono_literals;

// Arg 0: a child with no deadline of its own; 1: a tighter deadline (arms a timer).
void BM_Context_Child(benchmark::State& state) {
  hourglass::clock& clk = real_clock();
  context_source parent(clk, clk.now() + 1h);
  const bool own_deadline = state.range(0) != 0;
  for (auto _ : state) {
    auto child = own_deadline ? parent.get().child({.cap = 30min}) : parent.get().child();
    benchmark::DoNotOptimize(child.get().deadline());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Context_Child)->Arg(0)->Arg(1);

// GCC 12 at -Og (the asan preset) warns that std::stop_source's own
// constructor, which hands `*this` to its state, may read `parent`
// uninitialized: a false positive inside <stop_token>, silenced here only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
void BM_StopSource_Callback(benchmark::State& state) {
  std::stop_source parent;
  for (auto _ : state) {
    std::stop_callback cb(parent.get_token(), [] {});
    benchmark::DoNotOptimize(&cb);
  }
  state.SetItemsProcessed(state.iterations());
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
BENCHMARK(BM_StopSource_Callback);

// Make N children of a parent, cancel the parent, check every child stopped.
void BM_Context_CancelChildren(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  manual_clock clk;
  std::vector<context_source> children;
  children.reserve(n);
  for (auto _ : state) {
    context_source parent(clk);
    for (std::size_t i = 0; i < n; ++i) children.push_back(parent.get().child());
    parent.cancel();
    for (auto& c : children) {
      if (!c.get().done()) state.SkipWithError("child not stopped");
    }
    children.clear();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_Context_CancelChildren)->Arg(1)->Arg(16)->Arg(256);

void BM_StopSource_CancelCallbacks(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  using cb = std::stop_callback<void (*)()>;
  std::vector<std::optional<cb>> cbs(n);
  for (auto _ : state) {
    std::stop_source parent;
    for (auto& c : cbs)
      c.emplace(
          parent.get_token(), +[] {});
    parent.request_stop();
    for (auto& c : cbs) c.reset();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_StopSource_CancelCallbacks)->Arg(1)->Arg(16)->Arg(256);

// all_of over N branches: branch 0 fails at once and cancels its siblings
// (cause sibling); the rest wait on their context. Time until every branch
// has its outcome.
void BM_FanOut_CancelBySibling(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  executor ex({.workers = 1});
  context_source caller(real_clock(), real_clock().now() + 1h);
  std::vector<branch_fn<int>> branches;
  branches.emplace_back([](const context&) -> int { throw std::runtime_error("fail"); });
  for (std::size_t i = 1; i < n; ++i) {
    branches.emplace_back([](const context& ctx) {
      ctx.sleep_for(1h);
      ctx.check();
      return 1;
    });
  }
  for (auto _ : state) {
    auto results = all_of<int>(ex, caller, branches);
    if (results.size() != n || results[0].ok()) state.SkipWithError("unexpected fan-out result");
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_FanOut_CancelBySibling)->Arg(2)->Arg(16)->Arg(256)->UseRealTime();

}  // namespace
