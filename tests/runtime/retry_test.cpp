#include "hourglass/retry.hpp"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "retry_policies.hpp"

// Its own namespace: a unity build puts it beside files with constants of the same names.
namespace hourglass::retry_tests {
namespace {

using namespace std::chrono_literals;

// A fixed, slot-aligned origin: plans are pure functions of it.
const time_point t0 = time_point{} + 1h;

using retry_testing::exact_policy;

// ---- Part 1: pure policy ---------------------------------------------------

TEST(RetryPolicy, TwelveSecondBudgetTenSecondCapFirstAttemptGetsTen) {
  retry_policy p = exact_policy();
  p.per_attempt_cap = 10s;
  const attempt_plan first = plan_first_attempt(p, t0, t0 + 12s);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.denial, retry_denial::none);
  EXPECT_EQ(first.start_at, t0);
  EXPECT_EQ(first.attempt_deadline, t0 + 10s);
}

TEST(RetryPolicy, TwelveSecondBudgetSecondAttemptGetsExactlyTwo) {
  retry_policy p = exact_policy();
  p.per_attempt_cap = 10s;
  const attempt_plan second = plan_retry(p, 1, status::error(), t0 + 10s, t0 + 12s, 0.5);
  ASSERT_TRUE(second.allowed);
  EXPECT_EQ(second.start_at, t0 + 10s);
  EXPECT_EQ(second.attempt_deadline, t0 + 12s);
  EXPECT_EQ(second.attempt_deadline - second.start_at, 2s);
}

TEST(RetryPolicy, TwelveSecondBudgetBackoffComesOutOfTheSecondAttempt) {
  retry_policy p;  // 25 ms initial backoff
  p.jitter = 0.0;
  p.per_attempt_cap = 10s;
  const attempt_plan second = plan_retry(p, 1, status::error(), t0 + 10s, t0 + 12s, 0.0);
  ASSERT_TRUE(second.allowed);
  EXPECT_EQ(second.start_at, t0 + 10s + 25ms);
  EXPECT_EQ(second.attempt_deadline, t0 + 12s);
}

TEST(RetryPolicy, TwelveSecondBudgetMinAttemptBudgetFourSecondsDeniesSecond) {
  retry_policy p = exact_policy();
  p.per_attempt_cap = 10s;
  p.min_attempt_budget = 4s;
  EXPECT_TRUE(plan_first_attempt(p, t0, t0 + 12s).allowed);
  const attempt_plan second = plan_retry(p, 1, status::error(), t0 + 10s, t0 + 12s, 0.5);
  EXPECT_FALSE(second.allowed);
  EXPECT_EQ(second.denial, retry_denial::deadline);
  // The plan that did not fit is still reported.
  EXPECT_EQ(second.start_at, t0 + 10s);
  EXPECT_EQ(second.attempt_deadline, t0 + 12s);
}

TEST(RetryPolicy, FifteenSecondExtractionReserveAndRetryGetThree) {
  // Admitted at t0 with 15 s; 5 s went to admission, queueing and retrieval.
  retry_policy p = exact_policy();
  p.reserve = 1s;
  const time_point deadline = t0 + 15s;
  const time_point now = t0 + 5s;
  EXPECT_EQ(remaining(deadline, now), 10s);

  const attempt_plan first = plan_first_attempt(p, now, deadline);
  ASSERT_TRUE(first.allowed);
  EXPECT_EQ(first.attempt_deadline, t0 + 14s);
  EXPECT_EQ(first.attempt_deadline - first.start_at, 9s);

  // The attempt fails 6 s in: the retry gets the 3 s left, not a fresh 9.
  const attempt_plan retry = plan_retry(p, 1, status::error(), now + 6s, deadline, 0.5);
  ASSERT_TRUE(retry.allowed);
  EXPECT_EQ(retry.start_at, t0 + 11s);
  EXPECT_EQ(retry.attempt_deadline - retry.start_at, 3s);
}

TEST(RetryPolicy, BackoffThatWouldOverrunIsDenied) {
  retry_policy p;  // 25 ms backoff
  p.jitter = 0.0;
  const time_point deadline = t0 + 1s;
  // The sleep alone ends past the deadline.
  const attempt_plan a = plan_retry(p, 1, status::error(), t0 + 990ms, deadline, 0.5);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.denial, retry_denial::deadline);
  EXPECT_EQ(a.start_at, t0 + 1015ms);
  // The sleep ends exactly at the deadline: the attempt would get nothing.
  EXPECT_EQ(plan_retry(p, 1, status::error(), t0 + 975ms, deadline, 0.5).denial, retry_denial::deadline);
  // The sleep fits but the minimum useful attempt after it does not.
  p.min_attempt_budget = 100ms;
  EXPECT_EQ(plan_retry(p, 1, status::error(), t0 + 900ms, deadline, 0.5).denial, retry_denial::deadline);
  // Exactly fits: start_at + min_attempt_budget == deadline.
  p.min_attempt_budget = 75ms;
  const attempt_plan fits = plan_retry(p, 1, status::error(), t0 + 900ms, deadline, 0.5);
  EXPECT_TRUE(fits.allowed);
  EXPECT_EQ(fits.start_at, t0 + 925ms);
  EXPECT_EQ(fits.attempt_deadline, deadline);
}

TEST(RetryPolicy, BackoffCountsAgainstTheReserveToo) {
  retry_policy p;
  p.jitter = 0.0;
  p.reserve = 500ms;
  // 25 ms of backoff from 480 ms reaches 505 ms, past deadline - reserve.
  EXPECT_EQ(plan_retry(p, 1, status::error(), t0 + 480ms, t0 + 1s, 0.5).denial, retry_denial::deadline);
  const attempt_plan ok = plan_retry(p, 1, status::error(), t0 + 470ms, t0 + 1s, 0.5);
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.attempt_deadline, t0 + 500ms);
}

TEST(RetryPolicy, FirstAttemptWithNoTimeLeftIsDenied) {
  retry_policy p = exact_policy();
  EXPECT_EQ(plan_first_attempt(p, t0, t0).denial, retry_denial::deadline);
  EXPECT_EQ(plan_first_attempt(p, t0 + 1s, t0).denial, retry_denial::deadline);
  p.reserve = 2s;
  EXPECT_EQ(plan_first_attempt(p, t0, t0 + 2s).denial, retry_denial::deadline);
  EXPECT_EQ(plan_first_attempt(p, t0, t0 + 1s).denial, retry_denial::deadline);
  const attempt_plan one_ns = plan_first_attempt(p, t0, t0 + 2s + 1ns);
  EXPECT_TRUE(one_ns.allowed);
  EXPECT_EQ(one_ns.attempt_deadline, t0 + 1ns);
  p.min_attempt_budget = 3s;
  p.reserve = 0s;
  EXPECT_EQ(plan_first_attempt(p, t0, t0 + 2s).denial, retry_denial::deadline);
  EXPECT_TRUE(plan_first_attempt(p, t0, t0 + 3s).allowed);
}

TEST(RetryPolicy, MaxAttemptsIncludesTheFirst) {
  retry_policy p = exact_policy();
  p.max_attempts = 3;
  EXPECT_TRUE(plan_first_attempt(p, t0, t0 + 1min).allowed);
  EXPECT_TRUE(plan_retry(p, 1, status::error(), t0, t0 + 1min, 0.5).allowed);
  EXPECT_TRUE(plan_retry(p, 2, status::error(), t0, t0 + 1min, 0.5).allowed);
  const attempt_plan third = plan_retry(p, 3, status::error(), t0, t0 + 1min, 0.5);
  EXPECT_FALSE(third.allowed);
  EXPECT_EQ(third.denial, retry_denial::max_attempts);
  EXPECT_EQ(third.start_at, t0);
  EXPECT_EQ(third.attempt_deadline, t0);

  p.max_attempts = 1;
  EXPECT_TRUE(plan_first_attempt(p, t0, t0 + 1min).allowed);
  EXPECT_EQ(plan_retry(p, 1, status::error(), t0, t0 + 1min, 0.5).denial, retry_denial::max_attempts);

  // An invalid policy is clamped, not trusted: no attempt at all.
  p.max_attempts = 0;
  EXPECT_EQ(plan_first_attempt(p, t0, t0 + 1min).denial, retry_denial::max_attempts);
}

TEST(RetryPolicy, OnlyErrorIsRetried) {
  const retry_policy p = exact_policy();
  const time_point d = t0 + 1min;
  EXPECT_TRUE(plan_retry(p, 1, status::error(), t0, d, 0.5).allowed);
  for (const status s : {status::ok(), status::expired(expiry_stage::run), status::expired(expiry_stage::downstream),
                         status::cancelled(cancel_cause::requested), status::cancelled(cancel_cause::parent),
                         status::rejected(reject_reason::queue_full), status::rejected(reject_reason::shutting_down)}) {
    const attempt_plan plan = plan_retry(p, 1, s, t0, d, 0.5);
    EXPECT_FALSE(plan.allowed) << to_string(s.code);
    EXPECT_EQ(plan.denial, retry_denial::not_retryable) << to_string(s.code);
  }
}

TEST(RetryPolicy, NotRetryableIsReportedBeforeMaxAttemptsAndDeadline) {
  retry_policy p = exact_policy();
  p.max_attempts = 1;
  // Past max_attempts and past the deadline: the status still decides first.
  EXPECT_EQ(plan_retry(p, 5, status::expired(expiry_stage::run), t0 + 1s, t0, 0.5).denial, retry_denial::not_retryable);
  // Past max_attempts and past the deadline, retryable: max_attempts.
  EXPECT_EQ(plan_retry(p, 5, status::error(), t0 + 1s, t0, 0.5).denial, retry_denial::max_attempts);
}

TEST(RetryPolicy, ExponentialGrowthCappedAtMaxBackoff) {
  retry_policy p;  // 25 ms * 2^n, capped at 1 s
  p.jitter = 0.0;
  const duration expected[] = {25ms, 50ms, 100ms, 200ms, 400ms, 800ms, 1s, 1s, 1s};
  for (int n = 1; n <= 9; ++n) EXPECT_EQ(retry_backoff(p, n, 0.5), expected[n - 1]) << n;
  EXPECT_EQ(retry_backoff(p, INT_MAX, 0.5), 1s);
  EXPECT_EQ(retry_backoff(p, 0, 0.5), 25ms);  // treated as the first retry

  // plan_retry uses the same schedule.
  p.max_attempts = 100;
  for (int n = 1; n <= 9; ++n) {
    const attempt_plan plan = plan_retry(p, n, status::error(), t0, t0 + 1min, 0.5);
    ASSERT_TRUE(plan.allowed);
    EXPECT_EQ(plan.start_at - t0, expected[n - 1]) << n;
  }

  p.backoff_multiplier = 1.5;
  p.initial_backoff = 100ms;
  EXPECT_EQ(retry_backoff(p, 3, 0.5), 225ms);
  p.max_backoff = 10ms;  // below the initial backoff: the cap wins
  EXPECT_EQ(retry_backoff(p, 1, 0.5), 10ms);
}

TEST(RetryPolicy, BackoffSaturatesInsteadOfOverflowing) {
  retry_policy p;
  p.jitter = 1.0;
  p.initial_backoff = duration::max() / 2;
  p.max_backoff = duration::max();
  p.max_attempts = 100;
  EXPECT_EQ(retry_backoff(p, 60, 0.999), duration::max());
  // A sleep that never ends is never started, even without a deadline.
  const attempt_plan plan = plan_retry(p, 60, status::error(), t0, never, 0.999);
  EXPECT_FALSE(plan.allowed);
  EXPECT_EQ(plan.denial, retry_denial::deadline);
  EXPECT_EQ(plan.start_at, never);
}

TEST(RetryPolicy, JitterStaysWithinBounds) {
  retry_policy p;
  p.jitter = 0.2;
  const duration b = 100ms;
  p.initial_backoff = b;
  EXPECT_EQ(retry_backoff(p, 1, 0.0), 80ms);
  EXPECT_EQ(retry_backoff(p, 1, 0.5), 100ms);
  EXPECT_EQ(retry_backoff(p, 1, 0.25), 90ms);
  // Rounded to the nearest nanosecond, so the top of the range is reachable.
  EXPECT_LE(retry_backoff(p, 1, std::nextafter(1.0, 0.0)), 120ms);
  EXPECT_GE(retry_backoff(p, 1, std::nextafter(1.0, 0.0)), 120ms - 1ns);
  for (int i = 0; i < 1000; ++i) {
    const double sample = i / 1000.0;
    const duration d = retry_backoff(p, 1, sample);
    EXPECT_GE(d, 80ms) << sample;
    EXPECT_LT(d, 120ms) << sample;
  }
  // Samples outside [0, 1) are clamped into [0, 1]; NaN counts as 0.
  EXPECT_EQ(retry_backoff(p, 1, -3.0), 80ms);
  EXPECT_EQ(retry_backoff(p, 1, 7.0), 120ms);
  EXPECT_EQ(retry_backoff(p, 1, std::numeric_limits<double>::quiet_NaN()), 80ms);

  // Jitter scales the capped backoff: at the cap it spreads around max_backoff.
  EXPECT_EQ(retry_backoff(p, 30, 0.0), 800ms);
  EXPECT_EQ(retry_backoff(p, 30, 1.0), 1200ms);

  // Full-width jitter spans [0, 2b).
  p.jitter = 1.0;
  EXPECT_EQ(retry_backoff(p, 1, 0.0), 0ms);
  EXPECT_EQ(retry_backoff(p, 1, 0.5), 100ms);
}

TEST(RetryPolicy, NeverDeadlineWorks) {
  retry_policy p;
  p.reserve = 1s;
  p.min_attempt_budget = 1h;
  const attempt_plan first = plan_first_attempt(p, t0, never);
  EXPECT_TRUE(first.allowed);
  EXPECT_EQ(first.attempt_deadline, never);  // no cap, no deadline: no bound

  const attempt_plan retry = plan_retry(p, 2, status::error(), t0, never, 0.5);
  EXPECT_TRUE(retry.allowed);
  EXPECT_EQ(retry.start_at, t0 + 50ms);
  EXPECT_EQ(retry.attempt_deadline, never);

  p.per_attempt_cap = 10s;
  p.min_attempt_budget = 0s;
  EXPECT_EQ(plan_first_attempt(p, t0, never).attempt_deadline, t0 + 10s);
  p.min_attempt_budget = duration::max();  // saturates to `never`, which still fits
  p.per_attempt_cap = duration::max();
  EXPECT_TRUE(plan_first_attempt(p, t0, never).allowed);
}

TEST(RetryPolicy, HugeCapAndReserveSaturate) {
  retry_policy p = exact_policy();
  p.per_attempt_cap = duration::max();
  EXPECT_EQ(plan_first_attempt(p, t0, t0 + 5s).attempt_deadline, t0 + 5s);
  p.reserve = duration::max();
  EXPECT_EQ(plan_first_attempt(p, t0, t0 + 5s).denial, retry_denial::deadline);
}

TEST(RetryPolicy, PlansArePure) {
  const retry_policy p;
  const attempt_plan a = plan_retry(p, 2, status::error(), t0, t0 + 3s, 0.3);
  const attempt_plan b = plan_retry(p, 2, status::error(), t0, t0 + 3s, 0.3);
  EXPECT_EQ(a.allowed, b.allowed);
  EXPECT_EQ(a.start_at, b.start_at);
  EXPECT_EQ(a.attempt_deadline, b.attempt_deadline);
}

TEST(RetryPolicy, ValidateRejectsPoliciesThatCannotMeanWhatTheySay) {
  EXPECT_NO_THROW(validate(retry_policy{}));
  auto bad = [](auto mutate) {
    retry_policy p;
    mutate(p);
    return p;
  };
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.max_attempts = 0; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.initial_backoff = -1ms; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.max_backoff = -1ms; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.reserve = -1ms; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.min_attempt_budget = -1ms; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.per_attempt_cap = 0s; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) {
                 p.per_attempt_cap = 1s;
                 p.min_attempt_budget = 2s;
               })),
               std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.backoff_multiplier = 0.5; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.backoff_multiplier = INFINITY; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.jitter = -0.1; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.jitter = 1.5; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](retry_policy& p) { p.jitter = NAN; })), std::invalid_argument);
}

TEST(RetryPolicy, DenialNamesMatchTheMetricLabels) {
  EXPECT_EQ(to_string(retry_denial::deadline), "deadline");
  EXPECT_EQ(to_string(retry_denial::retry_budget), "retry_budget");
  EXPECT_EQ(to_string(retry_denial::not_retryable), "not_retryable");
  EXPECT_EQ(to_string(retry_denial::max_attempts), "max_attempts");
  EXPECT_EQ(to_string(retry_denial::none), "none");
}

// ---- Part 2: retry budget --------------------------------------------------

int withdraw_all(retry_budget& b, time_point now, int limit = 100000) {
  int n = 0;
  while (n < limit && b.try_withdraw(now)) ++n;
  return n;
}

TEST(RetryBudget, RatioOfRequestsExactlyWithoutFloor) {
  retry_budget b({.ratio = 0.2, .min_retries_per_second = 0, .ttl = 10s});
  EXPECT_FALSE(b.try_withdraw(t0));
  for (int i = 0; i < 100; ++i) b.record_request(t0);
  EXPECT_DOUBLE_EQ(b.balance(t0), 20.0);
  EXPECT_EQ(withdraw_all(b, t0 + 1s), 20);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 1s), 0.0);
  b.record_request(t0 + 2s);  // 0.2 of a token: not enough for a retry
  EXPECT_FALSE(b.try_withdraw(t0 + 2s));
  for (int i = 0; i < 4; ++i) b.record_request(t0 + 2s);
  EXPECT_TRUE(b.try_withdraw(t0 + 2s));
  EXPECT_FALSE(b.try_withdraw(t0 + 2s));
}

TEST(RetryBudget, RatioPlusFloor) {
  retry_budget b({.ratio = 0.2, .min_retries_per_second = 10, .ttl = 10s});
  for (int i = 0; i < 100; ++i) b.record_request(t0);
  EXPECT_DOUBLE_EQ(b.balance(t0), 120.0);  // 20 from requests + 10/s * 10 s
  EXPECT_EQ(withdraw_all(b, t0), 120);
  EXPECT_FALSE(b.try_withdraw(t0));
}

TEST(RetryBudget, FloorAloneAllowsMinRetriesPerSecondTimesTtlPerWindow) {
  retry_budget b({.ratio = 0.2, .min_retries_per_second = 10, .ttl = 10s});
  EXPECT_DOUBLE_EQ(b.balance(t0), 100.0);
  // The floor is a reserve, not a per-second refill: all 100 may go at once.
  EXPECT_EQ(withdraw_all(b, t0), 100);
  EXPECT_EQ(withdraw_all(b, t0 + 9s), 0);
  // The withdrawals expire with the window, and the floor is whole again.
  EXPECT_EQ(withdraw_all(b, t0 + 10s), 100);

  retry_budget fractional({.ratio = 0, .min_retries_per_second = 0.25, .ttl = 10s});
  EXPECT_DOUBLE_EQ(fractional.balance(t0), 2.5);
  EXPECT_EQ(withdraw_all(fractional, t0), 2);
}

TEST(RetryBudget, ZeroRatioLeavesOnlyTheFloor) {
  retry_budget b({.ratio = 0, .min_retries_per_second = 1, .ttl = 10s});
  for (int i = 0; i < 1000; ++i) b.record_request(t0);
  EXPECT_EQ(withdraw_all(b, t0), 10);
}

TEST(RetryBudget, DepositsExpireAfterTtl) {
  retry_budget b({.ratio = 0.2, .min_retries_per_second = 0, .ttl = 10s});
  for (int i = 0; i < 100; ++i) b.record_request(t0);  // t0 starts a slot
  EXPECT_DOUBLE_EQ(b.balance(t0 + 10s - 1ns), 20.0);   // counted for the whole ttl
  EXPECT_DOUBLE_EQ(b.balance(t0 + 10s), 0.0);          // and no longer
  EXPECT_FALSE(b.try_withdraw(t0 + 10s));

  // Recorded late in its slot: counted for more than 0.9 ttl, at most ttl.
  retry_budget late({.ratio = 1, .min_retries_per_second = 0, .ttl = 10s});
  late.record_request(t0 + 999ms);
  EXPECT_DOUBLE_EQ(late.balance(t0 + 999ms + 9s), 1.0);
  EXPECT_DOUBLE_EQ(late.balance(t0 + 10s - 1ns), 1.0);
  EXPECT_DOUBLE_EQ(late.balance(t0 + 10s), 0.0);
}

TEST(RetryBudget, WithdrawalsOutlivingTheirDepositsAreDebt) {
  retry_budget b({.ratio = 0.2, .min_retries_per_second = 0, .ttl = 10s});
  for (int i = 0; i < 100; ++i) b.record_request(t0);
  EXPECT_EQ(withdraw_all(b, t0 + 5s), 20);
  EXPECT_DOUBLE_EQ(b.balance(t0 + 10s), -20.0);  // deposits gone, withdrawals not yet
  for (int i = 0; i < 100; ++i) b.record_request(t0 + 10s);
  EXPECT_FALSE(b.try_withdraw(t0 + 10s));       // new requests repay the debt first
  EXPECT_DOUBLE_EQ(b.balance(t0 + 15s), 20.0);  // the withdrawals expired too
}

TEST(RetryBudget, EntriesOlderThanTheWindowAreDropped) {
  retry_budget b({.ratio = 1, .min_retries_per_second = 0, .ttl = 10s});
  b.record_request(t0 + 20s);
  b.record_request(t0);  // a late reading from another thread, long expired
  EXPECT_DOUBLE_EQ(b.balance(t0 + 20s), 1.0);
  b.record_request(t0 + 15s);  // late but inside the window: kept
  EXPECT_DOUBLE_EQ(b.balance(t0 + 20s), 2.0);
}

TEST(RetryBudget, SlidingWindowGuaranteeHoldsAtEveryRetry) {
  // Steady traffic, 10 requests/s for 60 s, a retry wanted every 20 ms.
  // At each granted retry, the retries in its window must be at most
  // floor + ratio * requests in the same window.
  const double ratio = 0.1, floor_per_s = 0.5;
  const duration ttl = 4s, slot = ttl / 10;
  retry_budget b({.ratio = ratio, .min_retries_per_second = floor_per_s, .ttl = ttl});
  std::vector<time_point> requests, retries;
  int granted = 0;
  for (duration t = 0ms; t < 60s; t += 20ms) {
    const time_point now = t0 + t;
    if (t % 100ms == 0ms) {
      b.record_request(now);
      requests.push_back(now);
    }
    if (!b.try_withdraw(now)) continue;
    retries.push_back(now);
    ++granted;
    const time_point window_start = t0 + ((now - t0) / slot - 9) * slot;
    auto in_window = [&](const std::vector<time_point>& v) {
      long n = 0;
      for (time_point x : v) n += (x >= window_start && x <= now);
      return n;
    };
    ASSERT_LE(static_cast<double>(in_window(retries)),
              floor_per_s * to_seconds(ttl) + ratio * static_cast<double>(in_window(requests)) + 1e-9)
        << to_seconds(t);
  }
  // And the budget is actually used: 1 retry/s from requests + 0.5/s floor.
  EXPECT_GE(granted, 80);
  EXPECT_LE(granted, 92);
}

TEST(RetryBudget, ConcurrentUseKeepsTheBooksExact) {
  retry_budget b({.ratio = 0.2, .min_retries_per_second = 0, .ttl = 10s});
  constexpr int threads = 8, per_thread = 2000;
  std::atomic<int> granted{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      for (int j = 0; j < per_thread; ++j) {
        b.record_request(t0);
        if (b.try_withdraw(t0)) granted.fetch_add(1, std::memory_order_relaxed);
        (void)b.balance(t0);
      }
    });
  }
  for (auto& t : pool) t.join();
  const int total_requests = threads * per_thread;
  EXPECT_LE(granted.load(), total_requests / 5);
  EXPECT_GE(granted.load(), total_requests / 5 - threads);
  EXPECT_NEAR(b.balance(t0), 0.2 * total_requests - granted.load(), 1e-6);
}

TEST(RetryBudget, OptionsAreValidated) {
  using o = retry_budget::options;
  EXPECT_NO_THROW(retry_budget(o{}));
  EXPECT_THROW(retry_budget(o{.ratio = -0.1}), std::invalid_argument);
  EXPECT_THROW(retry_budget(o{.ratio = NAN}), std::invalid_argument);
  EXPECT_THROW(retry_budget(o{.ratio = 2000}), std::invalid_argument);
  EXPECT_THROW(retry_budget(o{.min_retries_per_second = -1}), std::invalid_argument);
  EXPECT_THROW(retry_budget(o{.min_retries_per_second = INFINITY}), std::invalid_argument);
  EXPECT_THROW(retry_budget(o{.ttl = 0s}), std::invalid_argument);
  EXPECT_THROW(retry_budget(o{.ttl = 9ns}), std::invalid_argument);
  EXPECT_NO_THROW(retry_budget(o{.ttl = 10ns}));
}

TEST(RetryBudget, TinyTtlAndExtremeTimesDoNotOverflow) {
  retry_budget b({.ratio = 1, .min_retries_per_second = 0, .ttl = 10ns});
  b.record_request(time_point::min());
  EXPECT_DOUBLE_EQ(b.balance(time_point::min()), 1.0);
  b.record_request(never);
  EXPECT_DOUBLE_EQ(b.balance(never), 1.0);
  EXPECT_TRUE(b.try_withdraw(never));
}

// ---- Part 3: counters ------------------------------------------------------

TEST(RetryCounters, StartAtZero) {
  retry_counters c;
  EXPECT_EQ(c.attempts.load(), 0u);
  EXPECT_EQ(c.denied_deadline.load(), 0u);
  EXPECT_EQ(c.denied_retry_budget.load(), 0u);
}

}  // namespace
}  // namespace hourglass::retry_tests
