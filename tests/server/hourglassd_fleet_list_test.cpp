// GET /v1/jobs on a fleet: a daemon lists the jobs every daemon holds, each
// state walked along the index that holds it on the broker (the stream, the
// delayed set), so a job that stays in its state is listed exactly once
// while others are enqueued and cancelled between pages. A produce-only
// daemon with --policy fifo keeps every job queued (nothing consumes, and
// nothing is refused for want of a worker).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;
namespace json = boost::json;

struct FleetList : ::testing::Test {
  server_options front_options() {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = "front";
    o.produce_only = true;
    o.scheduling = policy::fifo;
    return o;
  }
  std::string submit(const std::string& handler, headers hs = {}) {
    hs.emplace_back("Prefer", "respond-async");
    const reply r = post(front.port(), "/v1/jobs/" + handler, "x", hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }
  // Every page of a walk, calling `between` after each.
  std::vector<std::string> walk(
      const std::string& filter, std::size_t limit, const std::function<void()>& between = [] {}) {
    std::vector<std::string> all;
    std::string cursor;
    for (int pages = 0; pages < 100; ++pages) {
      const reply r = get(front.port(), "/v1/jobs?" + filter + "&limit=" + std::to_string(limit) +
                                            (cursor.empty() ? "" : "&cursor=" + cursor));
      EXPECT_EQ(r.status, 200u) << r.body;
      const auto doc = support::parse_json(r.body);
      if (!doc) return all;
      for (const json::value& j : doc->at("jobs").as_array()) {
        all.emplace_back(j.at("id").as_string());
        EXPECT_EQ(j.at("state").as_string(), filter.find("scheduled") != std::string::npos ? "scheduled" : "queued");
      }
      between();
      if (!doc->at("next_cursor").is_string()) return all;
      cursor = doc->at("next_cursor").as_string();
    }
    ADD_FAILURE() << "the walk never ended";
    return all;
  }

  redis_server redis;
  test_server front{
      front_options(), [](http_server& s) {
        s.add_handler("count", [](const context&, const request_view&) { return handler_result{"ran", "text/plain"}; });
      }};
};

TEST_F(FleetList, QueuedJobsAreListedOnceEachWhileOthersComeAndGoBetweenPages) {
  std::vector<std::string> order, leaving;
  for (int i = 0; i < 8; ++i) {
    order.push_back(submit("count"));
    if (i % 2 == 1) leaving.push_back(order.back());
  }
  std::size_t step = 0;
  const std::vector<std::string> seen = walk("state=queued", 3, [&] {
    if (step < leaving.size()) {
      EXPECT_EQ(client(front.port()).request("DELETE", "/v1/jobs/" + leaving[step++]).status, 200u);
    }
    submit("count");
  });
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), seen.size()) << "no job twice";
  std::vector<std::string> stayed_in_order;
  for (std::size_t i = 0; i < order.size(); i += 2) {
    const auto at = std::find(seen.begin(), seen.end(), order[i]);
    EXPECT_NE(at, seen.end()) << order[i] << " stayed queued and was skipped";
    if (at != seen.end()) stayed_in_order.push_back(*at);
  }
  std::vector<std::string> seen_stayed;
  for (const std::string& id : seen) {
    if (std::find(stayed_in_order.begin(), stayed_in_order.end(), id) != stayed_in_order.end()) {
      seen_stayed.push_back(id);
    }
  }
  EXPECT_EQ(seen_stayed, stayed_in_order) << "in the order they were enqueued";
}

// Listings walked by SCAN read up to 10,000 keys each: a daemon starts at
// most --max-list-scans of them a second, a listing along an index is not
// counted. (Real time: a burst of requests well inside one second.)
TEST_F(FleetList, ListingsThatScanTheBrokerArePacedThoseAlongAnIndexAreNot) {
  server_options o = front_options();
  o.max_list_scans = 2;
  test_server paced(o);
  int ok = 0, refused = 0;
  for (int i = 0; i < 6; ++i) {
    const reply r = get(paced.port(), "/v1/jobs?state=ok");
    if (r.status == 429u) {
      ++refused;
      EXPECT_EQ(json_string(r.body, "error"), "too_many_listings");
      EXPECT_EQ(r.header("retry-after"), "1");
    } else {
      EXPECT_EQ(r.status, 200u) << r.body;
      ++ok;
    }
  }
  EXPECT_GE(ok, 2) << "a burst of --max-list-scans";
  EXPECT_GE(refused, 1) << "six within a second, two allowed (and one more if it took half a second)";
  for (int i = 0; i < 6; ++i) EXPECT_EQ(get(paced.port(), "/v1/jobs?state=queued").status, 200u) << "an index";
}

TEST_F(FleetList, ScheduledAndFinishedJobsAndAClearRefusalOfAForeignCursor) {
  const std::string later = submit("count", {{"Job-Delay", "60S"}});
  const std::string gone = submit("count");
  EXPECT_EQ(client(front.port()).request("DELETE", "/v1/jobs/" + gone).status, 200u);
  EXPECT_EQ(walk("state=scheduled", 10), std::vector<std::string>{later});
  EXPECT_NE(get(front.port(), "/v1/jobs?state=cancelled").body.find(gone), std::string::npos)
      << "finished jobs are walked by SCAN";
  EXPECT_EQ(get(front.port(), "/v1/jobs?state=finished").body.find(later), std::string::npos);
  const reply foreign = get(front.port(), "/v1/jobs?state=queued&cursor=1733400000123:" + later);
  EXPECT_EQ(foreign.status, 400u) << "a delayed set's cursor is no stream position";
  EXPECT_EQ(json_string(foreign.body, "error"), "invalid_cursor");
  // Numbers past what the broker takes were its errors, answered 503 as an outage.
  for (const std::string& q :
       std::vector<std::string>{"/v1/jobs?cursor=99999999999999999999999", "/v1/jobs?cursor=18446744073709551616",
                                "/v1/jobs?state=queued&cursor=99999999999999999999-0",
                                "/v1/jobs?state=scheduled&cursor=9007199254740993:" + later}) {
    const reply r = get(front.port(), q);
    EXPECT_EQ(r.status, 400u) << q << ": " << r.body;
    EXPECT_EQ(json_string(r.body, "error"), "invalid_cursor") << q;
  }
}

}  // namespace
}  // namespace hourglass::server::testing
