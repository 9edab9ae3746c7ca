// Every row of the outcome table (docs/reference/outcomes.md, "HTTP status and
// body"), over real HTTP.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <thread>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

TEST(HttpServerOutcomes, OkIs200WithServerTiming) {
  test_server srv;
  const reply r = post(srv.port(), "/v1/jobs/echo", "hello",
                       {{"Request-Timeout", "2S"}, {"Content-Type", "text/plain"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.header("content-type"), "text/plain");
  EXPECT_NE(r.header("server-timing").find("queue;dur="), std::string::npos);
  EXPECT_NE(r.header("server-timing").find("run;dur="), std::string::npos);
  EXPECT_EQ(srv.handler("echo").finished_ok, 1u);
}

TEST(HttpServerOutcomes, HandlerErrorIs500AndBadInputIs400) {
  test_server srv(test_options(), [](http_server& s) {
    s.add_handler("boom", [](const context&, const request_view&) -> handler_result {
      throw std::runtime_error("secret internal detail");
    });
  });
  const reply e = post(srv.port(), "/v1/jobs/boom", "");
  ASSERT_TRUE(e.ok) << e.error;
  EXPECT_EQ(e.status, 500u);
  EXPECT_EQ(json_string(e.body, "outcome"), "error");
  EXPECT_EQ(e.body.find("secret"), std::string::npos) << "internal messages are logged, not sent";
  EXPECT_FALSE(e.header("server-timing").empty());

  const reply bad = post(srv.port(), "/v1/jobs/sleep", "not json");
  ASSERT_TRUE(bad.ok) << bad.error;
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(json_string(bad.body, "error"), "invalid_argument");
  EXPECT_EQ(json_string(bad.body, "outcome"), "error");
  EXPECT_EQ(srv.handler("boom").finished_error, 1u);
  EXPECT_EQ(srv.handler("sleep").finished_error, 1u);
}

TEST(HttpServerOutcomes, QueueFullIs503WithRetryAfter) {
  server_options o = test_options();
  o.workers = 1;
  o.queue_capacity = 1;
  o.drain_timeout = duration::zero();
  test_server srv(o);
  client running(srv.port()), waiting(srv.port());
  auto a = std::async(std::launch::async, [&] { return running.post("/v1/jobs/sleep", R"({"ms": 3000})"); });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  auto b = std::async(std::launch::async, [&] { return waiting.post("/v1/jobs/sleep", R"({"ms": 3000})"); });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().queue_depth == 1; }));

  const reply r = post(srv.port(), "/v1/jobs/sleep", R"({"ms": 1})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(json_string(r.body, "error"), "queue_full");
  EXPECT_EQ(json_string(r.body, "outcome"), "rejected");
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_EQ(srv.handler("sleep").rejected_queue_full, 1u);
  srv.get().drain();                // no grace: both jobs are cancelled, and both callers answered
  EXPECT_EQ(a.get().status, 503u);  // cancelled by the drain (cause shutdown)
  EXPECT_EQ(b.get().status, 503u);
}

TEST(HttpServerOutcomes, ShuttingDownIs503AndReadyzTurns503) {
  server_options o = test_options();
  o.drain_timeout = std::chrono::seconds(5);
  test_server srv(o);
  EXPECT_EQ(get(srv.port(), "/readyz").status, 200u);
  client running(srv.port());
  auto job = std::async(std::launch::async, [&] { return running.post("/v1/jobs/sleep", R"({"ms": 400})"); });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  auto drained = std::async(std::launch::async, [&] { srv.get().drain(); });
  ASSERT_TRUE(wait_until([&] { return !srv.get().ready(); }));

  const reply ready = get(srv.port(), "/readyz");
  EXPECT_EQ(ready.status, 503u);
  EXPECT_EQ(get(srv.port(), "/healthz").status, 200u);
  const reply r = post(srv.port(), "/v1/jobs/echo", "x");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(json_string(r.body, "error"), "shutting_down");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(job.get().status, 200u) << "a running job finishes inside the drain timeout";
  drained.get();
  EXPECT_EQ(srv.handler("echo").rejected_shutting_down, 1u);
}

// Regression: a zero budget was started and reported as run, where nothing
// may start with no budget left.
TEST(HttpServerOutcomes, AZeroBudgetIs504AtAdmission) {
  test_server srv;
  const reply r = post(srv.port(), "/v1/jobs/echo", "x", {{"Request-Timeout", "0n"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "stage"), "admission");
  const auto h = srv.handler("echo");
  EXPECT_EQ(h.admitted, 0u);
  EXPECT_EQ(h.rejected_insufficient_budget, 1u);
  EXPECT_EQ(h.finished_deadline_exceeded, 0u);
  EXPECT_EQ(h.completed_late, 0u);
}

TEST(HttpServerOutcomes, BelowMinimumBudgetIs504AtAdmission) {
  server_options o = test_options();
  o.min_budget = std::chrono::milliseconds(50);
  test_server srv(o);
  const reply r = post(srv.port(), "/v1/jobs/echo", "x", {{"Request-Timeout", "10m"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "error"), "deadline_exceeded");
  EXPECT_EQ(json_string(r.body, "stage"), "admission");
  EXPECT_NEAR(json_number(r.body, "budget_ms"), 10.0, 0.01);
  const auto h = srv.handler("echo");
  EXPECT_EQ(h.admitted, 0u);
  EXPECT_EQ(h.rejected_insufficient_budget, 1u);
}

TEST(HttpServerOutcomes, ExpiredInQueueIs504AtTheDeadlineAndNeverRuns) {
  server_options o = test_options();
  o.workers = 1;
  test_server srv(o);
  client blocker(srv.port());
  auto a = std::async(std::launch::async, [&] { return blocker.post("/v1/jobs/sleep", R"({"ms": 700})"); });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));

  const reply r = post(srv.port(), "/v1/jobs/echo", "x", {{"Request-Timeout", "150m"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "stage"), "queue");
  EXPECT_LT(r.elapsed_ms(), 150 + 400) << "answered at the deadline, not when a worker freed up";
  EXPECT_GE(r.elapsed_ms(), 140);
  EXPECT_EQ(a.get().status, 200u);
  ASSERT_TRUE(wait_until([&] { return srv.handler("echo").expired_queue == 1; }));
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u);
  EXPECT_EQ(srv.metrics().run_duration.count, 1u) << "only the blocker ran";
}

TEST(HttpServerOutcomes, DeadlineWhileRunningIs504AndTheJobIsCancelled) {
  test_server srv;
  const reply r = post(srv.port(), "/v1/jobs/sleep", R"({"ms": 10000})", {{"Request-Timeout", "100m"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "stage"), "run");
  EXPECT_LT(r.elapsed_ms(), 100 + 400);
  EXPECT_GE(json_number(r.body, "run_ms"), 0.0);
  // (A 504 may leave before the outcome is counted, when the worker is slow to stop.)
  EXPECT_TRUE(wait_until([&] { return srv.handler("sleep").expired_run == 1u; }));
  EXPECT_EQ(srv.handler("sleep").completed_late, 0u) << "a sleep stops at once: no wasted work";
}

TEST(HttpServerOutcomes, ADownstream504IsDeadlineExceededDownstream) {
  server_options bo = test_options();
  bo.max_budget = std::chrono::milliseconds(150);  // b clamps what it is given: it runs out first
  bo.default_budget = bo.max_budget;
  test_server b(bo);
  server_options ao = test_options();
  ao.upstreams["b"] = b.url();
  test_server a(ao);
  const reply r = post(a.port(), "/v1/jobs/call", R"({"upstream": "b", "handler": "sleep", "body": {"ms": 5000}})",
                       {{"Request-Timeout", "3S"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "stage"), "downstream");
  EXPECT_LT(r.elapsed_ms(), 1500);
  EXPECT_TRUE(wait_until([&] { return a.handler("call").finished_deadline_exceeded == 1u; }));
  EXPECT_TRUE(wait_until([&] { return b.handler("sleep").expired_run == 1u; }));
}

TEST(HttpServerOutcomes, DrainTimeoutCancelsRunningJobsWith503) {
  server_options o = test_options();
  o.drain_timeout = std::chrono::milliseconds(100);
  test_server srv(o);
  client c(srv.port());
  auto job = std::async(std::launch::async, [&] { return c.post("/v1/jobs/sleep", R"({"ms": 10000})"); });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  srv.get().drain();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  const reply r = job.get();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(json_string(r.body, "error"), "cancelled");
  EXPECT_EQ(json_string(r.body, "cause"), "shutdown");
  EXPECT_EQ(srv.handler("sleep").finished_cancelled, 1u);
}

TEST(HttpServerOutcomes, ClientDisconnectCancelsTheJob) {
  test_server srv;
  {
    raw_socket s(srv.port());
    ASSERT_TRUE(
        s.send("POST /v1/jobs/sleep HTTP/1.1\r\nHost: localhost\r\nRequest-Timeout: 30S\r\nContent-Length: 13\r\n\r\n"
               "{\"ms\": 10000}"));
    ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  }  // the caller goes away
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return srv.handler("sleep").finished_cancelled == 1; }, 3s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(srv.metrics().workers_busy, 0);
  EXPECT_EQ(srv.handler("sleep").finished_ok, 0u);
}

TEST(HttpServerOutcomes, ClientDisconnectWhileQueuedMeansNeverRun) {
  server_options o = test_options();
  o.workers = 1;
  test_server srv(o);
  client blocker(srv.port());
  auto a = std::async(std::launch::async, [&] { return blocker.post("/v1/jobs/sleep", R"({"ms": 500})"); });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  {
    raw_socket s(srv.port());
    ASSERT_TRUE(s.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\nx"));
    ASSERT_TRUE(wait_until([&] { return srv.metrics().queue_depth == 1; }));
  }
  ASSERT_TRUE(wait_until([&] { return srv.handler("echo").finished_cancelled == 1; }, 3s));
  EXPECT_EQ(a.get().status, 200u);
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u);
}

TEST(HttpServerOutcomes, FifoPolicyTurnsEveryDeadlineCheckOff) {
  server_options o = test_options();
  o.scheduling = policy::fifo;
  o.workers = 1;
  o.min_budget = std::chrono::seconds(2);
  test_server srv(o);
  // No admission by budget: 500 ms is below --min-budget, yet the job runs
  // (and has real-time slack to finish inside its deadline).
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "x", {{"Request-Timeout", "500m"}}).status, 200u);

  // No cancellation at the deadline: the sleep runs to its end, its result is
  // discarded, and it counts as completed late (wasted work).
  client blocker(srv.port());
  auto a = std::async(std::launch::async, [&] {
    return blocker.post("/v1/jobs/sleep", R"({"ms": 300})", {{"Request-Timeout", "100m"}});
  });
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  // No expiry at dequeue: a job that waited past its deadline still runs.
  const reply queued = post(srv.port(), "/v1/jobs/echo", "y", {{"Request-Timeout", "50m"}});
  const reply late = a.get();
  EXPECT_EQ(late.status, 504u);
  EXPECT_EQ(json_string(late.body, "stage"), "run");
  EXPECT_GE(late.elapsed_ms(), 290) << "not answered at the deadline";
  EXPECT_EQ(queued.status, 504u);
  EXPECT_GE(json_number(queued.body, "run_ms"), 0.0) << "it ran";
  EXPECT_EQ(srv.handler("sleep").completed_late, 1u);
  EXPECT_EQ(srv.handler("echo").completed_late, 1u);
  EXPECT_EQ(srv.handler("echo").expired_queue, 0u);
}

}  // namespace
}  // namespace hourglass::server::testing
