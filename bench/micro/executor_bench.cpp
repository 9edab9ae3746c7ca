// The executor's hot paths beside raw moodycamel workers and
// boost::asio::thread_pool: a submit -> run -> completion round trip, a batch
// of N, and refusal at admission (which must not allocate).
#include <benchmark/benchmark.h>
#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "hourglass/executor.hpp"

namespace {

using namespace hourglass;
using namespace std::chrono_literals;

// A completion the submitting thread spins on (the round trip is what is
// measured, not a futex wake-up of the submitter).
struct done_flag {
  std::atomic<std::uint64_t> n{0};
  void hit() noexcept { n.fetch_add(1, std::memory_order_release); }
  void wait_for(std::uint64_t target) const noexcept {
    while (n.load(std::memory_order_acquire) < target) {
    }
  }
};

// ---- round trip: submit one, wait until it has run, repeat ----
void BM_Executor_RoundTrip(benchmark::State& state) {
  executor ex({.workers = static_cast<std::size_t>(state.range(0))});
  handler_metrics* h = &ex.handler("bench");
  job_options o;
  o.metrics = h;
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    ex.submit(
        o, [] {}, [&done](job_result<std::monostate>&&) noexcept { done.hit(); });
    done.wait_for(++k);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Executor_RoundTrip)->Arg(1)->Arg(2)->UseRealTime();

void BM_Moodycamel_RoundTrip(benchmark::State& state) {
  moodycamel::BlockingConcurrentQueue<std::function<void()>> q;
  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  workers.reserve(static_cast<std::size_t>(state.range(0)));
  for (int w = 0; w < state.range(0); ++w) {
    workers.emplace_back([&] {
      std::function<void()> fn;
      while (!stop.load(std::memory_order_relaxed)) {
        if (q.wait_dequeue_timed(fn, 10ms)) fn();
      }
    });
  }
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    q.enqueue([&done] { done.hit(); });
    done.wait_for(++k);
  }
  stop = true;
  for (auto& t : workers) t.join();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Moodycamel_RoundTrip)->Arg(1)->Arg(2)->UseRealTime();

void BM_AsioPool_RoundTrip(benchmark::State& state) {
  boost::asio::thread_pool pool(static_cast<std::size_t>(state.range(0)));
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    boost::asio::post(pool, [&done] { done.hit(); });
    done.wait_for(++k);
  }
  pool.join();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AsioPool_RoundTrip)->Arg(1)->Arg(2)->UseRealTime();

// ---- batch: submit N empty jobs, wait for all (one worker) ----
void BM_Executor_SubmitBatch(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  executor ex({.workers = 1, .queue_capacity = static_cast<std::size_t>(n) + 16});
  job_options o;
  o.metrics = &ex.handler("bench");
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < n; ++i) {
      ex.submit(
          o, [] {}, [&done](job_result<std::monostate>&&) noexcept { done.hit(); });
    }
    done.wait_for(k += n);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_Executor_SubmitBatch)->Arg(16)->Arg(256)->Arg(4096)->UseRealTime();

// The same batch of jobs that take their context (as hourglass jobs do),
// without a deadline (Arg 0) and with one an hour away (Arg 1: none
// expires, but each context must be able to fire by itself at it). The
// goal: a deadline may cost at most 30 % more. BM_Executor_SubmitBatch/4096 is the
// floor: no context at all.
void BM_Executor_SubmitBatchWithContext(benchmark::State& state) {
  constexpr std::uint64_t n = 4096;
  const bool with_deadline = state.range(0) != 0;
  executor ex({.workers = 1, .queue_capacity = static_cast<std::size_t>(n) + 16});
  job_options o;
  o.metrics = &ex.handler("bench");
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    if (with_deadline) o.deadline = ex.get_clock().now() + 1h;
    for (std::uint64_t i = 0; i < n; ++i) {
      ex.submit(
          o, [](const context& ctx) { benchmark::DoNotOptimize(&ctx); },
          [&done](job_result<std::monostate>&&) noexcept { done.hit(); });
    }
    done.wait_for(k += n);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_Executor_SubmitBatchWithContext)->ArgName("deadline")->Arg(0)->Arg(1)->UseRealTime();

void BM_Moodycamel_SubmitBatch(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  moodycamel::BlockingConcurrentQueue<std::function<void()>> q;
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    std::function<void()> fn;
    while (!stop.load(std::memory_order_relaxed)) {
      if (q.wait_dequeue_timed(fn, 10ms)) fn();
    }
  });
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < n; ++i) q.enqueue([&done] { done.hit(); });
    done.wait_for(k += n);
  }
  stop = true;
  worker.join();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_Moodycamel_SubmitBatch)->Arg(16)->Arg(256)->Arg(4096)->UseRealTime();

void BM_AsioPool_SubmitBatch(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  boost::asio::thread_pool pool(1);
  done_flag done;
  std::uint64_t k = 0;
  for (auto _ : state) {
    for (std::uint64_t i = 0; i < n; ++i) boost::asio::post(pool, [&done] { done.hit(); });
    done.wait_for(k += n);
  }
  pool.join();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_AsioPool_SubmitBatch)->Arg(16)->Arg(256)->Arg(4096)->UseRealTime();

// ---- memory: what a job costs while it waits in the queue ----
// A paused executor takes `n` jobs, each capturing 16 bytes (a pointer and a
// counter, as small closures do); bytes_per_queued_job is what the submitting
// thread asked of operator new per job (records come from slabs, so it is an
// average over slabs). queue_bytes_per_slot is what building the executor
// asked for, over its capacity: the admission queue's storage is allocated
// up front (moodycamel blocks), whatever is queued.
void BM_Executor_QueuedJobBytes(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  double per_job = 0, per_slot = 0;
  for (auto _ : state) {
    const std::uint64_t before_build = bench::thread_allocated_bytes();
    executor ex({.workers = 1, .queue_capacity = n, .start_paused = true});
    per_slot = static_cast<double>(bench::thread_allocated_bytes() - before_build) / static_cast<double>(n);
    job_options o;
    o.metrics = &ex.handler("bench");
    std::uint64_t sink = 0;
    std::uint64_t* where = &sink;
    const std::uint64_t before = bench::thread_allocated_bytes();
    for (std::size_t i = 0; i < n; ++i) {
      ex.submit(
          o, [where, i] { *where += i; }, [](job_result<std::monostate>&&) noexcept {});
    }
    per_job = static_cast<double>(bench::thread_allocated_bytes() - before) / static_cast<double>(n);
    state.PauseTiming();
    ex.resume();
    ex.shutdown(ex.get_clock().now() + 1h);
    state.ResumeTiming();
  }
  state.counters["bytes_per_queued_job"] = per_job;
  state.counters["queue_bytes_per_slot"] = per_slot;
}
BENCHMARK(BM_Executor_QueuedJobBytes)->Arg(100'000)->Iterations(3)->Unit(benchmark::kMillisecond);

// ---- refusal at admission: no allocation (counted), no system call ----
void report_allocations(benchmark::State& state, std::uint64_t before) {
  state.counters["allocs/op"] = benchmark::Counter(static_cast<double>(bench::thread_allocations() - before) /
                                                   static_cast<double>(state.iterations()));
}

void BM_Executor_RejectQueueFull(benchmark::State& state) {
  manual_clock clk;
  executor ex({.manual_mode = true, .queue_capacity = 8, .clock = &clk});
  job_options o;
  o.metrics = &ex.handler("bench");
  for (int i = 0; i < 8; ++i)
    ex.submit(
        o, [] {}, [](job_result<std::monostate>&&) noexcept {});
  std::uint64_t refused = 0;
  const std::uint64_t before = bench::thread_allocations();
  for (auto _ : state) {
    ex.submit(
        o, [] {}, [&refused](job_result<std::monostate>&& r) noexcept { refused += !r.ok(); });
  }
  report_allocations(state, before);
  if (refused != static_cast<std::uint64_t>(state.iterations())) state.SkipWithError("a job was admitted");
  ex.run_pending();
}
BENCHMARK(BM_Executor_RejectQueueFull);

void BM_Executor_RejectInsufficientBudget(benchmark::State& state) {
  manual_clock clk;
  executor ex({.manual_mode = true, .clock = &clk});
  job_options o = job_options::within(clk, 1ms);
  o.metrics = &ex.handler("bench");
  o.min_budget = 2ms;
  std::uint64_t refused = 0;
  const std::uint64_t before = bench::thread_allocations();
  for (auto _ : state) {
    ex.submit(
        o, [] {}, [&refused](job_result<std::monostate>&& r) noexcept { refused += !r.ok(); });
  }
  report_allocations(state, before);
  if (refused != static_cast<std::uint64_t>(state.iterations())) state.SkipWithError("a job was admitted");
}
BENCHMARK(BM_Executor_RejectInsufficientBudget);

// The closest raw equivalent: a bounded moodycamel queue refusing try_enqueue.
void BM_Moodycamel_RejectFull(benchmark::State& state) {
  moodycamel::ConcurrentQueue<void*> q(32);
  moodycamel::ProducerToken tok(q);
  while (q.try_enqueue(tok, nullptr)) {
  }
  const std::uint64_t before = bench::thread_allocations();
  for (auto _ : state) benchmark::DoNotOptimize(q.try_enqueue(tok, nullptr));
  report_allocations(state, before);
}
BENCHMARK(BM_Moodycamel_RejectFull);

}  // namespace
