// Hedged calls over real HTTP (docs/guards.md, "Hedged calls"): one slow and
// one fast upstream; the hedge goes to the fast one after hedge_after_ms and
// wins, the slow one's job is cancelled (its metrics show it) and nothing
// completes late; a hedge that would get less than the minimum budget is
// skipped. Real clocks (three daemons), generous slack.
#include <gtest/gtest.h>

#include <chrono>

#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using steady = std::chrono::steady_clock;

// An upstream whose "work" takes `takes` (a cancellable sleep).
test_server upstream_taking(duration takes) {
  return test_server(test_options(), [takes](http_server& s) {
    s.add_handler("work", [takes](const context& ctx, const request_view&) {
      if (!ctx.sleep_for(takes)) ctx.check();
      return handler_result{"done", "text/plain"};
    });
  });
}

TEST(HttpServerHedge, TheFastUpstreamWinsAfterTheHedgeDelayAndTheSlowOneIsCancelled) {
  test_server slow = upstream_taking(std::chrono::seconds(5));
  test_server fast = upstream_taking(duration::zero());
  server_options o = test_options();
  o.upstreams = {{"slow", slow.url()}, {"fast", fast.url()}};
  test_server caller(o);
  client c(caller.port());

  const auto start = steady::now();
  const reply r = c.post("/v1/jobs/call",
                         R"({"upstreams": ["slow", "fast"], "handler": "work", "hedge_after_ms": 100})",
                         {{"Request-Timeout", "3S"}});
  const auto took = steady::now() - start;
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body, "done");
  EXPECT_GE(took, 100ms) << "the hedge waits for hedge_after_ms";
  EXPECT_LT(took, 1500ms) << "the answer came from the fast upstream, not the 5 s one";
  std::printf("[ hedge    ] answered in %.1f ms (hedge after 100 ms)\n",
              std::chrono::duration<double, std::milli>(took).count());

  // The loser's request was aborted: its callee saw the caller go and cancelled its job.
  ASSERT_TRUE(wait_until([&] { return slow.handler("work").finished_cancelled == 1; }));
  EXPECT_EQ(slow.handler("work").finished_ok, 0u);
  EXPECT_EQ(slow.handler("work").completed_late, 0u);
  EXPECT_EQ(fast.handler("work").finished_ok, 1u);
  const std::string m = c.get("/metrics").body;
  EXPECT_EQ(metric_value(m, R"(hourglass_hedges_total{outcome="won"})"), 1.0);
  EXPECT_EQ(metric_value(m, R"(hourglass_hedges_total{outcome="lost"})"), 0.0);
  EXPECT_EQ(metric_value(m, R"(hourglass_hedges_total{outcome="skipped"})"), 0.0);
  EXPECT_EQ(caller.handler("call").completed_late, 0u);
}

TEST(HttpServerHedge, AHedgeIsNotSentWithLessThanTheMinimumBudgetLeft) {
  test_server slow = upstream_taking(std::chrono::seconds(5));
  test_server fast = upstream_taking(duration::zero());
  server_options o = test_options();
  o.upstreams = {{"slow", slow.url()}, {"fast", fast.url()}};
  o.min_budget = 1000ms;   // the callee's minimum useful budget
  o.call_reserve = 500ms;  // so the first upstream's 504 comes well before our own deadline
  test_server caller(o);
  client c(caller.port());
  // At 1 s, 2000 - 1000 - 500 (reserve) = 500 ms would be left: below 1 s.
  const reply r = c.post("/v1/jobs/call",
                         R"({"upstreams": ["slow", "fast"], "handler": "work", "hedge_after_ms": 1000})",
                         {{"Request-Timeout", "2S"}});
  EXPECT_EQ(r.status, 504u) << r.body;
  EXPECT_EQ(json_string(r.body, "stage"), "downstream") << "the first upstream ran out of its budget";
  EXPECT_EQ(fast.handler("work").admitted, 0u) << "the hedge was never sent";
  EXPECT_EQ(metric_value(c.get("/metrics").body, R"(hourglass_hedges_total{outcome="skipped"})"), 1.0);
}

TEST(HttpServerHedge, BadHedgeInputIs400) {
  server_options o = test_options();
  o.upstreams = {{"a", "http://127.0.0.1:9"}, {"b", "http://127.0.0.1:9"}};
  test_server caller(o);
  client c(caller.port());
  for (const char* body : {R"({"upstreams": ["a", "b"], "handler": "work"})",
                           R"({"upstreams": [], "handler": "work", "hedge_after_ms": 10})",
                           R"({"upstreams": ["a", "nope"], "handler": "work", "hedge_after_ms": 10})",
                           R"({"upstreams": ["a", "b"], "handler": "work", "hedge_after_ms": -1})",
                           R"({"upstream": "a", "upstreams": ["b"], "handler": "work", "hedge_after_ms": 10})"}) {
    const reply r = c.post("/v1/jobs/call", body);
    EXPECT_EQ(r.status, 400u) << body << " -> " << r.body;
  }
}

}  // namespace
}  // namespace hourglass::server::testing
