// The request-scoped carrier: a deadline, a cancellation and its cause.
//
// A `context` is what work observes: read its deadline, ask whether it is
// done, wait with it, make children from it. A `context_source` is what its
// owner holds to cancel it. Both are cheap shared handles.
//
// Rules (the Go context rules, plus hourglass's reserve):
//  - A child's deadline is min(parent deadline, now + cap) - reserve, in one
//    call; a child never outlives its parent.
//  - Cancelling or expiring a parent stops every descendant with the same
//    reason; cancelling a child leaves the parent alive.
//  - A child made from a stopped parent is born stopped.
//  - The first reason wins: a cancel before the deadline reports `cancelled`,
//    a deadline reached first reports `deadline_exceeded`.
//  - Reaching the deadline stops the context by itself (a timer on the
//    context's clock), so work that waits or registers callbacks is woken
//    without polling. done() also compares the deadline with now(), so a CPU
//    loop sees expiry even before the timer thread has run.
//  - A second clock, the idle limit: a context may also stop when nobody
//    calls progress() on it (or on a child) for longer than its idle limit
//    (deadline_exceeded, stage idle), however far its deadline is. Progress
//    never moves the deadline. A child's idle limit is the tighter of its
//    own and its parent's, and its progress is its ancestors' progress too.
//  - Commit points: commit(need, fn) starts fn only with at least `need`
//    left, then runs it shielded from the deadline, the idle limit and
//    cancellation (a half-done commit is worse than a late one), and marks
//    the context and its ancestors committed() so the job's outcome can say
//    a change may have happened.
//
// Thread safety: every member is safe to call concurrently.
#pragma once

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "hourglass/cancellation.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// How much of its parent's budget a child may take.
struct child_limits {
  duration cap = duration::max();       // at most this long from now
  duration reserve = duration::zero();  // kept back for the parent's own finishing work
  duration idle = duration::max();      // idle limit, tightened by the parent's
};

// Thrown by context::check() inside work that prefers exceptions to polling.
class stopped_error : public std::exception {
 public:
  explicit stopped_error(status why) noexcept : why_(why) {}
  const char* what() const noexcept override;
  status why() const noexcept { return why_; }

 private:
  status why_;
};

class context_source;

namespace detail {
struct context_state;
}

class context {
 public:
  // A context with no deadline that can never be cancelled, on the real clock.
  context();
  // A context with no deadline that can never be cancelled, on `clk`.
  static context background(hourglass::clock& clk);

  hourglass::clock& get_clock() const noexcept;
  time_point deadline() const noexcept;
  duration remaining() const noexcept;  // never negative; duration::max() without a deadline

  // True once cancelled, once the deadline has been reached, or once no
  // progress was reported for the idle limit.
  bool done() const noexcept;
  // status::ok() while running; otherwise why it stopped. The deadline is
  // reported as deadline_exceeded/run; executors restate the stage they saw.
  status stop_status() const noexcept;
  // The same, judged at `now`, the caller's reading of this context's clock
  // (an executor has one at a job's end: a clock read saved per job).
  status stop_status(time_point now) const noexcept;
  void check() const;  // throws stopped_error when done()

  // The idle limit (duration::max(): none) and its clock. progress() says
  // the work moved forward: it restarts the idle clock of this context and
  // of its ancestors (one atomic store each; the timer catches up by itself).
  duration idle_limit() const noexcept;
  void progress() const noexcept;
  // When the idle limit runs out if no progress comes first (never: none).
  time_point idle_deadline() const noexcept;

  // The cancellation side only (fires on cancel and at the deadline).
  cancellation_token token() const noexcept;

  // Waits until `t`. Returns true when `t` was reached, false when the
  // context stopped first (it then returns at once).
  bool sleep_until(time_point t) const;
  bool sleep_for(duration d) const;

  context_source child(child_limits limits = {}) const;
  context_source child_until(time_point deadline, duration idle_limit = duration::max()) const;

  // A commit point (docs/guards.md, "Commit points"). With less than `need`
  // left, or the context already stopped, `fn` is not started: throws
  // stopped_error (deadline_exceeded/run, or the stop's own status) and
  // nothing is marked committed. Otherwise marks this context and its
  // ancestors committed(), counts as progress while it runs (the idle limit
  // does not run out during it), and calls fn(shielded), or fn()
  // if it takes no context: `shielded` is a fresh context on the same clock
  // that this context's deadline, idle limit and cancellation never reach,
  // with a deadline of its own at now + cap (max: none). Returns what fn
  // returns; an exception from fn passes through (still committed). The work
  // that follows sees this context as it is: stopped, if its deadline passed
  // meanwhile.
  template <class F>
  decltype(auto) commit(duration need, F&& fn, duration cap = duration::max()) const {
    const context shielded = begin_commit(need, cap);
    struct end_guard {
      const context& c;
      ~end_guard() { c.end_commit(); }
    } at_end{*this};
    if constexpr (std::is_invocable_v<F, const context&>) {
      return std::forward<F>(fn)(shielded);
    } else {
      return std::forward<F>(fn)();
    }
  }
  // True once a commit point was crossed in this context or a descendant.
  bool committed() const noexcept;

 private:
  friend class context_source;
  // commit()'s checks and marks; returns the shielded context. Until
  // end_commit(), the idle limits of this context and its ancestors do not
  // run out: a commit is progress all along.
  context begin_commit(duration need, duration cap) const;
  void end_commit() const noexcept;
  explicit context(std::shared_ptr<detail::context_state> s) noexcept : state_(std::move(s)) {}
  std::shared_ptr<detail::context_state> state_;
};

class context_source {
 public:
  // A root context on `clk` that expires at `deadline` (never: no deadline).
  explicit context_source(hourglass::clock& clk, time_point deadline = never);
  // ... that also stops after `idle_limit` without progress() (stage idle).
  context_source(hourglass::clock& clk, time_point deadline, duration idle_limit);
  static context_source with_timeout(hourglass::clock& clk, duration budget);

  const context& get() const noexcept { return ctx_; }
  operator const context&() const noexcept { return ctx_; }  // NOLINT: a source is also a view

  // Returns true when this call stopped the context (first cause wins).
  bool cancel(cancel_cause cause = cancel_cause::requested) noexcept;
  // Stops the context as if its deadline had passed (used by executors that
  // notice expiry before the timer does).
  bool expire(expiry_stage stage = expiry_stage::run) noexcept;

  // A root context whose deadline its owner fires (expire()), not a timer of
  // its own. done(), stop_status() and sleeps see the deadline as usual; the
  // token stops at it only when the owner expires it. The executor makes its
  // running jobs' contexts so, and watches each worker with one timer, not
  // one per job (arming and cancelling a timer per job was most of what a
  // deadline cost).
  // `now`: the caller's reading of clk (one clock read saved per job).
  static context_source watched(hourglass::clock& clk, time_point deadline, time_point now,
                                duration idle_limit = duration::max());
  // The owner stops watching (its job ended): if anyone else still holds the
  // context (a copy, a child) and it has not stopped, it gets a deadline
  // timer of its own after all. Returns whether one was armed.
  bool arm_if_shared();

 private:
  friend class context;
  explicit context_source(context c) noexcept : ctx_(std::move(c)) {}
  context ctx_;
};

}  // namespace hourglass
