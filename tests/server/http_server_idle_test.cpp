// The idle (progress) limit in the daemon, over real HTTP on a manual clock:
// Job-Idle-Timeout, a handler's own limit, the tighter of the two, progress
// keeping a job alive, async jobs, and the metrics by stage. The policy itself
// is tested exactly in tests/runtime/context_idle_test.cpp and
// tests/workers/executor_idle_test.cpp; here: that the daemon wires it.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "hourglass/clock.hpp"
#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

// Sleeps `steps` times for `step` on the context's clock, reporting progress
// after each sleep; `done` counts the sleeps finished.
handler_fn progressing_handler(duration step, int steps, std::atomic<int>& done) {
  return [step, steps, &done](const context& ctx, const request_view&) {
    for (int i = 0; i < steps; ++i) {
      if (!ctx.sleep_for(step)) ctx.check();
      ctx.progress();
      done.fetch_add(1);
    }
    return handler_result{"done", "text/plain"};
  };
}

// A daemon whose "steps" handler sleeps 80 ms three times, reporting progress
// after each, under an idle limit of its own of 100 ms.
test_server steps_server(manual_clock& clk, std::atomic<int>& done) {
  handler_options limited;
  limited.idle_limit = 100ms;
  return test_server(
      test_options(),
      [&done, limited](http_server& s) { s.add_handler("steps", progressing_handler(80ms, 3, done), limited); }, clk);
}

TEST(HttpServerIdle, ASilentJobIsStoppedAtItsIdleLimitWhileTheDeadlineIsFar) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  client c(srv.port());
  auto r = post_async(c, "/v1/jobs/sleep", R"({"ms": 10000})",
                      {{"Request-Timeout", "30S"}, {"Job-Idle-Timeout", "200m"}});
  // The session's deadline, the worker's watch, the context's idle timer, the sleep.
  ASSERT_TRUE(clk.wait_for_timers(4));
  const reply rep = answered_exactly_after(clk, r, 200ms);
  EXPECT_EQ(rep.status, 504u);
  EXPECT_EQ(json_string(rep.body, "error"), "deadline_exceeded") << rep.body;
  EXPECT_EQ(json_string(rep.body, "stage"), "idle") << rep.body;
  EXPECT_EQ(json_number(rep.body, "run_ms"), 200) << rep.body;
  const auto h = srv.handler("sleep");
  EXPECT_EQ(h.expired_idle, 1u);
  EXPECT_EQ(h.expired_run, 0u);
  EXPECT_EQ(h.completed_late, 0u);
  EXPECT_NE(c.get("/metrics").body.find(R"(hourglass_jobs_expired_total{handler="sleep",stage="idle"} 1)"),
            std::string::npos);
}

TEST(HttpServerIdle, ProgressKeepsAJobAliveAndTheHandlersLimitIsTheCeiling) {
  manual_clock clk;
  std::atomic<int> done{0};
  test_server srv = steps_server(clk, done);
  client c(srv.port());
  // The request asks for a looser limit: the handler's 100 ms still holds.
  auto r = post_async(c, "/v1/jobs/steps", "", {{"Request-Timeout", "30S"}, {"Job-Idle-Timeout", "1S"}});
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(wait_until([&] { return done.load() == i; })) << "step " << i;
    ASSERT_TRUE(clk.wait_for_timers(4)) << "step " << i;  // as above
    clk.advance(80ms);                                    // 240 ms in all, never 100 ms without progress
  }
  const reply rep = r.get();
  EXPECT_EQ(rep.status, 200u) << rep.body;
  EXPECT_EQ(rep.body, "done");
  EXPECT_EQ(srv.handler("steps").expired_idle, 0u);
}

TEST(HttpServerIdle, TheTighterLimitWinsWhetherItIsTheRequestsOrTheHandlers) {
  manual_clock clk;
  std::atomic<int> done{0};
  test_server srv = steps_server(clk, done);
  client c(srv.port());
  auto r = post_async(c, "/v1/jobs/steps", "", {{"Request-Timeout", "30S"}, {"Job-Idle-Timeout", "50m"}});
  ASSERT_TRUE(clk.wait_for_timers(4));
  const reply rep = answered_exactly_after(clk, r, 50ms);
  EXPECT_EQ(rep.status, 504u);
  EXPECT_EQ(json_string(rep.body, "stage"), "idle") << rep.body;
  EXPECT_EQ(done.load(), 0);
}

TEST(HttpServerIdle, AMalformedOrRepeatedIdleTimeoutIs400AndAdmitsNothing) {
  test_server srv(test_options());
  client c(srv.port());
  for (const headers& hs :
       {headers{{"Job-Idle-Timeout", "soon"}}, headers{{"Job-Idle-Timeout", "1S"}, {"Job-Idle-Timeout", "2S"}},
        headers{{"Job-Idle-Timeout", "123456789S"}}}) {
    const reply r = c.post("/v1/jobs/echo", "x", hs);
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_EQ(json_string(r.body, "error"), "invalid_timeout");
  }
  const reply bad = c.post("/v1/jobs/echo", "x", {{"Job-Idle-Timeout", "soon"}});
  EXPECT_NE(json_string(bad.body, "message").find("Job-Idle-Timeout"), std::string::npos) << bad.body;
  EXPECT_EQ(srv.handler("echo").admitted, 0u);
  EXPECT_EQ(srv.handler("echo").rejected_invalid_timeout, 4u);
}

TEST(HttpServerIdle, AnAsyncJobGetsItsIdleLimitToo) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  client c(srv.port());
  const reply accepted = c.post("/v1/jobs/sleep", R"({"ms": 10000})",
                                {{"Prefer", "respond-async"}, {"Job-Idle-Timeout", "300m"}});
  ASSERT_EQ(accepted.status, 202u) << accepted.body;
  const std::string loc = accepted.header("location");
  ASSERT_TRUE(clk.wait_for_timers(3));  // the worker's watch (the run limit), the idle timer, the sleep
  clk.advance(300ms);
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(loc).body, "state") == "deadline_exceeded"; }));
  EXPECT_EQ(json_string(c.get(loc).body, "stage"), "idle");
  EXPECT_EQ(srv.handler("sleep").expired_idle, 1u);
}

}  // namespace
}  // namespace hourglass::server::testing
