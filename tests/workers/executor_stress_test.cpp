// Real threads, real clock: P producers x C workers x 1 M jobs with random
// budgets, cancels and a drain in the middle. Every job gets exactly one
// outcome, nothing runs twice, the books balance and the queue ends empty;
// a third of the jobs may run on their producer's thread (run_here_when_idle).
// Runs under TSan and ASan+UBSan through tools/check.
#include "hourglass/executor.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

TEST(ExecutorStress, EveryJobExactlyOneOutcomeThroughADrain) {
  constexpr int kProducers = 3;
  constexpr int kJobsPerProducer = 1'000'000 / kProducers + 1;
  constexpr int kTotal = kProducers * kJobsPerProducer;

  executor_options o;
  o.workers = 2;
  o.queue_capacity = 512;
  executor ex(o);

  std::vector<std::atomic<std::uint8_t>> outcomes(kTotal);
  std::vector<std::atomic<std::uint8_t>> runs(kTotal);
  std::atomic<int> submitted{0};
  std::atomic<int> ok{0}, errors{0}, rejected{0}, expired{0}, cancelled{0};
  std::atomic<bool> drain_started{false};

  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(p) * 7919 + 1);
      std::vector<job_ref> to_cancel;
      bool last_full = false;
      for (int k = 0; k < kJobsPerProducer; ++k) {
        const int id = p * kJobsPerProducer + k;
        last_full = false;
        const auto dice = rng() % 100;
        job_options jo;
        if (dice < 80) jo = job_options::within(ex.get_clock(), std::chrono::microseconds(rng() % 3000));
        if (dice % 7 == 0) jo.min_budget = std::chrono::microseconds(rng() % 500);
        jo.run_here_when_idle = dice % 3 == 0;  // some run on this thread when a worker idles
        const bool spins = dice % 13 == 0;
        const bool fails = dice % 17 == 0;
        job_ref ref = ex.submit(
            jo,
            [&, id, spins, fails](const context& ctx) {
              runs[static_cast<std::size_t>(id)].fetch_add(1);
              if (spins) {
                for (int i = 0; i < 200; ++i) ctx.check();
              }
              if (fails) throw std::runtime_error("handler error");
              return id;
            },
            [&, id, &full = last_full](job_result<int>&& r) noexcept {
              // queue_full is only ever delivered inline, on this producer's thread.
              if (r.st == status::rejected(reject_reason::queue_full)) full = true;
              outcomes[static_cast<std::size_t>(id)].fetch_add(1);
              switch (r.st.code) {
                case outcome::ok:
                  ok++;
                  EXPECT_EQ(r.value(), id);
                  break;
                case outcome::error: errors++; break;
                case outcome::rejected: rejected++; break;
                case outcome::deadline_exceeded: expired++; break;
                case outcome::cancelled: cancelled++; break;
                case outcome::invalid: ADD_FAILURE() << "the executor never judges input"; break;
              }
            });
        submitted++;
        if (last_full) std::this_thread::yield();  // back off a little so most jobs get in
        if (dice < 5) to_cancel.push_back(std::move(ref));
        if (to_cancel.size() >= 16) {
          for (auto& c : to_cancel) c.cancel();
          to_cancel.clear();
        }
      }
      for (auto& c : to_cancel) c.cancel();
    });
  }
  std::thread drainer([&] {
    while (submitted.load() < kTotal / 2) std::this_thread::yield();
    drain_started = true;
    ex.shutdown(ex.get_clock().now() + 5ms);
  });
  for (auto& t : producers) t.join();
  drainer.join();

  ASSERT_TRUE(drain_started.load());
  std::printf("ok %d error %d rejected %d expired %d cancelled %d\n", ok.load(), errors.load(), rejected.load(),
              expired.load(), cancelled.load());
  int total_outcomes = 0;
  for (int i = 0; i < kTotal; ++i) {
    ASSERT_EQ(outcomes[static_cast<std::size_t>(i)].load(), 1) << "job " << i;
    ASSERT_LE(runs[static_cast<std::size_t>(i)].load(), 1) << "job " << i;
    total_outcomes++;
  }
  EXPECT_EQ(total_outcomes, kTotal);
  EXPECT_EQ(ok + errors + rejected + expired + cancelled, kTotal);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(rejected.load(), 0);  // at least the shutting_down ones

  const auto snap = ex.stats().snapshot();
  const auto* h = snap.find("default");
  ASSERT_NE(h, nullptr);
  const std::uint64_t refused = h->rejected_queue_full + h->rejected_shutting_down + h->rejected_insufficient_budget;
  EXPECT_EQ(h->admitted + refused, static_cast<std::uint64_t>(kTotal)) << "admitted + rejected = submitted";
  EXPECT_EQ(h->finished_ok, static_cast<std::uint64_t>(ok.load()));
  EXPECT_EQ(h->finished_error, static_cast<std::uint64_t>(errors.load()));
  EXPECT_EQ(h->finished_cancelled, static_cast<std::uint64_t>(cancelled.load()));
  EXPECT_EQ(ex.queue().depth(), 0u);
  EXPECT_EQ(ex.busy(), 0u);
}

}  // namespace
}  // namespace hourglass
