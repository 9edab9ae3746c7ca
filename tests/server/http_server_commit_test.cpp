// Commit points in the daemon (docs/guards.md, "Commit points"): a job that
// crossed one says "committed": true in its 504, its async state and its log
// line, so a caller that timed out knows to reconcile instead of assuming
// nothing happened; a job without the budget its commit needs never starts
// it. Over real HTTP on a manual clock.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>

#include "hourglass/clock.hpp"
#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

// Commits (needing 10 ms) and holds the commit until `release`; then checks
// its context like any handler.
struct committing_handler {
  std::latch started{1};
  std::latch release{1};
  std::atomic<int> commits{0};

  handler_fn fn() {
    return [this](const context& ctx, const request_view&) {
      ctx.commit(10ms, [this] {
        commits.fetch_add(1);
        started.count_down();
        release.wait();  // a slow durable write; nothing can interrupt it
      });
      ctx.check();
      return handler_result{"written", "text/plain"};
    };
  }
};

TEST(HttpServerCommit, A504SentWhileTheCommitRunsSaysCommittedAndTheCommitFinishes) {
  manual_clock clk;
  committing_handler h;
  test_server srv(
      test_options(), [&](http_server& s) { s.add_handler("transfer", h.fn()); }, clk);
  client c(srv.port());
  auto pending = std::async(std::launch::async, [&] {
    return c.post("/v1/jobs/transfer", "", {{"Request-Timeout", "100m"}});
  });
  h.started.wait();
  ASSERT_TRUE(clk.wait_for_timers(2));  // the session's deadline, the worker's watch
  clk.advance(100ms);                   // the deadline: the job runs on (it ignores its context while committing)
  ASSERT_TRUE(clk.wait_for_timers(1)) << "the grace is armed";
  clk.advance(100ms);
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  const reply r = pending.get();
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "stage"), "run");
  EXPECT_NE(r.body.find(R"("committed": true)"), std::string::npos) << r.body;

  h.release.count_down();  // the commit completes; the job then stops at its check
  ASSERT_TRUE(wait_until([&] { return srv.handler("transfer").expired_run == 1; }));
  EXPECT_EQ(h.commits.load(), 1);
  EXPECT_EQ(srv.handler("transfer").completed_late, 0u) << "it stopped after the commit, producing nothing";
}

TEST(HttpServerCommit, WithoutTheBudgetItNeedsTheCommitNeverStarts) {
  manual_clock clk;
  committing_handler h;
  h.release.count_down();
  test_server srv(
      test_options(), [&](http_server& s) { s.add_handler("transfer", h.fn()); }, clk);
  const reply r = post(srv.port(), "/v1/jobs/transfer", "", {{"Request-Timeout", "9m"}});  // needs 10 ms
  EXPECT_EQ(r.status, 504u) << r.body;
  EXPECT_EQ(json_string(r.body, "stage"), "run");
  EXPECT_EQ(r.body.find("committed"), std::string::npos) << "nothing was committed: " << r.body;
  EXPECT_EQ(h.commits.load(), 0);
}

TEST(HttpServerCommit, AnAsyncJobThatCommittedSaysSoInItsState) {
  committing_handler h;
  h.release.count_down();
  test_server srv(test_options(), [&](http_server& s) { s.add_handler("transfer", h.fn()); });
  client c(srv.port());
  const reply accepted = c.post("/v1/jobs/transfer", "", {{"Prefer", "respond-async"}});
  ASSERT_EQ(accepted.status, 202u) << accepted.body;
  const std::string loc = accepted.header("location");
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(loc).body, "state") == "ok"; }));
  EXPECT_NE(c.get(loc).body.find(R"("committed": true)"), std::string::npos) << c.get(loc).body;
}

}  // namespace
}  // namespace hourglass::server::testing
