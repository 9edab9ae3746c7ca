#include "hourglass/circuit_breaker.hpp"

#include <stdexcept>
#include <utility>

namespace hourglass {

void validate(const breaker_policy& p) {
  if (p.consecutive_failures < 1)
    throw std::invalid_argument("breaker_policy: consecutive_failures must be at least 1");
  if (!(p.failure_ratio > 0.0 && p.failure_ratio <= 1.0))
    throw std::invalid_argument("breaker_policy: failure_ratio must be in (0, 1]");
  if (p.min_calls_in_window < 1) throw std::invalid_argument("breaker_policy: min_calls_in_window must be at least 1");
  if (p.window < duration(breaker_core::buckets))
    throw std::invalid_argument("breaker_policy: window must be at least 10 ns");
  if (p.open_for <= duration::zero()) throw std::invalid_argument("breaker_policy: open_for must be positive");
}

call_verdict verdict_of(const status& answer, bool had_needed_budget) noexcept {
  switch (answer.code) {
    case outcome::ok: return call_verdict::success;
    case outcome::error: return call_verdict::failure;
    case outcome::rejected:
      return answer.reason == reject_reason::circuit_open ? call_verdict::ignored : call_verdict::failure;
    // An upstream given less than it needs was bound to run out: that says
    // nothing about its health.
    case outcome::deadline_exceeded: return had_needed_budget ? call_verdict::failure : call_verdict::ignored;
    case outcome::cancelled:
    case outcome::invalid: return call_verdict::ignored;
  }
  return call_verdict::ignored;
}

// ---- breaker_core ----------------------------------------------------------

breaker_core::breaker_core(const breaker_policy& policy) : policy_(policy) {
  validate(policy_);
  width_ = policy_.window.count() / buckets;
}

std::int64_t breaker_core::bucket_index(time_point now) const noexcept {
  const std::int64_t t = std::chrono::duration_cast<duration>(now.time_since_epoch()).count();
  std::int64_t q = t / width_;
  if (t % width_ != 0 && t < 0) --q;  // floor division
  return q;
}

time_point breaker_core::open_until() const noexcept { return saturating_add(opened_at_, policy_.open_for); }

breaker_state breaker_core::state(time_point now) const noexcept {
  if (state_ == breaker_state::open && now >= open_until()) return breaker_state::half_open;
  return state_;
}

admission breaker_core::admit(time_point now) noexcept {
  switch (state_) {
    case breaker_state::closed: return {true, false, generation_};
    case breaker_state::open:
      if (now < open_until()) return {};
      state_ = breaker_state::half_open;
      [[fallthrough]];
    case breaker_state::half_open:
      if (probe_out_) return {};
      probe_out_ = true;
      // A fresh generation per probe: a repeated verdict of an earlier probe
      // cannot speak for this one.
      ++generation_;
      return {true, true, generation_};
  }
  return {};
}

void breaker_core::record(const admission& a, call_verdict v, time_point now) noexcept {
  // Only opening and handing out a probe change the generation, so a matching
  // non-probe admission was made in the closed period that is still running.
  if (!a.allowed || a.generation != generation_) return;
  if (a.is_probe) {
    if (state_ != breaker_state::half_open || !probe_out_) return;  // this probe already reported
    probe_out_ = false;
    if (v == call_verdict::success) close();
    if (v == call_verdict::failure) open(now);
    return;
  }
  if (state_ != breaker_state::closed || v == call_verdict::ignored) return;
  add(v, now);
  if (v == call_verdict::success) {
    consecutive_ = 0;
  } else {
    ++consecutive_;
  }
  // The ratio is judged after successes too: one may bring the window up to
  // min_calls_in_window with the ratio already over the line.
  if (consecutive_ >= policy_.consecutive_failures || ratio_tripped(now)) open(now);
}

void breaker_core::add(call_verdict v, time_point now) noexcept {
  const std::int64_t index = bucket_index(now);
  bucket& b = ring_[static_cast<std::size_t>(((index % buckets) + buckets) % buckets)];
  if (b.index < index) {
    b = bucket{index, {}};
  } else if (b.index > index) {
    return;  // this slot already holds a later period: `now` is older than the window
  }
  if (v == call_verdict::success) {
    ++b.n.successes;
  } else {
    ++b.n.failures;
  }
}

breaker_core::window_counts breaker_core::counts(time_point now) const noexcept {
  const std::int64_t index = bucket_index(now);
  window_counts sum;
  for (const bucket& b : ring_) {
    // Unused buckets hold zeros, so their sentinel index needs no special case.
    // Unsigned difference: exact for b.index <= index, and cannot overflow.
    if (b.index <= index &&
        static_cast<std::uint64_t>(index) - static_cast<std::uint64_t>(b.index) < static_cast<std::uint64_t>(buckets)) {
      sum.successes += b.n.successes;
      sum.failures += b.n.failures;
    }
  }
  return sum;
}

bool breaker_core::ratio_tripped(time_point now) const noexcept {
  const window_counts c = counts(now);
  const std::int64_t calls = c.successes + c.failures;
  if (calls < policy_.min_calls_in_window) return false;
  // Divide rather than multiply: 3 / 30 rounds to the same double as 0.1, while
  // 0.1 * 30 rounds above 3 and would miss the ratio it equals.
  return static_cast<double>(c.failures) / static_cast<double>(calls) >= policy_.failure_ratio;
}

void breaker_core::open(time_point now) noexcept {
  state_ = breaker_state::open;
  opened_at_ = now;
  probe_out_ = false;
  consecutive_ = 0;
  ring_ = {};
  ++generation_;
}

void breaker_core::close() noexcept {
  state_ = breaker_state::closed;
  probe_out_ = false;
  consecutive_ = 0;
  ring_ = {};
}

// ---- circuit_breaker -------------------------------------------------------

circuit_breaker::circuit_breaker(const clock& clk, const breaker_policy& policy) : clk_(clk), core_(policy) {}

circuit_breaker::ticket circuit_breaker::admit() noexcept {
  admission a;
  {
    std::lock_guard lock(mu_);
    a = core_.admit(clk_.now());
  }
  if (!a.allowed) {
    rejected_.fetch_add(1, std::memory_order_relaxed);
    return ticket{};
  }
  return ticket{this, a};
}

void circuit_breaker::record(const admission& a, call_verdict v) noexcept {
  std::lock_guard lock(mu_);
  core_.record(a, v, clk_.now());
}

breaker_state circuit_breaker::state() const noexcept {
  std::lock_guard lock(mu_);
  return core_.state(clk_.now());
}

circuit_breaker::ticket::ticket(ticket&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), adm_(std::exchange(other.adm_, admission{})) {}

circuit_breaker::ticket& circuit_breaker::ticket::operator=(ticket&& other) noexcept {
  if (this != &other) {
    record(call_verdict::ignored);
    owner_ = std::exchange(other.owner_, nullptr);
    adm_ = std::exchange(other.adm_, admission{});
  }
  return *this;
}

circuit_breaker::ticket::~ticket() { record(call_verdict::ignored); }

void circuit_breaker::ticket::record(call_verdict v) noexcept {
  if (owner_ == nullptr) return;
  std::exchange(owner_, nullptr)->record(adm_, v);
}

}  // namespace hourglass
