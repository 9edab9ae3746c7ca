// Circuit breakers per upstream, beside the retry budget.
//
// A breaker watches the verdicts of calls to one upstream and, while the
// upstream looks broken, fails further calls at once (rejected/circuit_open):
// they spend neither the caller's budget nor the upstream's capacity. Pieces:
//
//  - breaker_policy + validate(): when to open, and for how long.
//  - breaker_core: the state machine, pure, with an explicit `now` (no clock,
//    no lock, no threads), tested exactly.
//  - circuit_breaker: a breaker_core behind a mutex, reading an injected
//    clock, handing out RAII tickets; what the metrics registry reads for
//    hourglass_circuit_state{upstream} and hourglass_circuit_rejected_total{upstream}.
//  - verdict_of(): what a call's status says about the upstream's health.
//
// States (breaker_state; its value is the gauge's):
//   closed     every call is admitted. Opens after `consecutive_failures`
//              failures with no success between them, or when, after a
//              verdict, the window holds at least min_calls_in_window verdicts
//              (successes + failures) and failures / calls >= failure_ratio.
//   open       every call is refused while now < opened_at + open_for.
//   half_open  the open period is over. The first admit() gets the probe and
//              every other is refused while it is out. Probe success: closed.
//              Probe failure: open again, for open_for from the failure.
//              Probe ignored: the slot is free for the next caller.
// Opening and closing both start from an empty window and a zero count.
//
// Window: time is cut into 10 buckets of window/10 (whole nanoseconds),
// aligned on the clock's epoch, kept in a ring (fixed memory, nothing
// allocated per call). A verdict recorded at t counts until its bucket leaves
// the window: for at most `window`, and for more than 0.9 * window.
//
// Late verdicts: every admission carries the breaker's generation, which
// changes whenever the breaker opens and whenever it hands out a probe. A
// verdict whose admission is of an earlier generation (a call admitted before
// the breaker opened, answering after) changes nothing: it can neither trip
// nor close the breaker, nor count in a later closed period's window.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string_view>

#include "hourglass/clock.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

struct breaker_policy {
  int consecutive_failures = 5;  // failures in a row that open the breaker
  double failure_ratio = 0.5;    // failures / calls in the window that open it
  int min_calls_in_window = 20;  // the ratio is judged only from this many calls
  duration window = std::chrono::seconds(10);
  duration open_for = std::chrono::seconds(5);
};

// Throws std::invalid_argument for a policy that cannot mean what it says:
// consecutive_failures < 1, failure_ratio outside (0, 1] or NaN,
// min_calls_in_window < 1, window < 10 ns (one nanosecond per bucket),
// open_for <= 0.
void validate(const breaker_policy& policy);

enum class breaker_state : std::uint8_t { closed = 0, half_open = 1, open = 2 };

constexpr std::string_view to_string(breaker_state s) noexcept {
  switch (s) {
    case breaker_state::closed: return "closed";
    case breaker_state::half_open: return "half_open";
    case breaker_state::open: return "open";
  }
  return "unknown";
}

// What one call says about the upstream. `ignored`: nothing (the caller
// cancelled, or the upstream ran out of a budget below what it needed).
enum class call_verdict : std::uint8_t { success, failure, ignored };

// The verdict of an upstream's answer: ok is a success; error, and a rejection
// by the upstream (overload), are failures; deadline_exceeded is a failure only
// if `had_needed_budget` (the upstream was given at least the budget it needs),
// else ignored; cancelled, invalid (our request was bad, the upstream answered)
// and rejected/circuit_open (the upstream was never called) are ignored.
call_verdict verdict_of(const status& answer, bool had_needed_budget) noexcept;

// allowed: make the call, then record() its verdict with this admission.
// Refused: answer status::rejected(reject_reason::circuit_open) at once.
struct admission {
  bool allowed = false;
  bool is_probe = false;  // the one half-open call whose verdict decides
  std::uint64_t generation = 0;
};

// The breaker's state machine. Pure: every decision is a function of the
// recorded history and the `now` passed in. `now` should not go backwards; a
// verdict older than the whole window is dropped. Not thread-safe.
class breaker_core {
 public:
  static constexpr int buckets = 10;

  // Throws std::invalid_argument for an invalid policy (see validate()).
  explicit breaker_core(const breaker_policy& policy);

  admission admit(time_point now) noexcept;
  // Applies the verdict of a call admitted by admit(). A refused admission, a
  // late one (see above) or a second verdict for the same probe does nothing.
  // Every admitted probe must report, `ignored` if nothing else: until it
  // does, the breaker stays half-open and refuses everyone else.
  void record(const admission& a, call_verdict v, time_point now) noexcept;

  // An open breaker whose period is over reads as half_open.
  breaker_state state(time_point now) const noexcept;
  time_point open_until() const noexcept;  // opened_at + open_for (meaningful while open)

  // The verdicts in the window at `now` (always empty unless closed).
  struct window_counts {
    std::int64_t successes = 0, failures = 0;
  };
  window_counts counts(time_point now) const noexcept;

  const breaker_policy& policy() const noexcept { return policy_; }

 private:
  struct bucket {
    std::int64_t index = std::numeric_limits<std::int64_t>::min();  // which window/10 period it holds
    window_counts n;
  };

  std::int64_t bucket_index(time_point now) const noexcept;
  void add(call_verdict v, time_point now) noexcept;
  bool ratio_tripped(time_point now) const noexcept;
  void open(time_point now) noexcept;
  void close() noexcept;

  breaker_policy policy_;
  std::int64_t width_ = 1;  // bucket width in nanoseconds
  // `open` stays stored after its period ends: the next admit() moves it on.
  breaker_state state_ = breaker_state::closed;
  time_point opened_at_{};
  bool probe_out_ = false;
  int consecutive_ = 0;
  std::uint64_t generation_ = 0;
  std::array<bucket, buckets> ring_{};
};

// One upstream's breaker, shared by every caller of that upstream.
//
//   circuit_breaker::ticket t = breaker.admit();
//   if (!t) return status::rejected(reject_reason::circuit_open);
//   const status st = call_upstream(...);
//   t.record(verdict_of(st, had_needed_budget));
//
// Admit once per attempt, inside retry_call's attempt: rejected is not
// retryable, so a refused attempt ends the loop without a backoff sleep and
// without taking a retry token.
//
// Guarantees: at most one probe is out at any moment; rejected_total() counts
// exactly the refused admissions. The clock is read under the lock, so the
// core sees time in lock order. Not guaranteed: which caller gets the probe.
//
// Thread safety: every member may be called concurrently. A ticket belongs to
// one caller (not thread-safe itself) and must not outlive its breaker.
class circuit_breaker {
 public:
  // Move-only; a moved-from ticket reads as refused. An allowed ticket destroyed
  // without a verdict records `ignored`, so a lost probe cannot hold the slot.
  class ticket {
   public:
    ticket() = default;  // refused
    ticket(ticket&& other) noexcept;
    ticket& operator=(ticket&& other) noexcept;
    ~ticket();

    bool allowed() const noexcept { return adm_.allowed; }
    explicit operator bool() const noexcept { return adm_.allowed; }
    bool is_probe() const noexcept { return adm_.is_probe; }
    // The first call reports; later calls, and calls on a refused ticket, do nothing.
    void record(call_verdict v) noexcept;

   private:
    friend class circuit_breaker;
    ticket(circuit_breaker* owner, const admission& a) noexcept : owner_(owner), adm_(a) {}

    circuit_breaker* owner_ = nullptr;  // null once the verdict is in, or when refused
    admission adm_;
  };

  // Throws std::invalid_argument for an invalid policy (see validate()).
  explicit circuit_breaker(const clock& clk, const breaker_policy& policy = {});
  circuit_breaker(const circuit_breaker&) = delete;
  circuit_breaker& operator=(const circuit_breaker&) = delete;

  ticket admit() noexcept;

  breaker_state state() const noexcept;  // the gauge: 0 closed, 1 half-open, 2 open
  std::uint64_t rejected_total() const noexcept { return rejected_.load(std::memory_order_relaxed); }
  const breaker_policy& policy() const noexcept { return core_.policy(); }

 private:
  void record(const admission& a, call_verdict v) noexcept;

  const clock& clk_;
  mutable std::mutex mu_;
  breaker_core core_;
  std::atomic<std::uint64_t> rejected_{0};
};

}  // namespace hourglass
