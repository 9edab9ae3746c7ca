// Families of child jobs in the memory store's table, without a socket: the
// bounds on depth and children (a pure rule, and the table that applies it
// under its lock), a cancel of a chain deeper than any stack could recurse,
// the order in which a cancelled family leaves the executor, and a parent
// of thousands whose wait is judged by counts kept as each child ends.
#include <gtest/gtest.h>
#include <pthread.h>

#include <string>
#include <vector>

#include "core/child_jobs.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/executor.hpp"
#include "stores/memory_jobs.hpp"

namespace hourglass::server::detail {
namespace memory_families {

using namespace std::chrono_literals;

const time_point t0 = time_point{} + 1h;

TEST(FamilyBound, DepthThenChildrenAgainstTheLimits) {
  const family_limits limits{.max_depth = 2, .max_children = 3};
  struct row {
    std::size_t parent_depth, children;
    std::optional<parent_problem> expected;
  };
  for (const row& r : std::vector<row>{
           {0, 0, std::nullopt},
           {1, 2, std::nullopt},                               // the last child a parent may have
           {1, 3, parent_problem::too_many_children},          // one more
           {2, 0, parent_problem::too_deep},                   // a job at the deepest has no children
           {2, 3, parent_problem::too_deep},                   // depth is judged first
           {0, 1'000'000, parent_problem::too_many_children},  // a root is bounded too
       }) {
    EXPECT_EQ(family_bound(r.parent_depth, r.children, limits), r.expected)
        << "depth " << r.parent_depth << ", children " << r.children;
  }
  EXPECT_EQ(family_bound(0, 0, {.max_depth = 0, .max_children = 10}), parent_problem::too_deep)
      << "a depth of 0: no job may have children";
}

TEST(MemoryFamilies, AChildPastEitherBoundIsRefusedAndNothingIsHeld) {
  memory_jobs store(100, 1h, {.family = {.max_depth = 2, .max_children = 3}});
  const std::string root = *store.create("fanout", t0);
  std::vector<std::string> children;
  for (int i = 0; i < 3; ++i) children.push_back(*store.create("echo", t0, 1, std::nullopt, 1h, never, root));
  std::optional<parent_problem> why;
  EXPECT_FALSE(store.create("echo", t0, 1, std::nullopt, 1h, never, root, &why));
  EXPECT_EQ(why, parent_problem::too_many_children);
  EXPECT_EQ(store.find(root, t0)->children.size(), 3u) << "the refused child is not listed";
  EXPECT_EQ(store.size(), 4u);

  const std::optional<std::string> grandchild = store.create("echo", t0, 1, std::nullopt, 1h, never, children[0]);
  ASSERT_TRUE(grandchild) << "depth 2 is the deepest allowed";
  EXPECT_EQ(store.find(*grandchild, t0)->depth, 2u);
  why.reset();
  EXPECT_FALSE(store.create("echo", t0, 1, std::nullopt, 1h, never, *grandchild, &why));
  EXPECT_EQ(why, parent_problem::too_deep);

  why.reset();
  EXPECT_FALSE(store.create("echo", t0, 1, std::nullopt, 1h, never, std::string(32, 'a'), &why));
  EXPECT_EQ(why, parent_problem::unknown);
  async_outcome done;
  done.st = status::ok();
  store.finish(children[1], done, t0);
  why.reset();
  EXPECT_FALSE(store.create("echo", t0, 1, std::nullopt, 1h, never, children[1], &why));
  EXPECT_EQ(why, parent_problem::finished);
  EXPECT_EQ(store.size(), 5u);
}

// Runs `fn` on a thread with a 512 KiB stack: what a cancel that recursed
// once per generation would overflow long before the chain's end.
void on_small_stack(void (*fn)(void*), void* arg) {
  struct call {
    void (*fn)(void*);
    void* arg;
  } c{fn, arg};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, 512 * 1024), 0);
  pthread_t t;
  ASSERT_EQ(pthread_create(
                &t, &attr,
                [](void* p) -> void* {
                  auto* cc = static_cast<call*>(p);
                  cc->fn(cc->arg);
                  return nullptr;
                },
                &c),
            0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(MemoryFamilies, CancellingTheRootOfAChainOfTenThousandEndsEveryGeneration) {
  constexpr int generations = 10'000;
  memory_jobs store(generations + 1, 1h, {.family = {.max_depth = generations, .max_children = 1}});
  std::vector<std::string> chain{*store.create("echo", t0, 1, t0 + 1h)};  // each delayed: held, nothing runs
  for (int i = 1; i < generations; ++i) {
    const std::optional<std::string> next = store.create("echo", t0, 1, t0 + 1h, 1h, never, chain.back());
    ASSERT_TRUE(next) << "generation " << i;
    chain.push_back(*next);
  }
  EXPECT_EQ(store.find(chain.back(), t0)->depth, static_cast<std::size_t>(generations - 1));
  struct args {
    memory_jobs* store;
    std::string root;
    std::optional<async_record> answer;
  } a{&store, chain.front(), std::nullopt};
  on_small_stack(
      [](void* p) {
        auto* x = static_cast<args*>(p);
        x->answer = x->store->cancel(x->root, t0 + 1s);
      },
      &a);
  ASSERT_TRUE(a.answer);
  EXPECT_EQ(a.answer->st, status::cancelled(cancel_cause::requested));
  for (int i = 1; i < generations; ++i) {
    const std::optional<async_record> r = store.find(chain[static_cast<std::size_t>(i)], t0 + 1s);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->st, status::cancelled(cancel_cause::parent)) << "generation " << i;
  }
}

// A cancel walks through the jobs it cancels or marks: a finished child's
// own children are not its parent's to stop (as in the fleet).
TEST(MemoryFamilies, ACancelDoesNotReachTheChildrenOfAFinishedChild) {
  memory_jobs store(100, 1h);
  const std::string root = *store.create("echo", t0);
  const std::string child = *store.create("echo", t0, 1, std::nullopt, 1h, never, root);
  const std::string grandchild = *store.create("echo", t0, 1, std::nullopt, 1h, never, child);
  store.finish(child, async_outcome{.st = status::ok()}, t0);
  ASSERT_TRUE(store.cancel(root, t0));
  EXPECT_TRUE(store.find(root, t0)->cancel_requested);
  const auto g = store.find(grandchild, t0);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->state, jobs::job_state::queued);
  EXPECT_FALSE(g->cancel_requested) << "its parent finished: not reached";
}

TEST(MemoryFamilies, AQueuedFamilyLeavesTheExecutorDeepestFirst) {
  manual_clock clk;
  executor_options eo;
  eo.manual_mode = true;
  eo.clock = &clk;
  executor ex(eo);
  memory_jobs store(10, 1h);
  const std::string parent = *store.create("fanout", clk.now());
  const std::string child = *store.create("echo", clk.now(), 1, std::nullopt, 1h, never, parent);
  const std::string grandchild = *store.create("echo", clk.now(), 1, std::nullopt, 1h, never, child);
  std::vector<std::string> ended;
  for (const std::string& id : {parent, child, grandchild}) {
    job_ref ref = ex.submit(
        job_options{}, [](const context&) { return 1; },
        [&, id](job_result<int>&& r) noexcept {
          ended.push_back(id);
          async_outcome o;
          o.st = r.st;
          store.finish(id, o, clk.now());
        });
    EXPECT_FALSE(store.submitted(id, ref).cancel_now);
  }
  (void)store.cancel(parent, clk.now());
  // A worker freed by an ancestor's cancel finds no descendant of it queued.
  EXPECT_EQ(ended, (std::vector<std::string>{grandchild, child, parent}));
  EXPECT_EQ(store.find(grandchild, clk.now())->st, status::cancelled(cancel_cause::parent));
  EXPECT_EQ(store.find(parent, clk.now())->st, status::cancelled(cancel_cause::requested));
  ex.run_pending();
  EXPECT_EQ(ended.size(), 3u) << "none ran";
}

TEST(MemoryFamilies, AParentOfTwentyThousandWakesAtItsLastChildsEnd) {
  constexpr std::size_t n = 20'000;
  memory_jobs store(n + 1, 1h, {.family = {.max_depth = 1, .max_children = n}});
  const std::string parent = *store.create("fanout", t0);
  (void)store.started(parent, t0);
  std::vector<std::string> children;
  for (std::size_t i = 0; i < n; ++i) children.push_back(*store.create("echo", t0, 1, std::nullopt, 1h, never, parent));
  EXPECT_FALSE(store.create("echo", t0, 1, std::nullopt, 1h, never, parent)) << "the bound holds at 20,000";
  fan_in all;
  all.until = fan_in::rule::all;
  ASSERT_EQ(store.wait_for_children(parent, all, time_point::max(), t0), memory_jobs::wait_verdict::waiting);
  async_outcome ok;
  ok.st = status::ok();
  for (std::size_t i = 0; i + 1 < n; ++i) store.finish(children[i], ok, t0);
  EXPECT_TRUE(store.take_woken().empty()) << "one child still runs";
  EXPECT_EQ(store.find(parent, t0)->children_done, n - 1);
  store.finish(children.back(), ok, t0);
  EXPECT_EQ(store.take_woken(), std::vector<std::string>{parent});
  EXPECT_EQ(store.find(parent, t0)->children_ok, n);
}

// The memory store's results add up to at most its bound: finishing a job
// past it forgets the oldest finished ones first, as a new job past the
// count bound does; jobs not finished are never forgotten for it.
TEST(MemoryResults, TheResultsHeldStayWithinTheirBytesOldestForgottenFirst) {
  memory_jobs store(100, 1h, {.max_result_bytes = 10'000});
  const auto finish_with = [&](const std::string& id, std::size_t bytes) {
    async_outcome o;
    o.st = status::ok();
    o.result.body = std::string(bytes, 'r');
    store.finish(id, std::move(o), t0);
  };
  const std::string running = *store.create("echo", t0);
  std::vector<std::string> done;
  for (int i = 0; i < 4; ++i) {
    done.push_back(*store.create("echo", t0));
    finish_with(done.back(), 3'000);
  }
  EXPECT_EQ(store.result_bytes(), 9'000u) << "the fourth pushed the first out";
  EXPECT_FALSE(store.find(done[0], t0)) << "the oldest result is forgotten";
  EXPECT_TRUE(store.find(done[1], t0));
  EXPECT_TRUE(store.find(running, t0)) << "an unfinished job holds no result and stays";
  const std::string big = *store.create("echo", t0);
  finish_with(big, 10'000);
  EXPECT_EQ(store.result_bytes(), 10'000u);
  EXPECT_TRUE(store.find(big, t0)) << "the newest stays, alone within the bound";
  EXPECT_FALSE(store.find(done[3], t0));
  EXPECT_EQ(store.result_bytes(), 10'000u);
  EXPECT_FALSE(store.find(big, t0 + 2h)) << "expired";
  EXPECT_EQ(store.result_bytes(), 0u) << "an expired record's bytes are given back";
}

// Ten thousand jobs delayed a month filled the store and every job that
// could start now was refused until they fell due. Delayed jobs and retries
// have a bound of their own.
TEST(MemoryScheduled, JobsDueLaterCannotRefuseWorkThatCouldStartNow) {
  memory_jobs store(3, 1h, {.max_scheduled = 2});
  const time_point month = t0 + 24h * 30;
  ASSERT_TRUE(store.create("echo", t0, 1, month));
  ASSERT_TRUE(store.create("echo", t0, 1, month));
  EXPECT_FALSE(store.create("echo", t0, 1, month)) << "the scheduled bound";
  std::vector<std::string> now;
  for (int i = 0; i < 3; ++i) {
    const std::optional<std::string> id = store.create("echo", t0);
    ASSERT_TRUE(id) << "a job that could start now, " << i << " of the count bound";
    now.push_back(*id);
  }
  EXPECT_FALSE(store.create("echo", t0)) << "the count bound, apart from the scheduled";
  // A retry is scheduled too: it gives back its place among the others...
  (void)store.started(now[0], t0);
  ASSERT_TRUE(store.retry_scheduled(now[0], {status::error(), "e", "m", 1ms}, t0 + 1s));
  EXPECT_TRUE(store.create("echo", t0)) << "the retrying job is counted with the scheduled";
  // ...and takes it again when due.
  ASSERT_TRUE(store.retry_due(now[0]));
  EXPECT_FALSE(store.create("echo", t0));
  async_outcome ok;
  ok.st = status::ok();
  store.finish(now[1], ok, t0);
  EXPECT_TRUE(store.create("echo", t0)) << "a finished job makes room, as before";
}

}  // namespace memory_families
}  // namespace hourglass::server::detail
