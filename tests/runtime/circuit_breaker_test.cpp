#include "hourglass/circuit_breaker.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hourglass/clock.hpp"
#include "hourglass/outcome.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// A fixed origin aligned on the 1 s buckets of a 10 s window.
const time_point t0 = time_point{} + 1h;

constexpr int never_reached = 1'000'000;

// Only consecutive failures open it: the ratio is never judged.
breaker_policy consecutive_only(int n) {
  breaker_policy p;
  p.consecutive_failures = n;
  p.min_calls_in_window = never_reached;
  return p;
}

// Only the failure ratio opens it: 0.5 of at least 20 calls in 10 s.
breaker_policy ratio_only() {
  breaker_policy p;
  p.consecutive_failures = never_reached;
  return p;
}

void call(breaker_core& b, call_verdict v, time_point now) {
  const admission a = b.admit(now);
  ASSERT_TRUE(a.allowed);
  ASSERT_FALSE(a.is_probe);
  b.record(a, v, now);
}
void fail(breaker_core& b, time_point now, int n = 1) {
  for (int i = 0; i < n; ++i) call(b, call_verdict::failure, now);
}
void succeed(breaker_core& b, time_point now, int n = 1) {
  for (int i = 0; i < n; ++i) call(b, call_verdict::success, now);
}

// ---- Part 1: the pure state machine ----------------------------------------

TEST(CircuitBreakerCore, DefaultsMatchTheSpec) {
  const breaker_policy p;
  EXPECT_EQ(p.consecutive_failures, 5);
  EXPECT_EQ(p.open_for, 5s);
  EXPECT_NO_THROW(validate(p));
}

TEST(CircuitBreakerCore, NMinusOneFailuresKeepItClosedTheNthOpens) {
  breaker_core b(consecutive_only(5));
  for (int i = 0; i < 4; ++i) fail(b, t0 + i * 1ms);
  EXPECT_EQ(b.state(t0 + 4ms), breaker_state::closed);
  fail(b, t0 + 4ms);
  EXPECT_EQ(b.state(t0 + 4ms), breaker_state::open);
  EXPECT_EQ(b.open_until(), t0 + 4ms + 5s);
  EXPECT_FALSE(b.admit(t0 + 4ms).allowed);
}

TEST(CircuitBreakerCore, SuccessBetweenFailuresResetsTheCount) {
  breaker_core b(consecutive_only(5));
  fail(b, t0, 4);
  succeed(b, t0);
  fail(b, t0, 4);
  EXPECT_EQ(b.state(t0), breaker_state::closed);
  fail(b, t0);
  EXPECT_EQ(b.state(t0), breaker_state::open);
}

TEST(CircuitBreakerCore, IgnoredVerdictsNeitherCountNorReset) {
  breaker_core b(consecutive_only(5));
  fail(b, t0, 4);
  for (int i = 0; i < 10; ++i) call(b, call_verdict::ignored, t0);
  EXPECT_EQ(b.counts(t0).successes, 0);
  EXPECT_EQ(b.counts(t0).failures, 4);
  EXPECT_EQ(b.state(t0), breaker_state::closed);
  fail(b, t0);
  EXPECT_EQ(b.state(t0), breaker_state::open);
}

TEST(CircuitBreakerCore, OneFailureOpensWhenConsecutiveFailuresIsOne) {
  breaker_core b(consecutive_only(1));
  fail(b, t0);
  EXPECT_EQ(b.state(t0), breaker_state::open);
}

TEST(CircuitBreakerCore, RatioTripsOnlyWithEnoughCallsInTheWindow) {
  {  // 19 failures out of 19 calls: too few calls to judge.
    breaker_core b(ratio_only());
    fail(b, t0, 19);
    EXPECT_EQ(b.state(t0), breaker_state::closed);
    fail(b, t0);
    EXPECT_EQ(b.state(t0), breaker_state::open);
  }
  {  // Exactly the ratio opens it; just below does not.
    breaker_core b(ratio_only());
    succeed(b, t0, 11);
    fail(b, t0, 9);  // 9 / 20
    EXPECT_EQ(b.state(t0), breaker_state::closed);
    fail(b, t0);  // 10 / 21
    EXPECT_EQ(b.state(t0), breaker_state::closed);
    fail(b, t0);  // 11 / 22
    EXPECT_EQ(b.state(t0), breaker_state::open);
  }
  {  // The ratio is judged after a success too: it brings the window up to 20 calls.
    breaker_core b(ratio_only());
    fail(b, t0, 10);
    succeed(b, t0, 9);
    EXPECT_EQ(b.state(t0), breaker_state::closed);
    succeed(b, t0);  // 10 / 20
    EXPECT_EQ(b.state(t0), breaker_state::open);
  }
  {  // 3 / 30 is exactly 0.1, although 0.1 * 30 > 3 in doubles.
    breaker_policy p = ratio_only();
    p.failure_ratio = 0.1;
    p.min_calls_in_window = 30;
    breaker_core b(p);
    succeed(b, t0, 27);
    fail(b, t0, 2);
    EXPECT_EQ(b.state(t0), breaker_state::closed);
    fail(b, t0);
    EXPECT_EQ(b.state(t0), breaker_state::open);
  }
}

TEST(CircuitBreakerCore, OldBucketsAgeOutExactlyAtTheWindowBoundary) {
  for (const time_point late : {t0 + 10s - 1ns, t0 + 10s}) {
    breaker_core b(ratio_only());
    fail(b, t0, 10);
    const bool aged_out = late == t0 + 10s;
    EXPECT_EQ(b.counts(late).failures, aged_out ? 0 : 10);
    succeed(b, late, 9);
    fail(b, late);  // 11 / 20 with the old failures, 1 / 10 without
    EXPECT_EQ(b.state(late), aged_out ? breaker_state::closed : breaker_state::open);
  }
  // A bucket ages out as a whole: the last nanosecond of bucket 0 goes at
  // t0 + 10 s too, 9 s + 1 ns after it was recorded.
  breaker_core b(ratio_only());
  fail(b, t0 + 1s - 1ns, 3);
  fail(b, t0 + 1s, 2);
  EXPECT_EQ(b.counts(t0 + 10s - 1ns).failures, 5);
  EXPECT_EQ(b.counts(t0 + 10s).failures, 2);
  EXPECT_EQ(b.counts(t0 + 11s).failures, 0);
}

TEST(CircuitBreakerCore, VerdictOlderThanTheWindowIsDropped) {
  breaker_core b(ratio_only());
  fail(b, t0 + 20s);
  // A reading from another thread, late by more than the whole window, landing
  // on a ring slot that holds a later period.
  const admission a = b.admit(t0 + 20s);
  b.record(a, call_verdict::failure, t0 + 10s);
  EXPECT_EQ(b.counts(t0 + 20s).failures, 1);
}

TEST(CircuitBreakerCore, OpenRefusesUntilExactlyOpenedAtPlusOpenFor) {
  breaker_core b(consecutive_only(1));
  const time_point opened = t0 + 123ms;
  fail(b, opened);
  EXPECT_FALSE(b.admit(opened).allowed);
  EXPECT_FALSE(b.admit(opened + 5s - 1ns).allowed);
  EXPECT_EQ(b.state(opened + 5s - 1ns), breaker_state::open);
  // Reading the state does not move it on; the period is over at exactly +5 s.
  EXPECT_EQ(b.state(opened + 5s), breaker_state::half_open);
  EXPECT_EQ(b.state(opened + 5s - 1ns), breaker_state::open);
  const admission probe = b.admit(opened + 5s);
  EXPECT_TRUE(probe.allowed);
  EXPECT_TRUE(probe.is_probe);
}

TEST(CircuitBreakerCore, HalfOpenAdmitsExactlyOneProbeAtATime) {
  breaker_core b(consecutive_only(1));
  fail(b, t0);
  const admission probe = b.admit(t0 + 5s);
  ASSERT_TRUE(probe.is_probe);
  for (const time_point later : {t0 + 5s, t0 + 6s, t0 + 1h}) {
    const admission other = b.admit(later);
    EXPECT_FALSE(other.allowed);
    EXPECT_FALSE(other.is_probe);
    EXPECT_EQ(b.state(later), breaker_state::half_open);
  }
}

TEST(CircuitBreakerCore, ProbeSuccessClosesWithAFreshWindow) {
  breaker_core b(consecutive_only(5));
  fail(b, t0, 5);
  const admission probe = b.admit(t0 + 5s);
  b.record(probe, call_verdict::success, t0 + 6s);
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::closed);
  EXPECT_EQ(b.counts(t0 + 6s).failures, 0);
  EXPECT_EQ(b.counts(t0 + 6s).successes, 0);
  // The count starts again from zero: it takes five more failures.
  fail(b, t0 + 6s, 4);
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::closed);
  fail(b, t0 + 6s);
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::open);
  EXPECT_EQ(b.open_until(), t0 + 11s);
}

TEST(CircuitBreakerCore, ProbeFailureReopensForAFullPeriodFromTheFailure) {
  breaker_core b(consecutive_only(1));
  fail(b, t0);
  const admission probe = b.admit(t0 + 5s);
  b.record(probe, call_verdict::failure, t0 + 7s);  // the probe took 2 s to fail
  EXPECT_EQ(b.state(t0 + 7s), breaker_state::open);
  EXPECT_EQ(b.open_until(), t0 + 12s);
  EXPECT_FALSE(b.admit(t0 + 12s - 1ns).allowed);
  const admission next = b.admit(t0 + 12s);
  EXPECT_TRUE(next.allowed);
  EXPECT_TRUE(next.is_probe);
}

TEST(CircuitBreakerCore, IgnoredProbeFreesTheSlot) {
  breaker_core b(consecutive_only(1));
  fail(b, t0);
  const admission first = b.admit(t0 + 5s);
  b.record(first, call_verdict::ignored, t0 + 6s);
  // Neither reopened (a caller is admitted at once) nor closed (as a probe).
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::half_open);
  const admission second = b.admit(t0 + 6s);
  EXPECT_TRUE(second.allowed);
  EXPECT_TRUE(second.is_probe);
  EXPECT_FALSE(b.admit(t0 + 6s).allowed);
}

TEST(CircuitBreakerCore, LateVerdictsFromBeforeTheOpeningChangeNothing) {
  breaker_core b(consecutive_only(5));
  std::vector<admission> early;
  for (int i = 0; i < 10; ++i) early.push_back(b.admit(t0));
  fail(b, t0, 5);
  ASSERT_EQ(b.state(t0), breaker_state::open);

  // While open: successes do not close it.
  for (const admission& a : early) b.record(a, call_verdict::success, t0 + 1s);
  EXPECT_EQ(b.state(t0 + 1s), breaker_state::open);
  EXPECT_FALSE(b.admit(t0 + 1s).allowed);

  // While half-open with the probe out: successes neither close it nor free the slot.
  const admission probe = b.admit(t0 + 5s);
  ASSERT_TRUE(probe.is_probe);
  for (const admission& a : early) b.record(a, call_verdict::success, t0 + 5s);
  EXPECT_EQ(b.state(t0 + 5s), breaker_state::half_open);
  EXPECT_FALSE(b.admit(t0 + 5s).allowed);

  // After the probe closed it: failures do not count in the new window.
  b.record(probe, call_verdict::success, t0 + 6s);
  for (const admission& a : early) b.record(a, call_verdict::failure, t0 + 6s);
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::closed);
  EXPECT_EQ(b.counts(t0 + 6s).failures, 0);
}

TEST(CircuitBreakerCore, RepeatedProbeVerdictIsDropped) {
  breaker_core b(consecutive_only(1));
  fail(b, t0);
  const admission first = b.admit(t0 + 5s);
  b.record(first, call_verdict::ignored, t0 + 5s);
  const admission second = b.admit(t0 + 5s);
  ASSERT_TRUE(second.is_probe);
  b.record(first, call_verdict::failure, t0 + 5s);  // cannot speak for the second probe
  EXPECT_EQ(b.state(t0 + 5s), breaker_state::half_open);
  EXPECT_FALSE(b.admit(t0 + 5s).allowed);
  b.record(second, call_verdict::success, t0 + 6s);
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::closed);
  b.record(second, call_verdict::failure, t0 + 6s);
  EXPECT_EQ(b.state(t0 + 6s), breaker_state::closed);
}

TEST(CircuitBreakerCore, RefusedAdmissionRecordsNothing) {
  breaker_core b(consecutive_only(1));
  fail(b, t0);
  const admission refused = b.admit(t0 + 1s);
  ASSERT_FALSE(refused.allowed);
  b.record(refused, call_verdict::success, t0 + 5s);
  const admission probe = b.admit(t0 + 5s);
  EXPECT_TRUE(probe.is_probe);
  b.record(refused, call_verdict::success, t0 + 5s);
  EXPECT_EQ(b.state(t0 + 5s), breaker_state::half_open);
}

TEST(CircuitBreakerCore, ValidateRejectsPoliciesThatCannotMeanWhatTheySay) {
  auto bad = [](auto mutate) {
    breaker_policy p;
    mutate(p);
    return p;
  };
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.consecutive_failures = 0; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.failure_ratio = 0.0; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.failure_ratio = -0.5; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.failure_ratio = 1.01; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.failure_ratio = NAN; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.min_calls_in_window = 0; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.window = 0s; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.window = -1s; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.window = 9ns; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.open_for = 0s; })), std::invalid_argument);
  EXPECT_THROW(validate(bad([](breaker_policy& p) { p.open_for = -1ms; })), std::invalid_argument);
  EXPECT_THROW(breaker_core(bad([](breaker_policy& p) { p.open_for = 0s; })), std::invalid_argument);
  // The edges that do mean something.
  EXPECT_NO_THROW(validate(bad([](breaker_policy& p) {
    p.consecutive_failures = 1;
    p.failure_ratio = 1.0;
    p.min_calls_in_window = 1;
    p.window = 10ns;
    p.open_for = 1ns;
  })));
}

TEST(CircuitBreakerCore, VerdictOfAStatus) {
  EXPECT_EQ(verdict_of(status::ok(), true), call_verdict::success);
  EXPECT_EQ(verdict_of(status::error(), true), call_verdict::failure);
  EXPECT_EQ(verdict_of(status::rejected(reject_reason::queue_full), true), call_verdict::failure);
  EXPECT_EQ(verdict_of(status::rejected(reject_reason::circuit_open), true), call_verdict::ignored);
  EXPECT_EQ(verdict_of(status::expired(expiry_stage::downstream), true), call_verdict::failure);
  EXPECT_EQ(verdict_of(status::expired(expiry_stage::downstream), false), call_verdict::ignored);
  EXPECT_EQ(verdict_of(status::cancelled(cancel_cause::caller_gone), true), call_verdict::ignored);
  EXPECT_EQ(verdict_of(status::invalid(), true), call_verdict::ignored);
}

TEST(CircuitBreakerCore, StateNamesAndGaugeValues) {
  EXPECT_EQ(to_string(breaker_state::closed), "closed");
  EXPECT_EQ(to_string(breaker_state::half_open), "half_open");
  EXPECT_EQ(to_string(breaker_state::open), "open");
  EXPECT_EQ(static_cast<int>(breaker_state::closed), 0);
  EXPECT_EQ(static_cast<int>(breaker_state::half_open), 1);
  EXPECT_EQ(static_cast<int>(breaker_state::open), 2);
}

TEST(CircuitBreakerCore, CircuitOpenRejection) {
  const status st = status::rejected(reject_reason::circuit_open);
  EXPECT_EQ(to_string(reject_reason::circuit_open), "circuit_open");
  EXPECT_EQ(describe(st), "rejected/circuit_open");
  EXPECT_FALSE(st.retryable());  // retry_call does not retry it, nor spend a token on it
  EXPECT_FALSE(st.terminal());
}

// ---- Part 2: the thread-safe breaker ---------------------------------------

TEST(CircuitBreaker, CountsRejectionsAndReportsStateOnAManualClock) {
  manual_clock clk(t0);
  circuit_breaker br(clk, consecutive_only(2));
  EXPECT_EQ(br.state(), breaker_state::closed);
  for (int i = 0; i < 2; ++i) {
    circuit_breaker::ticket t = br.admit();
    ASSERT_TRUE(t);
    EXPECT_FALSE(t.is_probe());
    t.record(call_verdict::failure);
  }
  EXPECT_EQ(br.state(), breaker_state::open);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(br.admit());
  EXPECT_EQ(br.rejected_total(), 3u);

  clk.advance(5s - 1ns);
  EXPECT_EQ(br.state(), breaker_state::open);
  EXPECT_FALSE(br.admit());
  clk.advance(1ns);
  EXPECT_EQ(br.state(), breaker_state::half_open);
  circuit_breaker::ticket probe = br.admit();
  ASSERT_TRUE(probe);
  EXPECT_TRUE(probe.is_probe());
  EXPECT_FALSE(br.admit());
  EXPECT_EQ(br.rejected_total(), 5u);

  probe.record(call_verdict::success);
  EXPECT_EQ(br.state(), breaker_state::closed);
  EXPECT_TRUE(br.admit());
  EXPECT_EQ(br.rejected_total(), 5u);
}

TEST(CircuitBreaker, AbandonedProbeTicketFreesTheSlot) {
  manual_clock clk(t0);
  circuit_breaker br(clk, consecutive_only(1));
  br.admit().record(call_verdict::failure);
  clk.advance(5s);
  {
    circuit_breaker::ticket probe = br.admit();
    ASSERT_TRUE(probe.is_probe());
    circuit_breaker::ticket moved = std::move(probe);
    EXPECT_FALSE(probe.allowed());  // NOLINT(bugprone-use-after-move): moved-from reads refused
    EXPECT_TRUE(moved.is_probe());
    EXPECT_FALSE(br.admit());
  }  // `moved` reports `ignored`
  EXPECT_EQ(br.state(), breaker_state::half_open);
  circuit_breaker::ticket next = br.admit();
  EXPECT_TRUE(next.is_probe());
}

TEST(CircuitBreaker, TicketReportsOnce) {
  manual_clock clk(t0);
  circuit_breaker br(clk, consecutive_only(2));
  circuit_breaker::ticket t = br.admit();
  t.record(call_verdict::failure);
  t.record(call_verdict::failure);
  EXPECT_EQ(br.state(), breaker_state::closed);
  circuit_breaker::ticket u = br.admit();
  u = br.admit();  // the replaced ticket reports `ignored`, not a failure
  EXPECT_EQ(br.state(), breaker_state::closed);
  u.record(call_verdict::failure);
  EXPECT_EQ(br.state(), breaker_state::open);
}

TEST(CircuitBreaker, InvalidPolicyThrows) {
  manual_clock clk(t0);
  breaker_policy p;
  p.consecutive_failures = 0;
  EXPECT_THROW(circuit_breaker(clk, p), std::invalid_argument);
}

TEST(CircuitBreaker, ConcurrentCallersGetOneProbe) {
  manual_clock clk(t0);
  circuit_breaker br(clk, consecutive_only(1));
  br.admit().record(call_verdict::failure);
  clk.advance(5s);
  constexpr int threads = 4, calls = 1000;
  std::vector<std::vector<circuit_breaker::ticket>> held(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      for (int j = 0; j < calls; ++j) {
        circuit_breaker::ticket t = br.admit();
        if (t) held[i].push_back(std::move(t));  // kept out until every thread is done
      }
    });
  }
  for (auto& t : pool) t.join();
  std::size_t probes = 0;
  for (const auto& h : held) probes += h.size();
  EXPECT_EQ(probes, 1u);
  EXPECT_EQ(br.rejected_total(), static_cast<std::uint64_t>(threads * calls - 1));
}

}  // namespace
}  // namespace hourglass
