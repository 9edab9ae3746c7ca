// The circuit breaker of the `call` handler, over real HTTP: an upstream that
// fails opens its breaker after --breaker-failures calls, the next calls fail
// at once (503 circuit_open, Retry-After) without reaching it, and once it has
// recovered the first call after --breaker-open (the probe) closes the breaker
// again. The caller's daemon runs on a manual clock, so the open period is
// exact; the upstream runs on the real clock, so its failures take real time
// and the fast failures can be told from them. The policy itself is tested
// exactly in tests/runtime/circuit_breaker_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "hourglass/clock.hpp"
#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using steady = std::chrono::steady_clock;

// While `failing`: holds the call until its deadline (a 504 stage run: the
// upstream had its budget and did not finish). Else answers at once.
struct flaky_upstream {
  std::atomic<bool> failing{true};
  std::atomic<int> calls{0};
  test_server srv{test_options(), [this](http_server& s) {
                    s.add_handler("flaky", [this](const context& ctx, const request_view&) {
                      calls.fetch_add(1);
                      if (failing.load()) {
                        ctx.sleep_for(std::chrono::minutes(1));
                        ctx.check();
                      }
                      return handler_result{"fine", "text/plain"};
                    });
                  }};
};

struct timed_reply {
  reply r;
  std::chrono::microseconds took;
};

timed_reply call_through(client& c) {
  const auto start = steady::now();
  reply r = c.post("/v1/jobs/call", R"({"upstream": "up", "handler": "flaky"})", {{"Request-Timeout", "300m"}});
  return {std::move(r), std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start)};
}

TEST(HttpServerBreaker, AFailingUpstreamIsCutOffAndAProbeBringsItBack) {
  flaky_upstream up;
  manual_clock clk;
  server_options o = test_options();
  o.upstreams = {{"up", up.srv.url()}};
  o.breaker_failures = 3;
  o.breaker_open = std::chrono::seconds(1);
  test_server caller(o, {}, clk);
  client c(caller.port());

  for (int i = 0; i < 3; ++i) {
    const timed_reply t = call_through(c);
    EXPECT_EQ(t.r.status, 504u) << t.r.body;
    EXPECT_EQ(json_string(t.r.body, "stage"), "downstream");
    EXPECT_GE(t.took, 250ms) << "the upstream held each call for its budget";
  }
  ASSERT_EQ(up.calls.load(), 3);
  EXPECT_EQ(metric_value(c.get("/metrics").body, R"(hourglass_circuit_state{upstream="up"})"), 2.0);

  // Open: failed at once, the upstream never sees it.
  for (int i = 0; i < 5; ++i) {
    const timed_reply t = call_through(c);
    EXPECT_EQ(t.r.status, 503u) << t.r.body;
    EXPECT_EQ(json_string(t.r.body, "error"), "circuit_open");
    EXPECT_EQ(json_string(t.r.body, "outcome"), "rejected");
    EXPECT_EQ(t.r.header("retry-after"), "1");
    EXPECT_LT(t.took, 250ms) << "fails fast: microseconds of work, not the upstream's 300 ms";
    std::printf("[ breaker  ] refused call answered in %lld us\n", static_cast<long long>(t.took.count()));
  }
  EXPECT_EQ(up.calls.load(), 3) << "an open breaker touches no upstream";

  // An async call meets the same breaker: accepted (it was admitted and ran), then rejected.
  const reply accepted = c.post("/v1/jobs/call", R"({"upstream": "up", "handler": "flaky"})",
                                {{"Prefer", "respond-async"}, {"Job-Freshness", "5S"}});
  ASSERT_EQ(accepted.status, 202u) << accepted.body;
  const std::string loc = accepted.header("location");
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(loc).body, "state") == "rejected"; })) << c.get(loc).body;
  EXPECT_EQ(json_string(c.get(loc).body, "reason"), "circuit_open");
  const std::string m = c.get("/metrics").body;
  EXPECT_EQ(metric_value(m, R"(hourglass_circuit_rejected_total{upstream="up"})"), 6.0);
  EXPECT_EQ(metric_value(m, R"(hourglass_jobs_finished_total{handler="call",outcome="rejected"})"), 6.0);
  EXPECT_EQ(metric_value(m, R"(hourglass_jobs_admitted_total{handler="call"})"), 9.0);

  // The upstream recovers; the breaker stays open for exactly --breaker-open.
  up.failing = false;
  clk.advance(999ms);
  EXPECT_EQ(call_through(c).r.status, 503u);
  clk.advance(1ms);
  const timed_reply probe = call_through(c);
  EXPECT_EQ(probe.r.status, 200u) << probe.r.body;
  EXPECT_EQ(probe.r.body, "fine");
  EXPECT_EQ(metric_value(c.get("/metrics").body, R"(hourglass_circuit_state{upstream="up"})"), 0.0);
  EXPECT_EQ(call_through(c).r.status, 200u) << "closed: calls flow again";
  EXPECT_EQ(up.calls.load(), 5);
}

TEST(HttpServerBreaker, AProbeThatFailsReopensForAWholePeriod) {
  flaky_upstream up;
  manual_clock clk;
  server_options o = test_options();
  o.upstreams = {{"up", up.srv.url()}};
  o.breaker_failures = 1;
  o.breaker_open = std::chrono::seconds(2);
  test_server caller(o, {}, clk);
  client c(caller.port());
  EXPECT_EQ(call_through(c).r.status, 504u);
  EXPECT_EQ(call_through(c).r.status, 503u);
  clk.advance(2s);
  EXPECT_EQ(call_through(c).r.status, 504u) << "the probe reaches the upstream, which still fails";
  EXPECT_EQ(up.calls.load(), 2);
  clk.advance(1999ms);
  EXPECT_EQ(call_through(c).r.status, 503u) << "open again, from the probe's failure";
  up.failing = false;
  clk.advance(1ms);
  EXPECT_EQ(call_through(c).r.status, 200u);
}

}  // namespace
}  // namespace hourglass::server::testing
