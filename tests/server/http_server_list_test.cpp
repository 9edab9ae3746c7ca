// GET /v1/jobs in memory (no --broker): jobs by state and handler, a page
// at a time, each job listed once however the others move meanwhile; and a
// query that cannot be read is a 400 that says why. Due times are the
// manual clock's, so scheduled jobs stay scheduled for the whole test.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

struct listed_page {
  std::vector<std::string> ids;
  std::string next;  // "" at the end
};

struct HttpServerList : ::testing::Test {
  manual_clock clk;
  test_server srv{
      test_options(),
      [](http_server& s) {
        s.add_handler("count", [](const context&, const request_view&) { return handler_result{"ran", "text/plain"}; });
        s.add_handler("other", [](const context&, const request_view&) { return handler_result{"ran", "text/plain"}; });
      },
      clk};
  client c{srv.port()};

  std::string submit(const std::string& handler, headers hs = {}) {
    hs.emplace_back("Prefer", "respond-async");
    const reply r = c.post("/v1/jobs/" + handler, "x", hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }
  listed_page page(const std::string& query) {
    const reply r = c.get("/v1/jobs" + query);
    EXPECT_EQ(r.status, 200u) << query << ": " << r.body;
    EXPECT_EQ(r.header("cache-control"), "no-store");
    listed_page p;
    const auto doc = support::parse_json(r.body);
    if (!doc) return p;
    for (const json::value& j : doc->at("jobs").as_array()) p.ids.emplace_back(j.at("id").as_string());
    if (doc->at("next_cursor").is_string()) p.next = doc->at("next_cursor").as_string();
    return p;
  }
  // Every page of a walk, `limit` at a time, calling `between` after each page.
  std::vector<std::string> walk(
      const std::string& filter, std::size_t limit, const std::function<void()>& between = [] {}) {
    std::vector<std::string> all;
    std::string cursor;
    for (int pages = 0; pages < 100; ++pages) {
      const listed_page p = page("?" + filter + "&limit=" + std::to_string(limit) +
                                 (cursor.empty() ? "" : "&cursor=" + cursor));
      EXPECT_LE(p.ids.size(), limit);
      all.insert(all.end(), p.ids.begin(), p.ids.end());
      between();
      if (p.next.empty()) return all;
      cursor = p.next;
    }
    ADD_FAILURE() << "the walk never ended";
    return all;
  }
};

TEST_F(HttpServerList, JobsByStateAndHandlerEachListedOnce) {
  std::set<std::string> done, waiting, waiting_count;
  for (int i = 0; i < 5; ++i) done.insert(submit("count"));
  ASSERT_TRUE(wait_until([&] { return page("?state=ok").ids.size() == 5; })) << c.get("/v1/jobs").body;
  for (int i = 0; i < 3; ++i) {
    const std::string id = submit("count", {{"Job-Delay", "10S"}});
    waiting.insert(id);
    waiting_count.insert(id);
  }
  for (int i = 0; i < 2; ++i) waiting.insert(submit("other", {{"Job-Delay", "10S"}}));

  const std::vector<std::string> ok = walk("state=ok", 2);
  EXPECT_EQ(std::set<std::string>(ok.begin(), ok.end()), done);
  EXPECT_EQ(ok.size(), 5u) << "none twice";
  const std::vector<std::string> scheduled = walk("state=scheduled", 100);
  EXPECT_EQ(std::set<std::string>(scheduled.begin(), scheduled.end()), waiting);
  const std::vector<std::string> of_count = walk("state=scheduled&handler=count", 100);
  EXPECT_EQ(std::set<std::string>(of_count.begin(), of_count.end()), waiting_count);
  EXPECT_EQ(walk("state=finished", 100).size(), 5u);
  EXPECT_EQ(walk("state=retrying", 100).size(), 0u) << "a first attempt waiting is not a retry";
  EXPECT_EQ(walk("state=queued", 100).size(), 0u);
  EXPECT_EQ(walk("", 3).size(), 10u);

  // A page carries each result's size, never the result: GET of the job does.
  const auto listed = support::parse_json(c.get("/v1/jobs?state=ok&limit=1").body);
  ASSERT_TRUE(listed);
  const json::value& first = listed->at("jobs").as_array().at(0);
  EXPECT_EQ(first.at("result_bytes").to_number<int>(), 3) << first;
  EXPECT_FALSE(first.as_object().contains("result")) << first;
  EXPECT_EQ(json_string(c.get("/v1/jobs/" + std::string(first.at("id").as_string())).body, "result"), "ran");
}

TEST_F(HttpServerList, AJobThatStaysInItsStateIsListedOnceWhileOthersComeAndGo) {
  std::set<std::string> stayed;
  std::vector<std::string> leaving;
  for (int i = 0; i < 6; ++i) stayed.insert(submit("count", {{"Job-Delay", "10S"}}));
  for (int i = 0; i < 6; ++i) leaving.push_back(submit("count", {{"Job-Delay", "10S"}}));
  std::size_t step = 0;
  const std::vector<std::string> seen = walk("state=scheduled", 2, [&] {
    // between pages: one job leaves (cancelled), one arrives
    if (step < leaving.size()) {
      EXPECT_EQ(c.request("DELETE", "/v1/jobs/" + leaving[step++]).status, 200u);
    }
    submit("count", {{"Job-Delay", "10S"}});
  });
  const std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), seen.size()) << "no job twice";
  for (const std::string& id : stayed) {
    EXPECT_EQ(unique.count(id), 1u) << id << " stayed and was skipped";
  }
}

TEST_F(HttpServerList, AQueryThatCannotBeReadIsA400ThatSaysWhy) {
  const reply bad_state = c.get("/v1/jobs?state=paused");
  EXPECT_EQ(bad_state.status, 400u);
  EXPECT_EQ(json_string(bad_state.body, "error"), "invalid_query");
  EXPECT_NE(json_string(bad_state.body, "message").find("state"), std::string::npos);
  const reply bad_cursor = c.get("/v1/jobs?cursor=not-an-id");
  EXPECT_EQ(bad_cursor.status, 400u);
  EXPECT_EQ(json_string(bad_cursor.body, "error"), "invalid_cursor");
  const reply post = c.post("/v1/jobs", "x");
  EXPECT_EQ(post.status, 405u);
  EXPECT_EQ(post.header("allow"), "GET, HEAD");
}

}  // namespace
}  // namespace hourglass::server::testing
