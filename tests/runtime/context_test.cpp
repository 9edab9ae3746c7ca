#include "hourglass/context.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "common/eventually.hpp"
#include "common/thread_state.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

constexpr status kDeadline = status::expired(expiry_stage::run);

// A manual_clock whose next schedule() first runs `before_next_schedule`, on
// the scheduling thread: another thread moving the clock between a sleeper's
// reading of the time and the scheduling of its timer, made deterministic.
class interleaving_clock final : public clock {
 public:
  time_point now() const noexcept override { return inner.now(); }
  timer_id schedule(time_point when, std::function<void()> fn) override {
    if (auto hook = std::exchange(before_next_schedule, nullptr)) hook();
    return inner.schedule(when, std::move(fn));
  }
  bool cancel(timer_id id) noexcept override { return inner.cancel(id); }

  manual_clock inner;
  std::function<void()> before_next_schedule;  // set before the sleeper starts
};

using ::hourglass::testing::thread_sleeps;

TEST(Context, BackgroundNeverStops) {
  manual_clock clk;
  const context bg = context::background(clk);
  EXPECT_EQ(bg.deadline(), never);
  EXPECT_EQ(bg.remaining(), duration::max());
  EXPECT_FALSE(bg.token().stop_possible() && bg.token().stop_requested());
  clk.advance(1000h);
  EXPECT_FALSE(bg.done());
  EXPECT_EQ(bg.stop_status(), status::ok());
}

TEST(Context, DeadlineFiresByItselfWithoutPolling) {
  manual_clock clk;
  context_source root = context_source::with_timeout(clk, 100ms);
  std::atomic<int> fired{0};
  cancellation_callback cb(root.get().token(), [&]() noexcept { fired++; });
  clk.advance(99ms);
  EXPECT_EQ(fired.load(), 0);
  EXPECT_EQ(root.get().remaining(), 1ms);
  clk.advance(1ms);
  EXPECT_EQ(fired.load(), 1);
  EXPECT_TRUE(root.get().done());
  EXPECT_EQ(root.get().stop_status(), kDeadline);
  EXPECT_FALSE(root.cancel());  // the first cause won
  EXPECT_EQ(root.get().stop_status(), kDeadline);
}

// Go: TestParentFinishesChild
TEST(Context, ParentFinishesChild) {
  manual_clock clk;
  context_source parent(clk);
  context_source child = parent.get().child();
  context_source grandchild = child.get().child({.cap = 10s});
  EXPECT_FALSE(grandchild.get().done());
  EXPECT_TRUE(parent.cancel(cancel_cause::caller_gone));
  EXPECT_TRUE(child.get().done());
  EXPECT_TRUE(grandchild.get().done());
  EXPECT_EQ(grandchild.get().stop_status(), status::cancelled(cancel_cause::caller_gone));
}

// Go: TestChildFinishesFirst
TEST(Context, ChildFinishesFirstLeavesParentAlive) {
  manual_clock clk;
  context_source parent(clk, clk.now() + 1s);
  context_source child = parent.get().child();
  EXPECT_TRUE(child.cancel());
  EXPECT_TRUE(child.get().done());
  EXPECT_FALSE(parent.get().done());
  EXPECT_EQ(parent.get().stop_status(), status::ok());
  clk.advance(1s);
  EXPECT_EQ(parent.get().stop_status(), kDeadline);
  EXPECT_EQ(child.get().stop_status(), status::cancelled(cancel_cause::requested));
}

// Go: TestDeadline (the earlier deadline wins, either way round)
TEST(Context, EarlierDeadlineWins) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source parent(clk, t0 + 50ms);
  context_source later = parent.get().child_until(t0 + 500ms);
  context_source sooner = parent.get().child_until(t0 + 20ms);
  EXPECT_EQ(later.get().deadline(), t0 + 50ms);
  EXPECT_EQ(sooner.get().deadline(), t0 + 20ms);
  clk.advance(20ms);
  EXPECT_TRUE(sooner.get().done());
  EXPECT_FALSE(later.get().done());
  EXPECT_FALSE(parent.get().done());
  clk.advance(30ms);
  EXPECT_TRUE(later.get().done());
  EXPECT_EQ(later.get().stop_status(), kDeadline);
}

// Go: TestCanceledTimeout -- cancel before the deadline reports cancelled.
TEST(Context, CancelBeforeDeadlineIsCancelledNotExpired) {
  manual_clock clk;
  context_source ctx = context_source::with_timeout(clk, 1s);
  clk.advance(500ms);
  EXPECT_TRUE(ctx.cancel());
  clk.advance(1s);
  EXPECT_EQ(ctx.get().stop_status(), status::cancelled(cancel_cause::requested));
}

TEST(Context, ChildOfStoppedParentIsBornStopped) {
  manual_clock clk;
  context_source parent(clk);
  parent.cancel(cancel_cause::shutdown);
  context_source child = parent.get().child({.cap = 1s});
  EXPECT_TRUE(child.get().done());
  EXPECT_EQ(child.get().stop_status(), status::cancelled(cancel_cause::shutdown));

  context_source expired = context_source::with_timeout(clk, 0ms);
  EXPECT_EQ(expired.get().child().get().stop_status(), kDeadline);
}

TEST(Context, ChildCapAndReserveInOneCall) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source parent(clk, t0 + 300ms);
  // The classic example: 300 ms remaining, the dependency gets at most 220 ms.
  context_source capped = parent.get().child({.cap = 220ms});
  EXPECT_EQ(capped.get().remaining(), 220ms);
  // Reserve comes off whichever bound is tighter.
  EXPECT_EQ(parent.get().child({.cap = 1s, .reserve = 50ms}).get().remaining(), 250ms);
  EXPECT_EQ(parent.get().child({.cap = 100ms, .reserve = 30ms}).get().remaining(), 70ms);
  // A child never outlives its parent, however large its cap.
  EXPECT_EQ(parent.get().child({.cap = 1h}).get().deadline(), t0 + 300ms);
  // A reserve larger than what remains yields a child that is already expired.
  EXPECT_TRUE(parent.get().child({.reserve = 400ms}).get().done());
}

TEST(Context, ChildWithSameDeadlineIsStoppedByParentTimer) {
  manual_clock clk;
  context_source parent = context_source::with_timeout(clk, 10ms);
  const std::size_t timers = clk.pending_timers();
  context_source child = parent.get().child();
  EXPECT_EQ(clk.pending_timers(), timers);  // no second timer for the same instant
  clk.advance(10ms);
  EXPECT_EQ(child.get().stop_status(), kDeadline);
}

TEST(Context, DoneSeesExpiryBeforeTimerRuns) {
  manual_clock clk;
  context_source ctx = context_source::with_timeout(clk, 5ms);
  // Moving time without running timers is what a busy real timer thread looks like.
  EXPECT_FALSE(ctx.get().done());
  EXPECT_NO_THROW(ctx.get().check());
  clk.advance(5ms);
  EXPECT_THROW(ctx.get().check(), stopped_error);
  try {
    ctx.get().check();
  } catch (const stopped_error& e) {
    EXPECT_EQ(e.why(), kDeadline);
  }
}

TEST(Context, SleepWakesAtTimeOrOnCancel) {
  manual_clock clk;
  context_source ctx = context_source::with_timeout(clk, 1s);
  std::atomic<int> result{-1};
  std::thread sleeper([&] { result = ctx.get().sleep_for(100ms) ? 1 : 0; });
  ASSERT_TRUE(clk.wait_for_timers(2));  // deadline timer + the sleep's timer
  clk.advance(100ms);
  sleeper.join();
  EXPECT_EQ(result.load(), 1);

  std::thread sleeper2([&] { result = ctx.get().sleep_for(10s) ? 1 : 0; });
  ASSERT_TRUE(clk.wait_for_timers(2));
  ctx.cancel();
  sleeper2.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_FALSE(ctx.get().sleep_for(1ms));  // returns at once once stopped
}

// The sleeper reads the time, then schedules its wake-up. A manual_clock runs
// a timer scheduled in its past only at its next advance(): an advance()
// between the two (from another thread; here from inside the schedule call)
// must not leave the sleeper waiting for a wake-up that may never come.
TEST(Context, ASleepWhoseTimeIsReachedBeforeItsTimerIsScheduledEnds) {
  interleaving_clock clk;
  const context_source ctx(clk, clk.now() + 1h);  // its deadline timer is scheduled here
  clk.before_next_schedule = [&] { clk.inner.advance(100ms); };
  auto slept = std::async(std::launch::async, [&] { return ctx.get().sleep_for(100ms); });
  const bool ended = slept.wait_for(10s) == std::future_status::ready;
  if (!ended) clk.inner.run_due();  // the lost wake-up: release the sleeper, then fail
  EXPECT_TRUE(ended) << "the sleeper missed its wake-up";
  EXPECT_TRUE(slept.get()) << "its time was reached";
  EXPECT_EQ(clk.inner.pending_timers(), 1u) << "only the deadline's timer is left";
}

// The same interleaving for clock::sleep_until (no context).
TEST(Context, AClockSleepWhoseTimeIsReachedBeforeItsTimerIsScheduledEnds) {
  interleaving_clock clk;
  const time_point t = clk.now() + 50ms;
  clk.before_next_schedule = [&] { clk.inner.advance(50ms); };
  auto slept = std::async(std::launch::async, [&] { clk.sleep_until(t); });
  const bool ended = slept.wait_for(10s) == std::future_status::ready;
  if (!ended) clk.inner.run_due();
  EXPECT_TRUE(ended) << "the sleeper missed its wake-up";
  slept.get();
  EXPECT_EQ(clk.inner.pending_timers(), 0u) << "its timer was removed";
  clk.sleep_until(t);  // a time already reached: returns at once, no timer
  EXPECT_EQ(clk.inner.pending_timers(), 0u);
}

TEST(Context, SleepPastDeadlineIsCutShort) {
  manual_clock clk;
  context_source ctx = context_source::with_timeout(clk, 200ms);
  std::atomic<int> result{-1};
  std::thread sleeper([&] { result = ctx.get().sleep_for(10s) ? 1 : 0; });
  ASSERT_TRUE(clk.wait_for_timers(2));
  clk.advance(200ms);
  sleeper.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_EQ(ctx.get().stop_status(), kDeadline);
}

// On the real clock a sleeper waits with a timeout of its own (no timer
// thread between the deadline and its waking). Real time, so only the order
// of events is asserted, with generous slack.
TEST(Context, OnTheSteadyClockASleepEndsAtItsTimeAtTheDeadlineOrOnCancel) {
  steady_clock_service& clk = real_clock();
  ASSERT_TRUE(clk.is_steady_clock());
  EXPECT_FALSE(manual_clock().is_steady_clock());

  context_source far = context_source::with_timeout(clk, 1h);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(far.get().sleep_for(20ms));  // its own time: true, and not early
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);

  t0 = std::chrono::steady_clock::now();  // before the deadline is set
  context_source near = context_source::with_timeout(clk, 30ms);
  EXPECT_FALSE(near.get().sleep_for(1h));  // cut short by the deadline
  const auto slept = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(slept, 30ms);
  EXPECT_LT(slept, 30s);
  EXPECT_EQ(near.get().stop_status(), kDeadline);

  std::atomic<int> result{-1};
#ifdef __linux__
  std::atomic<pid_t> sleeper_tid{0};
  std::thread sleeper([&] {
    sleeper_tid = static_cast<pid_t>(::syscall(SYS_gettid));
    result = far.get().sleep_for(1h) ? 1 : 0;
  });
  // Cancelled while asleep: the sleeper's thread blocks in the sleep's wait
  // and nowhere else (a cancel that came first is covered below).
  EXPECT_TRUE(test_common::eventually([&] { return sleeper_tid != 0 && thread_sleeps(sleeper_tid); }))
      << "the sleeper never went to sleep";
#else
  std::thread sleeper([&] { result = far.get().sleep_for(1h) ? 1 : 0; });  // either order must work
#endif
  far.cancel();
  sleeper.join();
  EXPECT_EQ(result.load(), 0);
  EXPECT_FALSE(far.get().sleep_for(1ms));
}

// An 800 ms chain of hops: each hop sees what is left of one budget.
TEST(Context, ChainSpendsOneBudget) {
  manual_clock clk;
  const time_point t0 = clk.now();
  context_source client(clk, t0 + 800ms);
  clk.advance(80ms);
  context_source a = client.get().child();
  EXPECT_EQ(a.get().remaining(), 720ms);
  clk.advance(350ms);
  context_source b = a.get().child();
  EXPECT_EQ(b.get().remaining(), 370ms);
  clk.advance(180ms);
  context_source db = b.get().child();
  EXPECT_EQ(db.get().remaining(), 190ms);
  clk.advance(190ms);
  EXPECT_EQ(db.get().stop_status(), kDeadline);
  EXPECT_EQ(client.get().stop_status(), kDeadline);
}

TEST(Context, NoRegistrationsLeak) {
  manual_clock clk;
  context_source root = context_source::with_timeout(clk, 1s);
  cancellation_source probe;  // count the root's registrations through a child link
  {
    std::vector<context_source> children;
    for (int i = 0; i < 100; ++i) children.push_back(root.get().child({.cap = 500ms}));
    EXPECT_EQ(clk.pending_timers(), 101u);
  }
  // Children gone: their timers and their links on the parent are gone too.
  EXPECT_EQ(clk.pending_timers(), 1u);
  clk.advance(1s);
  EXPECT_EQ(clk.pending_timers(), 0u);
}

// Go: TestCancelRemoves plus a 100-node tree cancelled from several threads.
TEST(Context, TreeCancelledConcurrentlyFromManyThreads) {
  for (int round = 0; round < 20; ++round) {
    manual_clock clk;
    context_source root(clk);
    std::vector<context_source> nodes;
    nodes.reserve(100);
    nodes.push_back(root);
    std::mt19937 rng(static_cast<unsigned>(round));
    for (int i = 1; i < 100; ++i) {
      const auto parent = std::uniform_int_distribution<int>(0, i - 1)(rng);
      nodes.push_back(nodes[static_cast<std::size_t>(parent)].get().child({.cap = 1s}));
    }
    std::atomic<int> fired{0};
    std::vector<std::unique_ptr<cancellation_callback<std::function<void()>>>> callbacks;
    for (auto& n : nodes) {
      callbacks.push_back(std::make_unique<cancellation_callback<std::function<void()>>>(
          n.get().token(), std::function<void()>([&fired] { fired++; })));
    }
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        // Each thread cancels a different slice, and one the root.
        for (std::size_t i = static_cast<std::size_t>(t); i < nodes.size(); i += 7) nodes[i].cancel();
        if (t == 0) root.cancel(cancel_cause::shutdown);
      });
    }
    std::thread advancer([&] {
      while (!go.load()) std::this_thread::yield();
      clk.advance(2s);
    });
    go = true;
    for (auto& th : threads) th.join();
    advancer.join();
    EXPECT_EQ(fired.load(), 100) << "every node's callback fires exactly once";
    for (auto& n : nodes) EXPECT_TRUE(n.get().done());
    callbacks.clear();
  }
}

}  // namespace
}  // namespace hourglass
