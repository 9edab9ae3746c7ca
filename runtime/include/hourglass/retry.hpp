// Retries inside the caller's budget.
//
// A retry spends from the same deadline as the attempt it repeats: it never
// gets a fresh timeout. Four pieces:
//
//  - retry_policy + plan_first_attempt / plan_retry: pure policy with an
//    explicit `now` (no clock, no threads). Each call answers "may the next
//    attempt start, when, and until when may it run?".
//  - retry_budget: a token bucket shared per dependency (Finagle RetryBudget,
//    Envoy retry budgets, tower TpsBudget) so that retries stay a bounded
//    fraction of traffic when a dependency is failing for everyone.
//  - retry_counters: what a metrics registry reads.
//  - retry_call: the loop that puts them together over a context: each
//    attempt in a child context, backoff sleeps on the context's clock.
//
// Denial order in plan_retry (the first that applies is reported):
//  1. not_retryable: the last status is not `error`. `ok` needs no retry;
//     `deadline_exceeded` and `cancelled` are terminal (status::terminal());
//     `rejected` is overload, which may be retried elsewhere or later by the
//     caller, but not against this dependency from inside this budget.
//  2. max_attempts: attempts_done >= max_attempts.
//  3. deadline: the backoff plus the minimum useful attempt does not fit.
// retry_budget denials come from the caller of plan_retry (retry_call checks
// the deadline first, then withdraws from the budget, so a retry that could
// not run anyway never spends a token).
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <utility>

#include "hourglass/context.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// Durations in the policy are not rounded: plans are exact to the nanosecond.
struct retry_policy {
  int max_attempts = 3;  // including the first
  duration initial_backoff = std::chrono::milliseconds(25);
  duration max_backoff = std::chrono::seconds(1);
  double backoff_multiplier = 2.0;
  // Proportional jitter (gRPC connection-backoff style): the capped backoff b
  // is scaled by a factor uniform in [1 - jitter, 1 + jitter), so the sleep
  // lies in [b(1 - jitter), b(1 + jitter)] (closed: the product is rounded to
  // the nearest nanosecond). The cap applies to b before
  // jitter, so one sleep may exceed max_backoff by up to the jitter fraction.
  double jitter = 0.2;
  duration per_attempt_cap = duration::max();      // an attempt's own timeout
  duration reserve = duration::zero();             // kept back for the caller's finishing work
  duration min_attempt_budget = duration::zero();  // an attempt that would get less is not started
};

// Throws std::invalid_argument for a policy that cannot mean what it says:
// max_attempts < 1, a negative duration, per_attempt_cap <= 0,
// min_attempt_budget > per_attempt_cap (no attempt could ever get it),
// backoff_multiplier < 1 or not finite, jitter outside [0, 1].
// The noexcept planners below never throw; given such a policy they clamp
// (negatives to zero, jitter into [0, 1], multiplier to at least 1).
void validate(const retry_policy& policy);

enum class retry_denial : std::uint8_t { none, max_attempts, not_retryable, deadline, retry_budget };

// "none", "max_attempts", "not_retryable", "deadline", "retry_budget"
// (the last two are the `reason` label of hourglass_retries_denied_total).
constexpr std::string_view to_string(retry_denial d) noexcept {
  switch (d) {
    case retry_denial::none: return "none";
    case retry_denial::max_attempts: return "max_attempts";
    case retry_denial::not_retryable: return "not_retryable";
    case retry_denial::deadline: return "deadline";
    case retry_denial::retry_budget: return "retry_budget";
  }
  return "unknown";
}

// When `allowed`: sleep until start_at, then run the attempt with
// attempt_deadline as its own deadline. attempt_deadline =
// min(deadline - reserve, start_at + per_attempt_cap) and is always later
// than start_at. When denied for `deadline`, start_at and attempt_deadline
// show the plan that did not fit; for other denials both equal `now`.
struct attempt_plan {
  bool allowed = false;
  retry_denial denial = retry_denial::none;
  time_point start_at{};          // now + backoff (now for a first attempt)
  time_point attempt_deadline{};  // min(deadline - reserve, start_at + per_attempt_cap)
};

// The backoff before retry number `attempts_done` (1 = the first retry):
// b = min(max_backoff, initial_backoff * multiplier^(attempts_done - 1)),
// then scaled by 1 - jitter + 2 * jitter * jitter_sample. jitter_sample is
// expected in [0, 1) and clamped into [0, 1] (NaN counts as 0). Rounded to
// the nearest nanosecond; saturates at duration::max().
duration retry_backoff(const retry_policy& policy, int attempts_done, double jitter_sample) noexcept;

// The deadline rule, for every attempt including the first: with
// limit = deadline - reserve (`never` stays `never`), the attempt is denied
// `deadline` unless start_at < limit and start_at + min_attempt_budget <= limit.
// So an attempt that would get no time, or less than min_attempt_budget, is
// not started, and neither is a backoff sleep that would itself overrun.
attempt_plan plan_first_attempt(const retry_policy& policy, time_point now, time_point deadline) noexcept;

// attempts_done >= 1 (values below are treated as 1); `last` is the previous
// attempt's status; jitter_sample in [0, 1) is supplied by the caller so that
// the plan is a pure function of its arguments.
attempt_plan plan_retry(const retry_policy& policy, int attempts_done, const status& last, time_point now,
                        time_point deadline, double jitter_sample) noexcept;

// A retry budget shared by every caller of one dependency: over a sliding
// window of `ttl`, retries may be at most `ratio` of requests plus a floor of
// `min_retries_per_second * ttl`. Modelled on Finagle's RetryBudget:
//  - each record_request() deposits `ratio` tokens; each successful
//    try_withdraw() takes 1 token;
//  - deposits and withdrawals both expire after the window; a constant
//    reserve of min_retries_per_second * ttl tokens is always added. The floor
//    is not refilled per second: up to that many retries may go at once, and
//    they become available again as the withdrawals expire.
//
// Window: time is cut into 10 slots of ttl/10 (a ring, bounded memory). An
// entry recorded at t counts until its slot leaves the window: for at most
// ttl and for more than 0.9 * ttl (up to whole-nanosecond rounding of ttl/10).
//
// Guarantee (exact, in units of 1e-6 token): a try_withdraw() succeeds only if
// afterwards, counting entries still in the window,
//     withdrawals <= floor + ratio * requests.
// So in the window ending at any successful retry, retries <= floor + ratio *
// requests. balance() may go negative when deposits expire before the
// withdrawals they paid for: that debt is repaid by new requests or expiry.
//
// Time: `now` is explicit. Readings from different threads may arrive
// slightly out of order; an entry older than the whole window is dropped as
// already expired.
//
// Thread safety: every member may be called concurrently (one mutex).
class retry_budget {
 public:
  struct options {
    double ratio = 0.2;                       // retries per request, in [0, 1000]
    double min_retries_per_second = 10;       // >= 0
    duration ttl = std::chrono::seconds(10);  // >= 10 ns
  };

  // Throws std::invalid_argument for options outside the ranges above.
  explicit retry_budget(options opts);

  void record_request(time_point now) noexcept;
  // True: a retry may go (one token was taken). False: no token was taken.
  bool try_withdraw(time_point now) noexcept;
  // Retries that may go at `now` (tokens / 1); fractional; may be negative.
  double balance(time_point now) const;

  const options& config() const noexcept { return opts_; }

 private:
  static constexpr int slots = 10;
  static constexpr std::int64_t unit = 1'000'000;  // fixed point: units per token
  struct slot {
    std::int64_t index = std::numeric_limits<std::int64_t>::min();  // which ttl/10 period of time this slot holds
    std::int64_t net = 0;                                           // deposits - withdrawals, in units
  };

  std::int64_t slot_index(time_point now) const noexcept;
  void add_locked(std::int64_t index, std::int64_t units) noexcept;
  std::int64_t sum_locked(std::int64_t index) const noexcept;

  options opts_;
  std::int64_t deposit_ = 0;  // units per request
  std::int64_t reserve_ = 0;  // units, the floor
  std::int64_t width_ = 1;    // slot width in nanoseconds
  mutable std::mutex mu_;
  std::array<slot, slots> ring_{};
};

// Read by the metrics registry (hourglass_retry_attempts_total,
// hourglass_retries_denied_total{reason}). `attempts` counts retries only,
// i.e. attempts after the first. Relaxed increments; readers want totals.
struct retry_counters {
  std::atomic<uint64_t> attempts{0}, denied_deadline{0}, denied_retry_budget{0};
};

namespace detail {
// A uniform sample in [0, 1) from a per-thread generator seeded once from
// std::random_device: the default jitter source of retry_call.
double random_jitter_sample() noexcept;

inline void bump(std::atomic<uint64_t> retry_counters::*which, retry_counters* c) noexcept {
  if (c != nullptr) (c->*which).fetch_add(1, std::memory_order_relaxed);
}
}  // namespace detail

// Calls `attempt` until it succeeds or the policy, the context or the retry
// budget says stop, all inside ctx's deadline.
//
//  - `attempt(const context&) -> status` runs in a child of ctx whose deadline
//    is the plan's attempt_deadline (so ctx.deadline() - reserve at the
//    latest). When it returns, that child is cancelled (cause `requested`), so
//    stray work it started sees its context stop.
//  - Backoff sleeps use ctx.sleep_until: they run on ctx's clock and end at
//    once if ctx stops.
//  - An attempt that ran into its own deadline (its child expired while ctx
//    had not) is a per-attempt timeout and counts as `error`, retryable, as
//    Envoy's per_try_timeout and gRPC's per-attempt timeout are. Any other
//    deadline_exceeded, cancelled or rejected status is not retried.
//  - Before each retry: plan_retry first (a `deadline` denial is counted in
//    denied_deadline), then one token from `budget` (a refusal is counted in
//    denied_retry_budget). A granted retry is counted in `attempts` when it
//    starts, after its backoff. If ctx has stopped by expiry, the retry is
//    denied for `deadline`; if it was cancelled, the loop just ends.
//  - budget->record_request() is called once per call, when the first
//    attempt starts.
//  - `jitter` returns samples in [0, 1) for plan_retry; empty: a per-thread
//    random generator. Tests pass a fixed one.
//
// Returns:
//  - the last attempt's status when the loop stops after an attempt (ok, a
//    non-retryable status, or the error whose retry was denied);
//  - ctx.stop_status() when ctx was already done before the first attempt,
//    was cancelled by the end of an attempt, or stopped during a backoff sleep;
//  - deadline_exceeded/run, without calling `attempt`, when even the first
//    attempt does not fit (less than min_attempt_budget before
//    deadline - reserve).
//
// Throws std::invalid_argument for an invalid policy (see validate()), and
// whatever `attempt` or `jitter` throws.
//
// Thread safety: as safe as `attempt`; budget and counters may be shared by
// any number of concurrent calls.
template <class F>
requires std::invocable<F&, const context&> && std::convertible_to<std::invoke_result_t<F&, const context&>, status>
    status retry_call(const context& ctx, const retry_policy& policy, F&& attempt, retry_budget* budget = nullptr,
                      retry_counters* counters = nullptr, std::function<double()> jitter = {}) {
  validate(policy);
  if (ctx.done()) return ctx.stop_status();
  clock& clk = ctx.get_clock();

  attempt_plan plan = plan_first_attempt(policy, clk.now(), ctx.deadline());
  if (!plan.allowed) return status::expired(expiry_stage::run);
  if (budget != nullptr) budget->record_request(clk.now());

  for (int attempts_done = 0;;) {
    if (attempts_done > 0) detail::bump(&retry_counters::attempts, counters);
    status last;
    bool attempt_timed_out = false;
    {
      context_source attempt_src = ctx.child_until(plan.attempt_deadline);
      last = static_cast<status>(attempt(attempt_src.get()));
      const status child = attempt_src.get().stop_status();
      attempt_timed_out = child.code == outcome::deadline_exceeded && !ctx.done();
      attempt_src.cancel(cancel_cause::requested);
    }
    ++attempts_done;
    if (last.is_ok()) return last;

    const status stopped = ctx.stop_status();
    if (stopped.code == outcome::cancelled) return stopped;

    const time_point now = clk.now();
    // A context expired early (context_source::expire) has no time left either.
    const time_point deadline = stopped.is_ok() ? ctx.deadline() : earliest(ctx.deadline(), now);
    const status judged = attempt_timed_out && last.code == outcome::deadline_exceeded ? status::error() : last;
    const double sample = jitter ? jitter() : detail::random_jitter_sample();
    plan = plan_retry(policy, attempts_done, judged, now, deadline, sample);
    if (!plan.allowed) {
      if (plan.denial == retry_denial::deadline) detail::bump(&retry_counters::denied_deadline, counters);
      return last;
    }
    if (budget != nullptr && !budget->try_withdraw(now)) {
      detail::bump(&retry_counters::denied_retry_budget, counters);
      return last;
    }
    if (!ctx.sleep_until(plan.start_at)) return ctx.stop_status();
  }
}

}  // namespace hourglass
