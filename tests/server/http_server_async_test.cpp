// Async jobs: Prefer: respond-async, 202 + Location, GET, DELETE, freshness,
// and the bounded store.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <future>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

const headers async_hdr = {{"Prefer", "respond-async"}};

std::string submit(client& c, const std::string& handler, const std::string& body, headers hs = async_hdr) {
  const reply r = c.post("/v1/jobs/" + handler, body, hs);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 202u) << r.body;
  const std::string loc = r.header("location");
  EXPECT_EQ(loc.rfind("/v1/jobs/", 0), 0u) << loc;
  EXPECT_EQ(json_string(r.body, "location"), loc);
  return loc;
}

std::string state_of(client& c, const std::string& loc) { return json_string(c.get(loc).body, "state"); }

TEST(HttpServerAsync, SubmitPollAndGetTheResult) {
  test_server srv;
  client c(srv.port());
  const std::string loc = submit(c, "sleep", R"({"ms": 150})");
  const std::string first = state_of(c, loc);
  EXPECT_TRUE(first == "queued" || first == "running") << first;
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "ok"; }));
  const reply r = c.get(loc);
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body.find(R"("result": "{\"slept_ms\": 150}\n")"), std::string::npos) << r.body;
  EXPECT_GE(json_number(r.body, "run_ms"), 140.0);
  EXPECT_FALSE(r.header("server-timing").empty());
}

TEST(HttpServerAsync, RespondAsyncAmongOtherPreferences) {
  test_server srv;
  client c(srv.port());
  const std::string loc = submit(c, "echo", "x", {{"Prefer", "return=minimal, respond-async; wait=5"}});
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "ok"; }));
  EXPECT_EQ(json_string(c.get(loc).body, "result"), "x");
}

TEST(HttpServerAsync, DeleteCancelsARunningJobAtOnce) {
  test_server srv;
  client c(srv.port());
  const std::string loc = submit(c, "sleep", R"({"ms": 10000})");
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "running"; }));
  const reply d = c.request("DELETE", loc);
  EXPECT_TRUE(d.status == 202u || d.status == 200u) << d.status;
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "cancelled"; }, 2s));
  const reply r = c.get(loc);
  EXPECT_EQ(json_string(r.body, "cause"), "requested");
  EXPECT_LT(json_number(r.body, "run_ms"), 2000.0);
  EXPECT_EQ(srv.handler("sleep").finished_cancelled, 1u);
}

TEST(HttpServerAsync, DeleteCancelsAQueuedJobThatThenNeverRuns) {
  manual_clock clk;  // the blocker runs until the test moves the clock
  server_options o = test_options();
  o.workers = 1;
  test_server srv(o, {}, clk);
  client c(srv.port());
  const std::string blocker = submit(c, "sleep", R"({"ms": 400})");
  ASSERT_TRUE(wait_until([&] { return state_of(c, blocker) == "running"; }));
  const std::string queued = submit(c, "echo", "x");
  EXPECT_EQ(state_of(c, queued), "queued");
  const reply d = c.request("DELETE", queued);
  EXPECT_EQ(d.status, 200u) << "a queued job is cancelled on the spot";
  EXPECT_EQ(json_string(d.body, "state"), "cancelled");
  ASSERT_TRUE(wait_until([&] {
    clk.advance(std::chrono::milliseconds(400));
    return state_of(c, blocker) == "ok";
  }));
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u);
}

TEST(HttpServerAsync, FreshnessExpiresAJobThatWaitedTooLong) {
  manual_clock clk;
  server_options o = test_options();
  o.workers = 1;
  test_server srv(o, {}, clk);
  client c(srv.port());
  const std::string blocker = submit(c, "sleep", R"({"ms": 400})");
  ASSERT_TRUE(wait_until([&] { return state_of(c, blocker) == "running"; }));
  const std::string stale = submit(c, "echo", "x", {{"Prefer", "respond-async"}, {"Job-Freshness", "100m"}});
  EXPECT_EQ(state_of(c, stale), "queued");
  // Time passes until the blocker is done (it may not be asleep yet when
  // the clock first moves); the echo job is then far past its freshness.
  ASSERT_TRUE(wait_until([&] {
    clk.advance(std::chrono::milliseconds(400));
    return state_of(c, blocker) == "ok";
  }));
  ASSERT_TRUE(wait_until([&] { return state_of(c, stale) == "deadline_exceeded"; }));
  EXPECT_EQ(json_string(c.get(stale).body, "stage"), "queue");
  EXPECT_EQ(srv.handler("echo").expired_queue, 1u);
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u);
}

TEST(HttpServerAsync, TheRunTimeIsBoundedByTheHandlerNotTheCaller) {
  manual_clock clk;
  test_server srv(
      test_options(),
      [](http_server& s) {
        s.add_handler(
            "slow",
            [](const context& ctx, const request_view&) {
              ctx.sleep_for(std::chrono::seconds(10));
              ctx.check();
              return handler_result{};
            },
            handler_options{std::chrono::milliseconds(150), std::nullopt});
      },
      clk);
  client c(srv.port());
  // A caller's tiny budget header does not bound an async job: only its freshness does.
  const std::string loc = submit(c, "slow", "", {{"Prefer", "respond-async"}, {"Request-Timeout", "1m"}});
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "running"; }));
  clk.advance(std::chrono::milliseconds(149));
  EXPECT_EQ(state_of(c, loc), "running") << "1 ms before its run limit";
  clk.advance(std::chrono::milliseconds(1));
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "deadline_exceeded"; }));
  const reply r = c.get(loc);
  EXPECT_EQ(json_string(r.body, "stage"), "run");
  EXPECT_EQ(json_number(r.body, "run_ms"), 150.0);
}

TEST(HttpServerAsync, UnknownIdsAre404AndFinishedJobsExpire) {
  manual_clock clk;
  server_options o = test_options();
  o.async_ttl = std::chrono::milliseconds(200);
  test_server srv(o, {}, clk);
  client c(srv.port());
  EXPECT_EQ(c.get("/v1/jobs/0123456789abcdef0123456789abcdef").status, 404u);
  EXPECT_EQ(c.request("DELETE", "/v1/jobs/nope").status, 404u);
  const std::string loc = submit(c, "echo", "x");
  ASSERT_TRUE(wait_until([&] { return state_of(c, loc) == "ok"; }));
  clk.advance(
      std::chrono::milliseconds(200));  // the exact edge: HttpServerClock.AFinishedAsyncJobIsKeptForTheTtlExactly
  EXPECT_EQ(c.get(loc).status, 404u) << "kept for --async-ttl only";
}

TEST(HttpServerAsync, TheStoreIsBounded) {
  server_options o = test_options();
  o.async_max_jobs = 2;
  o.drain_timeout = duration::zero();
  test_server srv(o);
  client c(srv.port());
  submit(c, "sleep", R"({"ms": 5000})");
  submit(c, "sleep", R"({"ms": 5000})");
  const reply r = c.post("/v1/jobs/sleep", R"({"ms": 1})", async_hdr);
  EXPECT_EQ(r.status, 503u);
  EXPECT_EQ(json_string(r.body, "error"), "queue_full");
  EXPECT_EQ(r.header("retry-after"), "1");
}

TEST(HttpServerAsync, AFinishedJobMakesRoomForANewOne) {
  server_options o = test_options();
  o.async_max_jobs = 1;
  test_server srv(o);
  client c(srv.port());
  const std::string first = submit(c, "echo", "1");
  ASSERT_TRUE(wait_until([&] { return state_of(c, first) == "ok"; }));
  submit(c, "echo", "2");  // evicts the oldest finished job
  EXPECT_EQ(c.get(first).status, 404u);
}

}  // namespace
}  // namespace hourglass::server::testing
