// GET /v1/jobs's query, read without a socket: the filters it takes, the
// bounds of its limit, and a clear refusal of anything else.
#include "http/job_listing.hpp"

#include <gtest/gtest.h>

#include <string>

#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {
namespace {

list_request read_ok(std::string_view target) {
  auto r = read_list_query(target);
  if (const auto* e = std::get_if<list_query_error>(&r)) ADD_FAILURE() << target << ": " << e->message;
  return std::get_if<list_request>(&r) ? std::get<list_request>(r) : list_request{};
}

std::string refusal(std::string_view target) {
  auto r = read_list_query(target);
  const auto* e = std::get_if<list_query_error>(&r);
  return e ? e->message : "<read>";
}

TEST(ReadListQuery, NoQueryListsEveryJobAHundredAtATime) {
  const list_request q = read_ok("/v1/jobs");
  EXPECT_EQ(q.state, "");
  EXPECT_EQ(q.handler, "");
  EXPECT_EQ(q.cursor, "");
  EXPECT_EQ(q.limit, 100u);
}

TEST(ReadListQuery, EveryFilterDecoded) {
  const list_request q = read_ok("/v1/jobs?state=retrying&handler=resize.v2&cursor=1733400000123%3Aabc&limit=7");
  EXPECT_EQ(q.state, "retrying");
  EXPECT_EQ(q.handler, "resize.v2");
  EXPECT_EQ(q.cursor, "1733400000123:abc") << "percent-decoded";
  EXPECT_EQ(q.limit, 7u);
  for (const char* s :
       {"queued", "running", "scheduled", "ok", "error", "deadline_exceeded", "cancelled", "dead", "finished"}) {
    EXPECT_EQ(read_ok(std::string("/v1/jobs?state=") + s).state, s);
  }
  EXPECT_EQ(read_ok("/v1/jobs?limit=1000").limit, 1000u);
}

TEST(ReadListQuery, ATargetViewedInsideTheRequestLineEndsWhereTheViewEnds) {
  const std::string line = "GET /v1/jobs?limit=2&state=ok HTTP/1.1\r\n";
  const std::string_view target = std::string_view(line).substr(4, line.find(" HTTP") - 4);
  const list_request q = read_ok(target);
  EXPECT_EQ(q.state, "ok");
  EXPECT_EQ(q.limit, 2u);
}

TEST(ReadListQuery, AnythingElseIsRefusedWithAMessage) {
  EXPECT_NE(refusal("/v1/jobs?state=paused").find("state"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?state=").find("state"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?limit=0").find("limit"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?limit=1001").find("limit"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?limit=5x").find("limit"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?limit=-1").find("limit"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?handler=a%20b").find("handler"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?handler=" + std::string(65, 'h')).find("handler"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?cursor=a%0Ab").find("cursor"), std::string::npos);
  EXPECT_NE(refusal("/v1/jobs?sate=queued").find("unknown parameter sate"), std::string::npos)
      << "a misspelt filter must not list everything";
  EXPECT_NE(refusal("/v1/jobs?state=%zz").find("malformed"), std::string::npos);
}

TEST(JobPageJson, JobsAndANullCursorAtTheEnd) {
  job_page page;
  page.jobs.resize(2);
  page.jobs[0].id = "a";
  page.jobs[0].state = "queued";
  page.jobs[1].id = "b";
  page.jobs[1].state = "running";
  const auto doc = support::parse_json(job_page_json(page));
  ASSERT_TRUE(doc);
  ASSERT_EQ(doc->at("jobs").as_array().size(), 2u);
  EXPECT_EQ(doc->at("jobs").as_array()[1].at("id").as_string(), "b");
  EXPECT_TRUE(doc->at("next_cursor").is_null());
  page.next_cursor = "17-0";
  EXPECT_EQ(support::parse_json(job_page_json(page))->at("next_cursor").as_string(), "17-0");
}

}  // namespace
}  // namespace hourglass::server::detail
