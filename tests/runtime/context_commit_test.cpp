// context::commit(need, fn): the commit point of docs/guards.md. Not enough
// budget: fn never starts. Once started, fn runs shielded from the deadline,
// the idle limit and cancellation, and the context (and its ancestors) say
// committed(). Exact, on a manual clock.
#include <gtest/gtest.h>

#include <stdexcept>

#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

status stop_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const stopped_error& e) {
    return e.why();
  }
  return status::ok();
}

TEST(ContextCommit, WithLessThanItNeedsLeftTheCommitNeverStarts) {
  manual_clock clk;
  context_source src(clk, clk.now() + 100ms);
  clk.advance(60ms);  // 40 ms left
  bool started = false;
  const status st = stop_of([&] { src.get().commit(41ms, [&] { started = true; }); });
  EXPECT_EQ(st, status::expired(expiry_stage::run));
  EXPECT_FALSE(started);
  EXPECT_FALSE(src.get().committed()) << "nothing was committed";
  EXPECT_FALSE(src.get().done()) << "the job still has its 40 ms for other work";
}

TEST(ContextCommit, ExactlyWhatItNeedsIsEnough) {
  manual_clock clk;
  context_source src(clk, clk.now() + 100ms);
  clk.advance(60ms);
  EXPECT_EQ(src.get().commit(40ms, [] { return 7; }), 7);
  EXPECT_TRUE(src.get().committed());
}

TEST(ContextCommit, AStoppedContextCommitsNothingAndSaysWhy) {
  manual_clock clk;
  context_source cancelled(clk);
  cancelled.cancel(cancel_cause::caller_gone);
  EXPECT_EQ(stop_of([&] { cancelled.get().commit(0ns, [] {}); }), status::cancelled(cancel_cause::caller_gone));
  EXPECT_FALSE(cancelled.get().committed());

  context_source expired(clk, clk.now() + 10ms);
  clk.advance(10ms);
  EXPECT_EQ(stop_of([&] { expired.get().commit(0ns, [] {}); }), status::expired(expiry_stage::run));
  EXPECT_FALSE(expired.get().committed());
}

TEST(ContextCommit, TheDeadlinePassingDuringTheCommitDoesNotInterruptIt) {
  manual_clock clk;
  context_source src(clk, clk.now() + 100ms);
  const context& ctx = src.get();
  bool saw_stop_inside = true;
  const int v = ctx.commit(50ms, [&](const context& shielded) {
    clk.advance(300ms);  // the commit overruns the job's deadline
    EXPECT_TRUE(ctx.done()) << "the job's own context has expired";
    saw_stop_inside = shielded.done() || shielded.token().stop_requested();
    return 42;
  });
  EXPECT_EQ(v, 42);
  EXPECT_FALSE(saw_stop_inside) << "the commit's context never stopped";
  EXPECT_TRUE(ctx.committed());
  EXPECT_EQ(ctx.stop_status(), status::expired(expiry_stage::run)) << "what follows sees the deadline";
}

TEST(ContextCommit, ACancelDuringTheCommitDoesNotInterruptIt) {
  manual_clock clk;
  context_source src(clk, clk.now() + 1s);
  const bool finished = src.get().commit(0ns, [&](const context& shielded) {
    src.cancel(cancel_cause::requested);
    return !shielded.done() && !shielded.token().stop_requested();
  });
  EXPECT_TRUE(finished);
  EXPECT_EQ(src.get().stop_status(), status::cancelled(cancel_cause::requested));
  EXPECT_TRUE(src.get().committed());
}

TEST(ContextCommit, TheIdleLimitDoesNotReachTheCommitAndTheCommitIsProgress) {
  manual_clock clk;
  context_source src(clk, clk.now() + 10s, 100ms);
  clk.advance(90ms);
  src.get().commit(0ns, [&](const context& shielded) {
    EXPECT_EQ(shielded.idle_limit(), duration::max());
    clk.advance(90ms);  // 180 ms since the last progress outside, 90 ms since the commit began
  });
  EXPECT_FALSE(src.get().done()) << "crossing and finishing a commit count as progress";
  EXPECT_EQ(src.get().idle_deadline(), clk.now() + 100ms);
}

TEST(ContextCommit, ACommitLongerThanTheIdleLimitDoesNotEndTheJobIdle) {
  manual_clock clk;
  context_source src(clk, clk.now() + 10s, 100ms);
  context_source child = src.get().child();  // the commit is made below the job's context
  child.get().commit(0ns, [&] {
    clk.advance(350ms);  // the idle timer fires meanwhile, three times over
    EXPECT_FALSE(src.get().done()) << "a commit is progress all along";
    EXPECT_EQ(src.get().stop_status(), status::ok());
  });
  EXPECT_FALSE(src.get().done());
  EXPECT_EQ(src.get().idle_deadline(), clk.now() + 100ms) << "the idle clock restarts as the commit ends";
  clk.advance(100ms);
  EXPECT_EQ(src.get().stop_status(), status::expired(expiry_stage::idle)) << "silence after it still counts";
}

TEST(ContextCommit, TheCommitIsBoundedByItsOwnCap) {
  manual_clock clk;
  context_source src(clk, clk.now() + 1s);
  src.get().commit(
      0ns,
      [&](const context& shielded) {
        EXPECT_EQ(shielded.deadline(), clk.now() + 30ms);
        clk.advance(29ms);
        EXPECT_FALSE(shielded.done());
        clk.advance(1ms);
        EXPECT_EQ(shielded.stop_status(), status::expired(expiry_stage::run));
      },
      30ms);
}

TEST(ContextCommit, ACommitInAChildMarksItsAncestorsNotItsSiblings) {
  manual_clock clk;
  context_source root(clk, clk.now() + 1s);
  context_source a = root.get().child();
  context_source b = root.get().child();
  a.get().commit(0ns, [] {});
  EXPECT_TRUE(a.get().committed());
  EXPECT_TRUE(root.get().committed());
  EXPECT_FALSE(b.get().committed());
}

TEST(ContextCommit, AFailingCommitStillCountsAsCommitted) {
  manual_clock clk;
  context_source src(clk, clk.now() + 1s);
  EXPECT_THROW(src.get().commit(0ns, []() -> int { throw std::runtime_error("disk full"); }), std::runtime_error);
  EXPECT_TRUE(src.get().committed()) << "it started: a change may have happened";
}

}  // namespace
}  // namespace hourglass
