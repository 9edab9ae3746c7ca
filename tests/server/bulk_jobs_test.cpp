// POST /v1/jobs:bulk's body, read and answered without a socket: each job
// judged on its own, and only a body that is no list of jobs refused whole.
#include "http/bulk_jobs.hpp"

#include <gtest/gtest.h>

#include <string>

#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

TEST(ReadBulkBody, EveryFieldOfAJob) {
  const bulk_reading r = read_bulk_body(R"({"jobs": [
      {"handler": "echo", "payload": "hi", "content_type": "text/plain", "idempotency_key": "k-1",
       "freshness_ms": 2500},
      {"handler": "sleep", "payload": {"ms": 5}},
      {"handler": "echo"}]})");
  ASSERT_TRUE(r.ok) << r.message;
  ASSERT_EQ(r.items.size(), 3u);
  const bulk_item& a = r.items[0];
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.handler, "echo");
  EXPECT_EQ(a.payload, "hi");
  EXPECT_EQ(a.content_type, "text/plain");
  EXPECT_EQ(a.idempotency_key, "k-1");
  EXPECT_EQ(a.freshness, 2500ms);
  const bulk_item& b = r.items[1];
  EXPECT_EQ(b.payload, R"({"ms":5})") << "a JSON payload is sent as its JSON text";
  EXPECT_EQ(b.content_type, "application/json");
  EXPECT_FALSE(b.idempotency_key.has_value());
  EXPECT_FALSE(b.freshness.has_value()) << "the request's Job-Freshness applies";
  EXPECT_EQ(r.items[2].payload, "");
  EXPECT_EQ(r.items[2].content_type, "");
}

TEST(ReadBulkBody, ABadJobIsRefusedAloneAndTheOthersStay) {
  const bulk_reading r = read_bulk_body(R"({"jobs": [
      {"handler": "echo"}, 7, {"payload": "x"}, {"handler": ""}, {"handler": 3},
      {"handler": "echo", "freshness_ms": -1}, {"handler": "echo", "freshness_ms": 1.5},
      {"handler": "echo", "idempotency_key": 9}, {"handler": "echo", "content_type": null},
      {"handler": "echo", "priority": 1}, {"handler": "sleep"}]})");
  ASSERT_TRUE(r.ok) << r.message;
  ASSERT_EQ(r.items.size(), 11u);
  EXPECT_EQ(r.items.front().error, "");
  EXPECT_EQ(r.items.back().error, "");
  EXPECT_EQ(r.items.back().handler, "sleep");
  for (std::size_t i = 1; i + 1 < r.items.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(r.items[i].error, "invalid_job");
    EXPECT_FALSE(r.items[i].message.empty());
  }
  EXPECT_EQ(r.items[9].message, "unknown field \"priority\"") << "a misspelt field is not silently dropped";
}

TEST(ReadBulkBody, ABodyThatIsNoListOfJobsIsRefusedWhole) {
  for (const char* body : {"", "not json", "[]", R"({"jobs": {}})", R"({"job": []})", R"({"jobs": []})"}) {
    SCOPED_TRACE(body);
    const bulk_reading r = read_bulk_body(body);
    EXPECT_FALSE(r.ok);
    EXPECT_FALSE(r.message.empty());
    EXPECT_TRUE(r.items.empty());
  }
}

TEST(ReadBulkBody, AtMostMaxBulkJobs) {
  std::string body = R"({"jobs": [)";
  for (std::size_t i = 0; i < max_bulk_jobs; ++i) body += std::string(i ? "," : "") + R"({"handler": "echo"})";
  EXPECT_EQ(read_bulk_body(body + "]}").items.size(), max_bulk_jobs);
  const bulk_reading over = read_bulk_body(body + R"(, {"handler": "echo"}]})");
  EXPECT_FALSE(over.ok);
  EXPECT_EQ(over.message, "more than 1000 jobs in one request");
}

TEST(BulkResponseBody, EachAnswerInOrderAndWhetherAnyFailed) {
  const std::string all_in = bulk_response_body({{202, "{\"id\": \"a\"}\n"}, {202, "{\"id\": \"b\"}\n"}});
  EXPECT_EQ(all_in, R"({"errors": false, "jobs": [{"status": 202, "body": {"id": "a"}}, )"
                    R"({"status": 202, "body": {"id": "b"}}]})"
                    "\n");
  const std::string mixed = bulk_response_body({{202, "{\"id\": \"a\"}\n"}, {503, "{\"error\": \"queue_full\"}\n"}});
  const auto doc = support::parse_json(mixed);
  ASSERT_TRUE(doc.has_value()) << mixed;
  EXPECT_TRUE(doc->at("errors").as_bool());
  EXPECT_EQ(doc->at("jobs").at(1).at("status").as_int64(), 503);
  EXPECT_EQ(doc->at("jobs").at(1).at("body").at("error").as_string(), "queue_full");
}

}  // namespace
}  // namespace hourglass::server::detail
