// POST /v1/jobs:bulk on the in-process job store: many async jobs in one
// request, each admitted and answered on its own. (The fleet's bulk, one
// script call at the broker: hourglassd_fleet_test.cpp.)
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

// The bulk answer's jobs: each one's status and body.
std::vector<std::pair<unsigned, json::value>> answers_of(const reply& r) {
  std::vector<std::pair<unsigned, json::value>> out;
  const auto doc = support::parse_json(r.body);
  EXPECT_TRUE(doc.has_value()) << r.body;
  if (!doc) return out;
  for (const json::value& j : doc->at("jobs").as_array()) {
    out.emplace_back(static_cast<unsigned>(j.at("status").to_number<int>()), j.at("body"));
  }
  return out;
}

std::string state_at_location(client& c, const std::string& loc) { return json_string(c.get(loc).body, "state"); }

TEST(HttpServerBulk, EachJobIsAnsweredOnItsOwnInOrderAndRuns) {
  test_server srv;
  client c(srv.port());
  const reply r = c.post("/v1/jobs:bulk", R"({"jobs": [
      {"handler": "echo", "payload": "one", "content_type": "text/plain"},
      {"handler": "nope"},
      {"handler": "echo", "payload": {"n": 2}},
      {"handler": "echo", "freshness_ms": "soon"},
      {"handler": "echo", "payload": "three"}]})",
                         {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_NE(r.body.find("\"errors\": true"), std::string::npos) << r.body;
  const auto a = answers_of(r);
  ASSERT_EQ(a.size(), 5u) << r.body;
  EXPECT_EQ(a[0].first, 202u);
  EXPECT_EQ(a[1].first, 404u);
  EXPECT_EQ(a[1].second.at("error").as_string(), "not_found");
  EXPECT_EQ(a[2].first, 202u);
  EXPECT_EQ(a[3].first, 400u);
  EXPECT_EQ(a[3].second.at("error").as_string(), "invalid_job");
  EXPECT_EQ(a[4].first, 202u);
  const std::string want[] = {"one", "", R"({"n":2})", "", "three"};
  for (const std::size_t i : {0u, 2u, 4u}) {
    SCOPED_TRACE(i);
    const std::string loc(a[i].second.at("location").as_string());
    ASSERT_TRUE(wait_until([&] { return state_at_location(c, loc) == "ok"; }));
    const reply job = c.get(loc);
    EXPECT_EQ(json_string(job.body, "result"), want[i]);
    EXPECT_EQ(json_string(job.body, "handler"), "echo");
  }
  EXPECT_EQ(json_string(c.get(std::string(a[0].second.at("location").as_string())).body, "content_type"), "text/plain");
  EXPECT_EQ(json_string(c.get(std::string(a[2].second.at("location").as_string())).body, "content_type"),
            "application/json");
  EXPECT_EQ(srv.handler("echo").finished_ok, 3u);
}

TEST(HttpServerBulk, EachJobKeepsItsOwnFreshness) {
  manual_clock clk;
  server_options o = test_options();
  o.workers = 1;
  test_server srv(o, {}, clk);
  client c(srv.port());
  // The one worker is busy until the clock moves; the request's Job-Freshness
  // (10 s) applies to the job that states none.
  const reply r = c.post("/v1/jobs:bulk", R"({"jobs": [
      {"handler": "sleep", "payload": {"ms": 400}},
      {"handler": "echo", "payload": "stale", "freshness_ms": 100},
      {"handler": "echo", "payload": "fresh"}]})",
                         {{"Job-Freshness", "10S"}});
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto a = answers_of(r);
  ASSERT_EQ(a.size(), 3u);
  std::vector<std::string> loc;
  for (const auto& [status, body] : a) {
    ASSERT_EQ(status, 202u) << r.body;
    loc.emplace_back(body.at("location").as_string());
  }
  ASSERT_TRUE(wait_until([&] { return state_at_location(c, loc[0]) == "running"; }));
  ASSERT_TRUE(wait_until([&] {
    clk.advance(std::chrono::milliseconds(400));
    return state_at_location(c, loc[0]) == "ok";
  }));
  ASSERT_TRUE(wait_until([&] { return state_at_location(c, loc[1]) == "deadline_exceeded"; }));
  EXPECT_EQ(json_string(c.get(loc[1]).body, "stage"), "queue");
  ASSERT_TRUE(wait_until([&] { return state_at_location(c, loc[2]) == "ok"; }));
  EXPECT_EQ(json_string(c.get(loc[2]).body, "result"), "fresh");
}

TEST(HttpServerBulk, ABodyThatIsNoListOfJobsIsRefusedWhole) {
  test_server srv;
  client c(srv.port());
  for (const char* body : {"[", R"({"jobs": []})", R"({"jobs": "echo"})"}) {
    SCOPED_TRACE(body);
    const reply r = c.post("/v1/jobs:bulk", body);
    EXPECT_EQ(r.status, 400u);
    EXPECT_EQ(json_string(r.body, "error"), "invalid_bulk");
  }
  const reply bad_header = c.post("/v1/jobs:bulk", R"({"jobs": [{"handler": "echo"}]})", {{"Job-Freshness", "x"}});
  EXPECT_EQ(bad_header.status, 400u);
  EXPECT_EQ(json_string(bad_header.body, "error"), "invalid_timeout");
  const reply get = c.get("/v1/jobs:bulk");
  EXPECT_EQ(get.status, 405u);
  EXPECT_EQ(get.header("allow"), "POST");
  EXPECT_EQ(srv.handler("echo").finished_ok, 0u) << "nothing was taken";
}

TEST(HttpServerBulk, ABadJobTermIsBookedForEachJobAsAJobPostedAloneIs) {
  test_server srv;
  client c(srv.port());
  const headers bad{{"Prefer", "respond-async"}, {"Job-Attempts", "0"}};
  EXPECT_EQ(c.post("/v1/jobs/echo", "x", bad).status, 400u);
  EXPECT_EQ(srv.handler("echo").rejected_invalid_timeout, 1u) << "a job posted alone: refused, booked as invalid";
  const reply r = c.post("/v1/jobs:bulk", R"({"jobs": [{"handler": "echo"}, {"handler": "echo"}]})", bad);
  ASSERT_EQ(r.status, 200u) << r.body;
  for (const auto& [status, body] : answers_of(r)) {
    EXPECT_EQ(status, 400u);
    EXPECT_EQ(body.at("error").as_string(), "invalid_retry_policy");
  }
  EXPECT_EQ(srv.handler("echo").rejected_invalid_timeout, 3u) << "each job of the bulk request, booked as one alone";
  EXPECT_EQ(srv.handler("echo").admitted, 0u);
}

}  // namespace
}  // namespace hourglass::server::testing
