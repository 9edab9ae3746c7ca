// The daemon's deadline cases on a manual clock, over real HTTP: when the
// budget starts, the answer at a queued job's deadline, the stop of a running
// one, the grace for a handler that ignores its context, disconnects, the
// drain timeout, async freshness and TTL. Time moves only when a test calls
// advance(), so every time here is exact. The real-clock smoke tests of the
// same behaviours are in http_server_{budget,outcomes,async}_test.cpp.
//
// Synchronisation: before moving time a test waits for the server to reach
// the state it means (a metric, or `wait_for_timers(n)`: n timers pending on
// the clock). The timers of a sync job: the session's deadline (armed at
// submit), and once it runs its context's deadline; the sleep handler adds
// one while it sleeps.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <future>
#include <latch>

#include "hourglass/clock.hpp"
#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

server_options one_worker() {
  server_options o = test_options();
  o.workers = 1;
  return o;
}

TEST(HttpServerClock, TheBudgetStartsWhenTheHeadersArrive) {
  manual_clock clk;
  test_server srv(
      test_options(), [](http_server& s) { s.add_handler("report", report_handler()); }, clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(
      s.send("POST /v1/jobs/report HTTP/1.1\r\nHost: localhost\r\nRequest-Timeout: 600m\r\n"
             "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n"));
  // 100 Continue: the headers are in, the budget has started.
  ASSERT_NE(s.read_until("100 Continue\r\n\r\n", 5s).find("100 Continue"), std::string::npos);
  clk.advance(300ms);  // the body is late: that time is spent from the budget
  ASSERT_TRUE(s.send("body"));
  const std::string resp = s.read_until("}", 5s);
  ASSERT_NE(resp.find("200 OK"), std::string::npos) << resp;
  const auto body = resp.substr(resp.find("\r\n\r\n", resp.find("200 OK")) + 4);
  EXPECT_EQ(json_number(body, "budget_ms"), 600);
  EXPECT_EQ(json_number(body, "remaining_ms"), 300);
}

TEST(HttpServerClock, AQueuedJobIs504AtItsDeadlineExactlyAndNeverRuns) {
  manual_clock clk;
  test_server srv(one_worker(), {}, clk);
  client blocker_conn(srv.port()), c(srv.port());
  auto blocker = post_async(blocker_conn, "/v1/jobs/sleep", R"({"ms": 10000})", {{"Request-Timeout", "30S"}});
  ASSERT_TRUE(clk.wait_for_timers(3));  // its session deadline, its context's deadline, its sleep
  auto queued = post_async(c, "/v1/jobs/echo", "x", {{"Request-Timeout", "150m"}});
  ASSERT_TRUE(wait_until([&] { return srv.metrics().queue_depth == 1; }));
  ASSERT_TRUE(clk.wait_for_timers(4));  // + the queued call's session deadline

  const reply r = answered_exactly_after(clk, queued, 150ms);
  EXPECT_EQ(r.status, 504u);
  EXPECT_EQ(json_string(r.body, "stage"), "queue");
  EXPECT_EQ(json_number(r.body, "queued_ms"), 150) << r.body;
  EXPECT_EQ(json_number(r.body, "remaining_ms"), 0) << r.body;

  clk.advance(10s);  // the blocker wakes; the queued job is dequeued and dropped
  EXPECT_EQ(blocker.get().status, 200u);
  ASSERT_TRUE(wait_until([&] { return srv.handler("echo").expired_queue == 1; }));
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u);
  EXPECT_EQ(srv.metrics().run_duration.count, 1u) << "only the blocker ran";
}

TEST(HttpServerClock, ARunningJobIsStoppedAndAnswered504AtItsDeadline) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  client c(srv.port());
  auto r = post_async(c, "/v1/jobs/sleep", R"({"ms": 10000})", {{"Request-Timeout", "100m"}});
  ASSERT_TRUE(clk.wait_for_timers(3));  // session deadline, context deadline, sleep
  const reply rep = answered_exactly_after(clk, r, 100ms);
  EXPECT_EQ(rep.status, 504u);
  EXPECT_EQ(json_string(rep.body, "stage"), "run");
  EXPECT_EQ(json_number(rep.body, "run_ms"), 100) << rep.body;
  EXPECT_EQ(json_number(rep.body, "budget_ms"), 100) << rep.body;
  const auto h = srv.handler("sleep");
  EXPECT_EQ(h.expired_run, 1u);
  EXPECT_EQ(h.completed_late, 0u) << "the sleep stopped at its deadline: no wasted work";
}

TEST(HttpServerClock, AHandlerThatIgnoresItsDeadlineIsAnsweredAfterTheGrace) {
  manual_clock clk;
  std::latch release(1);
  test_server srv(
      test_options(),
      [&](http_server& s) {
        s.add_handler("stubborn", [&](const context&, const request_view&) {
          release.wait();  // never looks at its context
          return handler_result{"late\n", "text/plain"};
        });
      },
      clk);
  client c(srv.port());
  auto r = post_async(c, "/v1/jobs/stubborn", "", {{"Request-Timeout", "100m"}});
  ASSERT_TRUE(wait_until([&] { return srv.metrics().workers_busy == 1; }));
  ASSERT_TRUE(clk.wait_for_timers(2));  // session deadline, context deadline
  clk.advance(100ms);
  ASSERT_TRUE(clk.wait_for_timers(1)) << "the 100 ms grace is armed";
  const reply rep = answered_exactly_after(clk, r, 100ms);  // the grace
  EXPECT_EQ(rep.status, 504u);
  EXPECT_EQ(json_string(rep.body, "stage"), "run");
  EXPECT_EQ(json_number(rep.body, "remaining_ms"), 0);
  EXPECT_EQ(json_number(rep.body, "queued_ms"), 0) << rep.body;
  EXPECT_EQ(json_number(rep.body, "run_ms"), 200) << "running since it started: " << rep.body;
  EXPECT_EQ(rep.header("server-timing"), "queue;dur=0.000, run;dur=200.000");

  release.count_down();  // its own outcome still comes, and is counted as late
  ASSERT_TRUE(wait_until([&] { return srv.handler("stubborn").completed_late == 1; }));
  EXPECT_EQ(srv.handler("stubborn").expired_run, 1u);
}

TEST(HttpServerClock, ADisconnectCancelsARunningJobWithoutTimeMoving) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  {
    raw_socket s(srv.port());
    ASSERT_TRUE(
        s.send("POST /v1/jobs/sleep HTTP/1.1\r\nHost: localhost\r\nRequest-Timeout: 30S\r\nContent-Length: 13\r\n\r\n"
               "{\"ms\": 10000}"));
    ASSERT_TRUE(clk.wait_for_timers(3));
  }  // the caller goes away
  ASSERT_TRUE(wait_until([&] { return srv.handler("sleep").finished_cancelled == 1; }));
  EXPECT_EQ(srv.handler("sleep").finished_ok, 0u);
  EXPECT_EQ(srv.metrics().workers_busy, 0);
  EXPECT_EQ(clk.pending_timers(), 0u) << "the session's and the job's timers are gone with them";
}

TEST(HttpServerClock, ADisconnectWhileQueuedMeansNeverRun) {
  manual_clock clk;
  test_server srv(one_worker(), {}, clk);
  client blocker_conn(srv.port());
  auto blocker = post_async(blocker_conn, "/v1/jobs/sleep", R"({"ms": 500})");
  ASSERT_TRUE(clk.wait_for_timers(3));
  {
    raw_socket s(srv.port());
    ASSERT_TRUE(s.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\n\r\nx"));
    ASSERT_TRUE(wait_until([&] { return srv.metrics().queue_depth == 1; }));
  }
  ASSERT_TRUE(wait_until([&] { return srv.handler("echo").finished_cancelled == 1; }));
  clk.advance(500ms);
  EXPECT_EQ(blocker.get().status, 200u);
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u);
  EXPECT_EQ(srv.metrics().run_duration.count, 1u);
}

TEST(HttpServerClock, TheDrainTimeoutCancelsRunningJobsWith503) {
  manual_clock clk;
  server_options o = test_options();
  o.drain_timeout = 100ms;
  test_server srv(o, {}, clk);
  client c(srv.port());
  auto r = post_async(c, "/v1/jobs/sleep", R"({"ms": 10000})");
  ASSERT_TRUE(clk.wait_for_timers(3));
  auto drained = std::async(std::launch::async, [&] { srv.get().drain(); });
  ASSERT_TRUE(clk.wait_for_timers(4)) << "the drain deadline is armed";
  clk.advance(99ms);
  EXPECT_EQ(drained.wait_for(50ms), std::future_status::timeout) << "the job still has its drain time";
  clk.advance(1ms);
  const reply rep = r.get();
  EXPECT_EQ(rep.status, 503u);
  EXPECT_EQ(json_string(rep.body, "cause"), "shutdown");
  EXPECT_EQ(json_number(rep.body, "run_ms"), 100) << rep.body;
  ASSERT_EQ(drained.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(srv.handler("sleep").finished_cancelled, 1u);
}

const headers prefer_async_hdr = {{"Prefer", "respond-async"}};

std::string submit_async(client& c, const std::string& handler, const std::string& body,
                         headers hs = prefer_async_hdr) {
  const reply r = c.post("/v1/jobs/" + handler, body, hs);
  EXPECT_EQ(r.status, 202u) << r.body;
  return r.header("location");
}

TEST(HttpServerClock, AnAsyncJobPastItsFreshnessIsDroppedAtDequeue) {
  manual_clock clk;
  test_server srv(one_worker(), {}, clk);
  client c(srv.port());
  const std::string blocker = submit_async(c, "sleep", R"({"ms": 1000})");
  ASSERT_TRUE(clk.wait_for_timers(2));  // its run limit (the context's deadline), its sleep
  // A start needs the handler's minimum budget (--min-budget, 1 ms) left of
  // its freshness, as in a fleet.
  const std::string fresh = submit_async(c, "echo", "a", {{"Prefer", "respond-async"}, {"Job-Freshness", "1001m"}});
  const std::string stale = submit_async(c, "echo", "b", {{"Prefer", "respond-async"}, {"Job-Freshness", "1000m"}});
  clk.advance(1000ms);  // the blocker ends at the fresh job's last moment: it starts; the stale one does not
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(stale).body, "state") == "deadline_exceeded"; }));
  EXPECT_EQ(json_string(c.get(stale).body, "stage"), "queue");
  EXPECT_EQ(json_number(c.get(stale).body, "queued_ms"), 1000);
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(fresh).body, "state") == "ok"; }));
  EXPECT_EQ(srv.handler("echo").expired_queue, 1u);
  EXPECT_EQ(srv.handler("echo").finished_ok, 1u);

  // Their timelines, exact on this clock: where each one's time went.
  const auto events = [&](const std::string& loc) {
    return boost::json::parse(c.get(loc).body).at("timeline").as_array();
  };
  const auto fresh_t = events(fresh);
  ASSERT_EQ(fresh_t.size(), 3u) << fresh_t;
  EXPECT_EQ(fresh_t[0].at("event"), "accepted");
  EXPECT_EQ(fresh_t[0].at("freshness_ms").to_number<double>(), 1001);
  EXPECT_EQ(fresh_t[1].at("event"), "started");
  EXPECT_EQ(fresh_t[1].at("at_ms").to_number<double>(), 1000);
  EXPECT_EQ(fresh_t[1].at("waited_ms").to_number<double>(), 1000);
  EXPECT_EQ(fresh_t[1].at("freshness_left_ms").to_number<double>(), 1) << "it started with its minimum budget left";
  EXPECT_EQ(fresh_t[2].at("event"), "finished");
  EXPECT_EQ(fresh_t[2].at("state"), "ok");
  EXPECT_EQ(fresh_t[2].at("at_ms").to_number<double>(), 1000);
  const auto stale_t = events(stale);
  ASSERT_EQ(stale_t.size(), 2u) << "never started: " << stale_t;
  EXPECT_EQ(stale_t[1].at("event"), "finished");
  EXPECT_EQ(stale_t[1].at("stage"), "queue");
  EXPECT_EQ(stale_t[1].at("at_ms").to_number<double>(), 1000) << "it expired when a worker reached it";
}

TEST(HttpServerClock, AFinishedAsyncJobIsKeptForTheTtlExactly) {
  manual_clock clk;
  server_options o = test_options();
  o.async_ttl = 200ms;
  test_server srv(o, {}, clk);
  client c(srv.port());
  const std::string loc = submit_async(c, "echo", "x");
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(loc).body, "state") == "ok"; }));
  clk.advance(199ms);
  EXPECT_EQ(c.get(loc).status, 200u);
  EXPECT_EQ(json_number(c.get(loc).body, "age_ms"), 199);
  clk.advance(1ms);
  EXPECT_EQ(c.get(loc).status, 404u) << "kept for --async-ttl only";
}

}  // namespace
}  // namespace hourglass::server::testing
