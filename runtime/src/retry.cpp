#include "hourglass/retry.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <thread>

namespace hourglass {

namespace {

constexpr duration non_negative(duration d) noexcept { return d < duration::zero() ? duration::zero() : d; }

// Clamps into [0, 1]; NaN counts as 0.
double unit_interval(double x) noexcept {
  if (!(x >= 0.0)) return 0.0;
  return x > 1.0 ? 1.0 : x;
}

// The end of the time an attempt may use: the deadline minus the reserve.
time_point usable_limit(const retry_policy& p, time_point deadline) noexcept {
  if (deadline == never) return never;
  return saturating_sub(deadline, non_negative(p.reserve));
}

attempt_plan denied_now(retry_denial why, time_point now) noexcept { return {false, why, now, now}; }

// The deadline rule shared by first attempts and retries.
attempt_plan plan_at(const retry_policy& p, time_point start_at, time_point deadline) noexcept {
  const time_point limit = usable_limit(p, deadline);
  attempt_plan plan{true, retry_denial::none, start_at,
                    earliest(limit, saturating_add(start_at, non_negative(p.per_attempt_cap)))};
  const bool fits = start_at < limit && saturating_add(start_at, non_negative(p.min_attempt_budget)) <= limit &&
                    plan.attempt_deadline > start_at;
  if (!fits) {
    plan.allowed = false;
    plan.denial = retry_denial::deadline;
  }
  return plan;
}

}  // namespace

void validate(const retry_policy& p) {
  if (p.max_attempts < 1) throw std::invalid_argument("retry_policy: max_attempts must be at least 1");
  if (p.initial_backoff < duration::zero() || p.max_backoff < duration::zero() || p.reserve < duration::zero() ||
      p.min_attempt_budget < duration::zero())
    throw std::invalid_argument("retry_policy: durations must not be negative");
  if (p.per_attempt_cap <= duration::zero())
    throw std::invalid_argument("retry_policy: per_attempt_cap must be positive");
  if (p.min_attempt_budget > p.per_attempt_cap)
    throw std::invalid_argument("retry_policy: min_attempt_budget exceeds per_attempt_cap; no attempt could start");
  if (!std::isfinite(p.backoff_multiplier) || p.backoff_multiplier < 1.0)
    throw std::invalid_argument("retry_policy: backoff_multiplier must be finite and at least 1");
  if (!(p.jitter >= 0.0 && p.jitter <= 1.0)) throw std::invalid_argument("retry_policy: jitter must be in [0, 1]");
}

duration retry_backoff(const retry_policy& p, int attempts_done, double jitter_sample) noexcept {
  const int retry_number = std::max(attempts_done, 1);
  const double initial = static_cast<double>(non_negative(p.initial_backoff).count());
  const double cap = static_cast<double>(non_negative(p.max_backoff).count());
  const double multiplier = std::isfinite(p.backoff_multiplier) ? std::max(p.backoff_multiplier, 1.0) : 1.0;

  // pow may overflow to +inf; min() then yields the cap. 0 * inf would be NaN.
  double base = initial == 0.0 ? 0.0 : initial * std::pow(multiplier, retry_number - 1);
  base = std::min(base, cap);

  const double j = unit_interval(p.jitter);
  const double factor = 1.0 - j + 2.0 * j * unit_interval(jitter_sample);
  const double ns = base * factor;
  // 2^63 is exactly representable; anything at or above it saturates.
  if (!(ns < 9223372036854775808.0)) return duration::max();
  return duration(std::llround(ns));
}

attempt_plan plan_first_attempt(const retry_policy& p, time_point now, time_point deadline) noexcept {
  if (p.max_attempts < 1) return denied_now(retry_denial::max_attempts, now);
  return plan_at(p, now, deadline);
}

attempt_plan plan_retry(const retry_policy& p, int attempts_done, const status& last, time_point now,
                        time_point deadline, double jitter_sample) noexcept {
  if (!last.retryable()) return denied_now(retry_denial::not_retryable, now);
  const int done = std::max(attempts_done, 1);
  if (done >= p.max_attempts) return denied_now(retry_denial::max_attempts, now);
  return plan_at(p, saturating_add(now, retry_backoff(p, done, jitter_sample)), deadline);
}

namespace {
std::uint64_t jitter_seed() noexcept {
  try {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  } catch (...) {
    // No entropy source: any per-thread value will do, jitter only spreads load.
    return std::hash<std::thread::id>{}(std::this_thread::get_id()) ^
           static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}
}  // namespace

double detail::random_jitter_sample() noexcept {
  thread_local std::mt19937_64 engine{jitter_seed()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

// ---- retry_budget ----------------------------------------------------------

retry_budget::retry_budget(options opts) : opts_(opts) {
  if (!(opts_.ratio >= 0.0 && opts_.ratio <= 1000.0))
    throw std::invalid_argument("retry_budget: ratio must be in [0, 1000]");
  if (!(opts_.min_retries_per_second >= 0.0) || !std::isfinite(opts_.min_retries_per_second))
    throw std::invalid_argument("retry_budget: min_retries_per_second must be finite and not negative");
  if (opts_.ttl < duration(slots)) throw std::invalid_argument("retry_budget: ttl must be at least 10 ns");

  width_ = opts_.ttl.count() / slots;
  deposit_ = std::llround(opts_.ratio * static_cast<double>(unit));
  // Cap the floor at 1e9 tokens so sums cannot overflow; far beyond any real use.
  const double floor_units = std::floor(opts_.min_retries_per_second * to_seconds(opts_.ttl) *
                                        static_cast<double>(unit));
  reserve_ = static_cast<std::int64_t>(std::min(floor_units, 1e15));
}

std::int64_t retry_budget::slot_index(time_point now) const noexcept {
  const std::int64_t t = std::chrono::duration_cast<duration>(now.time_since_epoch()).count();
  std::int64_t q = t / width_;
  if (t % width_ != 0 && t < 0) --q;  // floor division
  return q;
}

void retry_budget::add_locked(std::int64_t index, std::int64_t units) noexcept {
  const auto pos = static_cast<std::size_t>(((index % slots) + slots) % slots);
  slot& s = ring_[pos];
  if (s.index == index) {
    s.net += units;
  } else if (s.index < index) {
    s = slot{index, units};
  }
  // else: this slot already holds a later period, so `index` is older than
  // the whole window: the entry has already expired.
}

std::int64_t retry_budget::sum_locked(std::int64_t index) const noexcept {
  std::int64_t sum = 0;
  for (const slot& s : ring_) {
    // Unused slots hold net == 0, so their sentinel index needs no special case.
    // Unsigned difference: exact for s.index <= index, and cannot overflow.
    if (s.index <= index &&
        static_cast<std::uint64_t>(index) - static_cast<std::uint64_t>(s.index) < static_cast<std::uint64_t>(slots))
      sum += s.net;
  }
  return sum;
}

void retry_budget::record_request(time_point now) noexcept {
  const std::int64_t k = slot_index(now);
  std::lock_guard lock(mu_);
  add_locked(k, deposit_);
}

bool retry_budget::try_withdraw(time_point now) noexcept {
  const std::int64_t k = slot_index(now);
  std::lock_guard lock(mu_);
  if (reserve_ + sum_locked(k) < unit) return false;
  add_locked(k, -unit);
  return true;
}

double retry_budget::balance(time_point now) const {
  const std::int64_t k = slot_index(now);
  std::lock_guard lock(mu_);
  return static_cast<double>(reserve_ + sum_locked(k)) / static_cast<double>(unit);
}

}  // namespace hourglass
