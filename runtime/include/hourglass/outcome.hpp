// The closed vocabulary of what can happen to a job (docs/reference/outcomes.md).
//
// Every job offered to hourglass ends in exactly one `status`. The vocabulary
// carries retry meaning: `deadline_exceeded` and `cancelled` are terminal (no
// retry against the same budget can help), a `rejected` job may be retried
// elsewhere or later, and an `error` is the handler's own failure.
#pragma once

#include <cstdint>
#include <string_view>

namespace hourglass {

// `invalid`: refused before admission because the request itself is
// malformed (a bad budget header: HTTP 400). Never admitted, never retried:
// the same input fails the same way.
enum class outcome : std::uint8_t { ok, error, rejected, deadline_exceeded, cancelled, invalid };

// Why admission refused a job before it was queued (outcome `rejected`).
// broker_unavailable: fleet mode, the broker could not take the job.
// circuit_open: the upstream's circuit breaker is open; the call failed at
// once without reaching the upstream (circuit_breaker.hpp).
// queue_paused: fleet mode, an operator paused the queue and this producer
// refuses enqueues meanwhile (hourglassd --refuse-while-paused).
enum class reject_reason : std::uint8_t {
  none,
  queue_full,
  shutting_down,
  broker_unavailable,
  circuit_open,
  queue_paused
};

// Where a budget ran out (outcome `deadline_exceeded`). reclaim: fleet mode,
// the job's worker died and its freshness ran out before another took it.
// idle: no progress reported for longer than the job's idle limit (the
// absolute deadline may still be far). retry: an async job's attempt failed
// and a retry would come too late for the job's overall deadline
// (job_retry.hpp): it ends at once instead of waiting in the queue.
// human_wait: a job waiting for a person's signal ran out of the wait's own
// limit (its machine budget does not run down while it waits).
enum class expiry_stage : std::uint8_t { none, admission, queue, run, downstream, reclaim, idle, retry, human_wait };

// Who asked for a cancellation (outcome `cancelled`). The first cause wins.
enum class cancel_cause : std::uint8_t {
  none,
  requested,    // an owner called cancel() (DELETE /v1/jobs/{id})
  caller_gone,  // the waiting client disconnected
  parent,       // a parent context was cancelled explicitly
  sibling,      // fan-out: a sibling failed (all-of) or won (first-of)
  shutdown,     // drain timeout reached
};

// One job's final word. Small and trivially copyable: it travels in completions.
struct status {
  outcome code = outcome::ok;
  reject_reason reason = reject_reason::none;
  expiry_stage stage = expiry_stage::none;
  cancel_cause cause = cancel_cause::none;

  static constexpr status ok() noexcept { return {}; }
  static constexpr status error() noexcept { return {outcome::error}; }
  static constexpr status rejected(reject_reason r) noexcept { return {outcome::rejected, r}; }
  static constexpr status expired(expiry_stage s) noexcept {
    return {outcome::deadline_exceeded, reject_reason::none, s};
  }
  static constexpr status invalid() noexcept { return {outcome::invalid}; }
  static constexpr status cancelled(cancel_cause c) noexcept {
    return {outcome::cancelled, reject_reason::none, expiry_stage::none, c};
  }

  constexpr bool is_ok() const noexcept { return code == outcome::ok; }
  // deadline_exceeded and cancelled are final: retrying them against the same
  // budget is pointless by definition.
  constexpr bool terminal() const noexcept { return code == outcome::deadline_exceeded || code == outcome::cancelled; }
  // Only the handler's own errors may be retried against the same budget; an
  // overload rejection may be retried elsewhere or later, by the caller.
  constexpr bool retryable() const noexcept { return code == outcome::error; }

  friend constexpr bool operator==(const status&, const status&) = default;
};

constexpr std::string_view to_string(outcome o) noexcept {
  switch (o) {
    case outcome::ok: return "ok";
    case outcome::error: return "error";
    case outcome::rejected: return "rejected";
    case outcome::deadline_exceeded: return "deadline_exceeded";
    case outcome::cancelled: return "cancelled";
    case outcome::invalid: return "invalid";
  }
  return "unknown";
}

constexpr std::string_view to_string(reject_reason r) noexcept {
  switch (r) {
    case reject_reason::none: return "none";
    case reject_reason::queue_full: return "queue_full";
    case reject_reason::shutting_down: return "shutting_down";
    case reject_reason::broker_unavailable: return "broker_unavailable";
    case reject_reason::circuit_open: return "circuit_open";
    case reject_reason::queue_paused: return "queue_paused";
  }
  return "unknown";
}

constexpr std::string_view to_string(expiry_stage s) noexcept {
  switch (s) {
    case expiry_stage::none: return "none";
    case expiry_stage::admission: return "admission";
    case expiry_stage::queue: return "queue";
    case expiry_stage::run: return "run";
    case expiry_stage::downstream: return "downstream";
    case expiry_stage::reclaim: return "reclaim";
    case expiry_stage::idle: return "idle";
    case expiry_stage::retry: return "retry";
    case expiry_stage::human_wait: return "human_wait";
  }
  return "unknown";
}

constexpr std::string_view to_string(cancel_cause c) noexcept {
  switch (c) {
    case cancel_cause::none: return "none";
    case cancel_cause::requested: return "requested";
    case cancel_cause::caller_gone: return "caller_gone";
    case cancel_cause::parent: return "parent";
    case cancel_cause::sibling: return "sibling";
    case cancel_cause::shutdown: return "shutdown";
  }
  return "unknown";
}

// "deadline_exceeded/queue", "rejected/queue_full", "cancelled/caller_gone", "ok".
std::string_view describe(const status& s) noexcept;

}  // namespace hourglass
