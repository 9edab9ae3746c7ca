// Delayed async jobs in memory (no --broker): Job-Delay and Job-Not-Before
// hold a job `scheduled` until its due time on the daemon's clock; its
// freshness counts from then; DELETE cancels it; a delay that leaves no
// time before Job-Deadline is refused at once. The manual clock decides
// every due time (Job-Not-Before's distance is read on the wall clock).
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "hourglass/support/json.hpp"
#include "hourglass/support/rfc3339.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

struct counted_handler {
  std::atomic<int> calls{0};
  handler_fn fn() {
    return [this](const context&, const request_view&) {
      calls.fetch_add(1);
      return handler_result{"ran", "text/plain"};
    };
  }
};

json::value delayed_job(client& c, const std::string& loc) {
  const auto doc = support::parse_json(c.get(loc).body);
  return doc ? *doc : json::value();
}
std::string delayed_state(client& c, const std::string& loc) {
  const json::value j = delayed_job(c, loc);
  return j.is_object() ? std::string(j.at("state").as_string()) : "";
}

struct HttpServerDelay : ::testing::Test {
  manual_clock clk;
  counted_handler h;
  test_server srv{test_options(), [this](http_server& s) { s.add_handler("count", h.fn()); }, clk};
  client c{srv.port()};

  reply submit(headers hs) {
    hs.emplace_back("Prefer", "respond-async");
    return c.post("/v1/jobs/count", "x", hs);
  }
};

TEST_F(HttpServerDelay, ADelayedJobWaitsScheduledAndItsFreshnessCountsFromItsDueTime) {
  // Fresh for 1 s, due in 2 s: counted from its arrival it would be stale.
  const reply r = submit({{"Job-Delay", "2S"}, {"Job-Freshness", "1S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  EXPECT_EQ(json_string(r.body, "state"), "scheduled");
  const std::string loc = r.header("location");
  const json::value waiting = delayed_job(c, loc);
  EXPECT_EQ(waiting.at("state").as_string(), "scheduled");
  EXPECT_EQ(waiting.at("due_in_ms").to_number<double>(), 2000.0);
  clk.advance(1999ms);
  EXPECT_EQ(delayed_state(c, loc), "scheduled");
  EXPECT_EQ(h.calls.load(), 0) << "nothing runs before its due time";
  clk.advance(1ms);
  ASSERT_TRUE(wait_until([&] { return delayed_state(c, loc) == "ok"; })) << c.get(loc).body;
  EXPECT_EQ(h.calls.load(), 1);
  EXPECT_EQ(json_string(c.get(loc).body, "result"), "ran");
}

// A job's object shows what it was sent while the store holds it, and its
// outcome drops it (the memory goes with the request).
TEST_F(HttpServerDelay, AWaitingJobShowsItsPayloadUntilItsOutcome) {
  const reply r = c.post("/v1/jobs/count", "<b>bold</b>",
                         {{"Prefer", "respond-async"}, {"Job-Delay", "2S"}, {"Content-Type", "text/html"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string loc = r.header("location");
  const json::value waiting = delayed_job(c, loc);
  ASSERT_TRUE(waiting.as_object().contains("payload")) << waiting;
  EXPECT_EQ(waiting.at("payload").at("text").as_string(), "<b>bold</b>");
  EXPECT_EQ(waiting.at("payload").at("content_type").as_string(), "text/html");
  EXPECT_EQ(waiting.at("payload").at("bytes").to_number<int>(), 11);
  EXPECT_NE(c.get("/v1/jobs?state=scheduled").body.find("\"payload_bytes\": 11"), std::string::npos);
  clk.advance(2s);
  ASSERT_TRUE(wait_until([&] { return delayed_state(c, loc) == "ok"; })) << c.get(loc).body;
  EXPECT_FALSE(delayed_job(c, loc).as_object().contains("payload")) << "dropped with its outcome";
}

TEST_F(HttpServerDelay, NotBeforeIsAWallClockTimeAndAPastOneMeansAtOnce) {
  const auto wall = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  const reply later = submit({{"Job-Not-Before", support::format_rfc3339(wall + std::chrono::seconds(30))}});
  ASSERT_EQ(later.status, 202u) << later.body;
  const std::string loc = later.header("location");
  const double due = delayed_job(c, loc).at("due_in_ms").to_number<double>();
  EXPECT_GT(due, 25000.0) << "30 s ahead, less the time this test took";
  EXPECT_LE(due, 30000.0);
  clk.advance(30s);
  ASSERT_TRUE(wait_until([&] { return delayed_state(c, loc) == "ok"; })) << c.get(loc).body;

  const reply past = submit({{"Job-Not-Before", "2020-01-01T00:00:00Z"}});
  ASSERT_EQ(past.status, 202u) << past.body;
  EXPECT_EQ(json_string(past.body, "state"), "queued");
  ASSERT_TRUE(wait_until([&] { return delayed_state(c, past.header("location")) == "ok"; }));
  EXPECT_EQ(h.calls.load(), 2);
}

TEST_F(HttpServerDelay, ADeleteCancelsADelayedJobAndADelayPastTheDeadlineIsRefusedAtOnce) {
  const reply r = submit({{"Job-Delay", "5S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const reply del = c.request("DELETE", r.header("location"));
  EXPECT_EQ(del.status, 200u) << del.body;
  EXPECT_EQ(json_string(del.body, "state"), "cancelled");
  clk.advance(10s);
  wait_until([] { return false; }, 100ms);  // a timer that wrongly ran it would have by now
  EXPECT_EQ(h.calls.load(), 0);
  EXPECT_EQ(delayed_state(c, r.header("location")), "cancelled");

  const reply too_late = submit({{"Job-Delay", "2S"}, {"Job-Deadline", "1S"}});
  EXPECT_EQ(too_late.status, 504u) << too_late.body;
  EXPECT_EQ(json_string(too_late.body, "stage"), "admission");
}

TEST_F(HttpServerDelay, AMalformedOrTooDistantDelayIs400) {
  const std::vector<headers> bad{
      {{"Job-Delay", "soon"}},
      {{"Job-Delay", "-5S"}},
      {{"Job-Delay", "1S"}, {"Job-Not-Before", "2030-01-01T00:00:00Z"}},
      {{"Job-Delay", "1S"}, {"Job-Delay", "2S"}},
      {{"Job-Not-Before", "tomorrow"}},
      {{"Job-Not-Before", "2030-01-01T00:00:00"}},
      {{"Job-Delay", "800H"}},  // past the default --max-delay of 30 days
      {{"Job-Not-Before", "2999-01-01T00:00:00Z"}},
  };
  for (const headers& hs : bad) {
    SCOPED_TRACE(hs.front().second);
    const reply r = submit(hs);
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_EQ(json_string(r.body, "error"), "invalid_delay");
  }
  EXPECT_EQ(h.calls.load(), 0);
}

}  // namespace
}  // namespace hourglass::server::testing
