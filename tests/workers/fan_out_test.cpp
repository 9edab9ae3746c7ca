#include "hourglass/fan_out.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

executor_options two_workers(manual_clock& clk) {
  executor_options o;
  o.clock = &clk;
  o.workers = 2;
  return o;
}

TEST(FanOut, AllOfFirstFailureCancelsSiblings) {
  manual_clock clk;
  executor ex(two_workers(clk));
  context_source parent = context_source::with_timeout(clk, 10s);
  std::vector<branch_fn<int>> branches;
  for (int i = 0; i < 2; ++i) {
    branches.emplace_back([](const context& ctx) {
      ctx.sleep_for(1h);  // until a sibling's failure stops it
      ctx.check();
      return 1;
    });
  }
  branches.emplace_back([&](const context&) -> int {
    EXPECT_TRUE(clk.wait_for_timers(3));  // both siblings are asleep: parent deadline + 2 sleeps
    throw std::runtime_error("branch 2 failed");
  });
  fan_out_options opts;
  opts.max_concurrency = 3;
  auto results = all_of<int>(ex, parent, branches, opts);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].st, status::cancelled(cancel_cause::sibling));
  EXPECT_EQ(results[1].st, status::cancelled(cancel_cause::sibling));
  EXPECT_EQ(results[2].st, status::error());
  EXPECT_FALSE(parent.get().done()) << "a failed fan-out leaves the caller's context alive";
}

TEST(FanOut, AllOfCollectsEveryResultInOrder) {
  manual_clock clk;
  executor ex(two_workers(clk));
  context_source parent(clk);
  std::vector<branch_fn<int>> branches;
  for (int i = 0; i < 10; ++i) branches.emplace_back([i](const context&) { return i * i; });
  auto results = all_of<int>(ex, parent, branches, {.max_concurrency = 2});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(results[static_cast<std::size_t>(i)].ok());
    EXPECT_EQ(results[static_cast<std::size_t>(i)].value(), i * i);
  }
}

TEST(FanOut, FirstOfWinnerCancelsLosers) {
  manual_clock clk;
  executor ex(two_workers(clk));
  context_source parent = context_source::with_timeout(clk, 10s);
  std::atomic<int> losers_stopped{0};
  std::vector<branch_fn<std::string>> branches;
  for (int i = 0; i < 2; ++i) {
    branches.emplace_back([&](const context& ctx) -> std::string {
      if (!ctx.sleep_for(1h)) losers_stopped++;
      ctx.check();
      return "slow";
    });
  }
  branches.emplace_back([&](const context&) -> std::string {
    EXPECT_TRUE(clk.wait_for_timers(3));
    return "fast";
  });
  auto r = first_of<std::string>(ex, parent, branches, {.max_concurrency = 3});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), "fast");
  EXPECT_EQ(losers_stopped.load(), 2);
}

TEST(FanOut, ConcurrencyIsBounded) {
  manual_clock clk;
  executor ex(two_workers(clk));
  context_source parent(clk);
  std::atomic<int> running{0}, peak{0}, ran{0};
  std::vector<branch_fn<void>> branches;
  for (int i = 0; i < 12; ++i) {
    branches.emplace_back([&](const context&) {
      const int now = ++running;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      for (int k = 0; k < 2000; ++k) std::this_thread::yield();
      --running;
      ++ran;
    });
  }
  auto results = all_of<void>(ex, parent, branches, {.max_concurrency = 2});
  EXPECT_EQ(ran.load(), 12);
  EXPECT_LE(peak.load(), 2);
  for (auto& r : results) EXPECT_TRUE(r.ok());
}

// Parallel branches do not create time: all of them end at the caller's deadline.
TEST(FanOut, BranchesShareTheCallersDeadline) {
  manual_clock clk;
  executor ex(two_workers(clk));
  const time_point t0 = clk.now();
  context_source parent(clk, t0 + 100ms);
  std::vector<branch_fn<int>> branches;
  for (int i = 0; i < 3; ++i) {
    branches.emplace_back([](const context& ctx) {
      ctx.sleep_for(1h);
      ctx.check();
      return 0;
    });
  }
  std::vector<job_result<int>> results;
  std::thread caller([&] { results = all_of<int>(ex, parent, branches, {.max_concurrency = 3}); });
  ASSERT_TRUE(clk.wait_for_timers(4));  // the deadline and three sleeping branches
  clk.advance(100ms);
  caller.join();
  for (auto& r : results) EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_EQ(clk.now(), t0 + 100ms);
}

TEST(FanOut, BranchCapAndReserve) {
  manual_clock clk;
  executor ex(two_workers(clk));
  context_source parent = context_source::with_timeout(clk, 300ms);
  std::vector<branch_fn<duration>> branches{[](const context& ctx) { return ctx.remaining(); }};
  auto r = all_of<duration>(ex, parent, branches, {.limits = {.cap = 220ms}});
  EXPECT_EQ(r[0].value(), 220ms);
  auto r2 = all_of<duration>(ex, parent, branches, {.limits = {.reserve = 50ms}});
  EXPECT_EQ(r2[0].value(), 250ms);
}

}  // namespace
}  // namespace hourglass
