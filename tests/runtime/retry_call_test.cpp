// retry_call over a context (retry.hpp, part 4): each attempt in a child
// context, backoff sleeps on the context's clock, the budget and counters
// consulted. The pure policy, the budget and the counters are in
// retry_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/retry.hpp"
#include "retry_policies.hpp"

// Its own namespace: a unity build puts it beside files with helpers of the same names.
namespace hourglass::retry_call_tests {
namespace {

using namespace std::chrono_literals;
using retry_testing::exact_policy;

// What each attempt saw: when it started and until when it could run.
struct seen {
  time_point start;
  time_point deadline;
};

const std::function<double()> mid_jitter = [] { return 0.5; };

TEST(RetryCall, TwelveSecondBudgetTenSecondCapHangingDependency) {
  manual_clock clk;
  const time_point start = clk.now();
  context_source root(clk, start + 12s);
  retry_policy p = exact_policy();
  p.per_attempt_cap = 10s;
  retry_counters counters;
  std::vector<seen> attempts;
  // The dependency hangs: each attempt uses all of its time, then reports
  // what its context says.
  const status result = retry_call(
      root, p,
      [&](const context& c) {
        attempts.push_back({clk.now(), c.deadline()});
        clk.set(c.deadline());
        EXPECT_TRUE(c.done());
        return c.stop_status();
      },
      nullptr, &counters, mid_jitter);

  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].deadline - attempts[0].start, 10s);
  EXPECT_EQ(attempts[1].start, start + 10s);
  EXPECT_EQ(attempts[1].deadline - attempts[1].start, 2s);
  EXPECT_EQ(result, status::expired(expiry_stage::run));
  EXPECT_EQ(clk.now(), start + 12s);  // exactly the caller's budget, no more
  EXPECT_EQ(counters.attempts.load(), 1u);
  EXPECT_EQ(counters.denied_deadline.load(), 0u);  // the budget ran out; nothing was denied
}

TEST(RetryCall, TwelveSecondBudgetMinAttemptBudgetStopsAfterTheFirst) {
  manual_clock clk;
  const time_point start = clk.now();
  context_source root(clk, start + 12s);
  retry_policy p = exact_policy();
  p.per_attempt_cap = 10s;
  p.min_attempt_budget = 4s;
  retry_counters counters;
  int calls = 0;
  const status result = retry_call(
      root, p,
      [&](const context& c) {
        ++calls;
        clk.set(c.deadline());
        return c.stop_status();
      },
      nullptr, &counters, mid_jitter);
  EXPECT_EQ(calls, 1);
  // The attempt's own timeout is what happened; 2 s remain for the fallback.
  EXPECT_EQ(result, status::expired(expiry_stage::run));
  EXPECT_FALSE(root.get().done());
  EXPECT_EQ(root.get().remaining(), 2s);
  EXPECT_EQ(counters.denied_deadline.load(), 1u);
  EXPECT_EQ(counters.attempts.load(), 0u);
}

TEST(RetryCall, FifteenSecondExtractionRetryGetsThreeSeconds) {
  manual_clock clk;
  const time_point admitted = clk.now();
  context_source request(clk, admitted + 15s);
  clk.advance(5s);  // admission, queueing and retrieval
  retry_policy p = exact_policy();
  p.reserve = 1s;
  retry_counters counters;
  std::vector<duration> budgets;
  const status result = retry_call(
      request, p,
      [&](const context& c) {
        budgets.push_back(c.remaining());
        if (budgets.size() == 1) {
          clk.advance(6s);  // fails 6 s in
          return status::error();
        }
        return status::ok();
      },
      nullptr, &counters, mid_jitter);
  EXPECT_EQ(result, status::ok());
  ASSERT_EQ(budgets.size(), 2u);
  EXPECT_EQ(budgets[0], 9s);
  EXPECT_EQ(budgets[1], 3s);
  EXPECT_EQ(counters.attempts.load(), 1u);
  EXPECT_EQ(request.get().remaining(), 4s);  // 3 unused + the 1 s reserve
}

TEST(RetryCall, SuccessAtFirstTryRecordsOneRequest) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1s);
  retry_budget budget({.ratio = 0.5, .min_retries_per_second = 0, .ttl = 10s});
  retry_counters counters;
  int calls = 0;
  EXPECT_EQ(retry_call(
                root, retry_policy{}, [&](const context&) { return ++calls, status::ok(); }, &budget, &counters),
            status::ok());
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(budget.balance(clk.now()), 0.5);
  EXPECT_EQ(counters.attempts.load(), 0u);
}

TEST(RetryCall, MaxAttemptsThenTheLastErrorIsReturned) {
  manual_clock clk;
  context_source root(clk, never);
  retry_counters counters;
  int calls = 0;
  EXPECT_EQ(retry_call(
                root, exact_policy(), [&](const context&) { return ++calls, status::error(); }, nullptr, &counters,
                mid_jitter),
            status::error());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(counters.attempts.load(), 2u);
  EXPECT_EQ(counters.denied_deadline.load(), 0u);
  EXPECT_EQ(counters.denied_retry_budget.load(), 0u);
}

TEST(RetryCall, NonRetryableStatusesEndTheLoopAsTheyAre) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  for (const status s : {status::rejected(reject_reason::queue_full), status::expired(expiry_stage::downstream),
                         status::cancelled(cancel_cause::caller_gone)}) {
    int calls = 0;
    EXPECT_EQ(retry_call(
                  root, exact_policy(), [&](const context&) { return ++calls, s; }, nullptr, nullptr, mid_jitter),
              s);
    EXPECT_EQ(calls, 1) << to_string(s.code);
  }
}

TEST(RetryCall, RetryBudgetRefusalIsCountedAndEndsTheLoop) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  retry_budget budget({.ratio = 0, .min_retries_per_second = 0, .ttl = 10s});
  retry_counters counters;
  int calls = 0;
  EXPECT_EQ(retry_call(
                root, exact_policy(), [&](const context&) { return ++calls, status::error(); }, &budget, &counters,
                mid_jitter),
            status::error());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(counters.denied_retry_budget.load(), 1u);
  EXPECT_EQ(counters.attempts.load(), 0u);
}

TEST(RetryCall, DeadlineIsCheckedBeforeTheBudgetSoNoTokenIsSpent) {
  manual_clock clk;
  context_source root(clk, clk.now() + 10s);
  retry_policy p = exact_policy();
  p.min_attempt_budget = 5s;
  retry_budget budget({.ratio = 0, .min_retries_per_second = 0.1, .ttl = 10s});  // one token
  retry_counters counters;
  EXPECT_EQ(retry_call(
                root, p,
                [&](const context&) {
                  clk.advance(6s);
                  return status::error();
                },
                &budget, &counters, mid_jitter),
            status::error());
  EXPECT_EQ(counters.denied_deadline.load(), 1u);
  EXPECT_EQ(counters.denied_retry_budget.load(), 0u);
  EXPECT_DOUBLE_EQ(budget.balance(clk.now()), 1.0);
}

TEST(RetryCall, BudgetSharedAcrossCallsLimitsRetries) {
  manual_clock clk;
  context_source root(clk, never);
  retry_budget budget({.ratio = 0.5, .min_retries_per_second = 0, .ttl = 10s});
  retry_counters counters;
  for (int i = 0; i < 10; ++i) {
    retry_call(
        root, exact_policy(), [](const context&) { return status::error(); }, &budget, &counters, mid_jitter);
  }
  // 10 requests fund 5 retries; every call wants 2.
  EXPECT_EQ(counters.attempts.load(), 5u);
  EXPECT_GE(counters.denied_retry_budget.load(), 5u);
}

TEST(RetryCall, BackoffSleepsOnTheInjectedClockWithTheInjectedJitter) {
  manual_clock clk;
  const time_point start = clk.now();
  context_source root(clk, never);
  retry_policy p;
  p.initial_backoff = 100ms;
  p.jitter = 0.2;
  retry_counters counters;
  std::vector<time_point> starts;
  std::thread driver([&] {
    EXPECT_TRUE(clk.wait_for_timers(1));  // retry_call is asleep in its backoff
    EXPECT_EQ(counters.attempts.load(), 0u);
    clk.advance(80ms);  // 100 ms * (1 - 0.2) with a sample of 0
  });
  const status result = retry_call(
      root, p,
      [&](const context&) {
        starts.push_back(clk.now());
        return starts.size() == 1 ? status::error() : status::ok();
      },
      nullptr, &counters, [] { return 0.0; });
  driver.join();
  EXPECT_EQ(result, status::ok());
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0], start);
  EXPECT_EQ(starts[1], start + 80ms);
  EXPECT_EQ(counters.attempts.load(), 1u);
  EXPECT_EQ(clk.pending_timers(), 0u);
}

TEST(RetryCall, CancelDuringBackoffWakesTheSleepAndStops) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  retry_policy p;
  p.initial_backoff = 1s;
  retry_counters counters;
  int calls = 0;
  std::thread canceller([&] {
    EXPECT_TRUE(clk.wait_for_timers(2));  // the root's deadline timer and the backoff sleep
    root.cancel(cancel_cause::caller_gone);
  });
  const status result = retry_call(
      root, p, [&](const context&) { return ++calls, status::error(); }, nullptr, &counters, mid_jitter);
  canceller.join();
  EXPECT_EQ(result, status::cancelled(cancel_cause::caller_gone));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(counters.attempts.load(), 0u);
  EXPECT_EQ(clk.pending_timers(), 1u);  // only the root's deadline timer is left
}

TEST(RetryCall, CancelDuringAnAttemptReachesItAndStopsTheLoop) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  int calls = 0;
  const status result = retry_call(
      root, exact_policy(),
      [&](const context& c) {
        ++calls;
        root.cancel(cancel_cause::requested);
        EXPECT_TRUE(c.done());
        return status::error();  // even a retryable failure is not retried now
      },
      nullptr, nullptr, mid_jitter);
  EXPECT_EQ(result, status::cancelled(cancel_cause::requested));
  EXPECT_EQ(calls, 1);
}

TEST(RetryCall, AnAlreadyStoppedContextMakesNoAttempt) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  root.cancel(cancel_cause::shutdown);
  retry_budget budget({.ratio = 1, .min_retries_per_second = 0, .ttl = 10s});
  int calls = 0;
  EXPECT_EQ(retry_call(
                root, exact_policy(), [&](const context&) { return ++calls, status::ok(); }, &budget),
            status::cancelled(cancel_cause::shutdown));
  EXPECT_EQ(calls, 0);
  EXPECT_DOUBLE_EQ(budget.balance(clk.now()), 0.0);  // no request was made
}

TEST(RetryCall, FirstAttemptThatDoesNotFitIsNotStarted) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1s);
  retry_policy p = exact_policy();
  p.min_attempt_budget = 2s;
  p.per_attempt_cap = 10s;
  int calls = 0;
  EXPECT_EQ(retry_call(root, p, [&](const context&) { return ++calls, status::ok(); }),
            status::expired(expiry_stage::run));
  EXPECT_EQ(calls, 0);
}

TEST(RetryCall, ParentExpiryDuringAnAttemptDeniesTheRetryForDeadline) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  retry_counters counters;
  int calls = 0;
  EXPECT_EQ(retry_call(
                root, exact_policy(),
                [&](const context&) {
                  ++calls;
                  root.expire(expiry_stage::queue);  // an executor noticed expiry early
                  return status::error();
                },
                nullptr, &counters, mid_jitter),
            status::error());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(counters.denied_deadline.load(), 1u);
}

TEST(RetryCall, AttemptContextIsStoppedWhenTheAttemptReturns) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1min);
  std::optional<context> leaked;
  retry_call(
      root, exact_policy(),
      [&](const context& c) {
        leaked = c;  // stray work that outlives the attempt
        EXPECT_FALSE(c.done());
        return status::ok();
      },
      nullptr, nullptr, mid_jitter);
  ASSERT_TRUE(leaked.has_value());
  EXPECT_TRUE(leaked->done());
  EXPECT_EQ(leaked->stop_status(), status::cancelled(cancel_cause::requested));
  EXPECT_FALSE(root.get().done());
}

TEST(RetryCall, InvalidPolicyThrows) {
  manual_clock clk;
  retry_policy p;
  p.max_attempts = 0;
  EXPECT_THROW(retry_call(context::background(clk), p, [](const context&) { return status::ok(); }),
               std::invalid_argument);
}

TEST(RetryCall, ConcurrentCallsShareBudgetAndCounters) {
  manual_clock clk;
  context_source root(clk, never);
  retry_budget budget({.ratio = 0.25, .min_retries_per_second = 0, .ttl = 10s});
  retry_counters counters;
  constexpr int threads = 8, calls = 200;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int j = 0; j < calls; ++j) {
        retry_call(
            root, exact_policy(), [](const context&) { return status::error(); }, &budget, &counters);
      }
    });
  }
  for (auto& t : pool) t.join();
  // Each call records one request and stops at its first budget refusal.
  const auto retries = counters.attempts.load();
  EXPECT_LE(retries, static_cast<std::uint64_t>(threads * calls / 4));
  EXPECT_LE(counters.denied_retry_budget.load(), static_cast<std::uint64_t>(threads * calls));
  EXPECT_NEAR(budget.balance(clk.now()), 0.25 * threads * calls - static_cast<double>(retries), 1e-6);
}

TEST(RetryCall, RealClockSmoke) {
  // The one test on real time: it asserts nothing about durations.
  context_source root = context_source::with_timeout(real_clock(), 10s);
  retry_policy p;
  p.initial_backoff = 1ms;
  int calls = 0;
  EXPECT_EQ(retry_call(root, p, [&](const context&) { return ++calls < 2 ? status::error() : status::ok(); }),
            status::ok());
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace hourglass::retry_call_tests
