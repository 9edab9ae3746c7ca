// GET /v1/queues in memory (no --broker): the daemon's one queue and its
// counts; the admin actions need --admin-token-file and its token, and the
// memory store says plainly that it cannot pause.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <string>

#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

struct HttpServerQueue : ::testing::Test {
  static server_options with_admin(const std::string& path) {
    server_options o = test_options();
    o.admin_token_file = path;
    return o;
  }
  manual_clock clk;
  token_file admin{"adm1n-token-0123"};
  test_server srv{
      with_admin(admin.path()),
      [](http_server& s) {
        s.add_handler("count", [](const context&, const request_view&) { return handler_result{"ran", "text/plain"}; });
      },
      clk};
  client c{srv.port()};
};

TEST_F(HttpServerQueue, TheDaemonsQueueWithItsCounts) {
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c.post("/v1/jobs/count", "x", {{"Prefer", "respond-async"}, {"Job-Delay", "10S"}}).status, 202u);
  }
  const reply all = c.get("/v1/queues");
  ASSERT_EQ(all.status, 200u) << all.body;
  EXPECT_EQ(all.header("cache-control"), "no-store");
  const auto doc = support::parse_json(all.body);
  ASSERT_TRUE(doc);
  ASSERT_EQ(doc->at("queues").as_array().size(), 1u);
  const json::value& q = doc->at("queues").as_array()[0];
  EXPECT_EQ(q.at("name").as_string(), "default");
  EXPECT_EQ(q.at("store").as_string(), "memory");
  EXPECT_FALSE(q.at("paused").as_bool());
  EXPECT_EQ(q.at("counts").at("scheduled").to_number<int>(), 2);
  EXPECT_EQ(q.at("counts").at("queued").to_number<int>(), 0);
  EXPECT_EQ(q.at("live_slots").to_number<int>(), static_cast<int>(test_options().workers));
  EXPECT_FALSE(q.as_object().contains("predicted_wait_ms")) << "the memory store predicts no wait of its own";

  const reply one = c.get("/v1/queues/default");
  EXPECT_EQ(one.status, 200u);
  EXPECT_EQ(json_string(one.body, "name"), "default");
  EXPECT_EQ(c.get("/v1/queues/other").status, 404u);
}

TEST_F(HttpServerQueue, PauseNeedsTheAdminTokenAndMemoryCannotPause) {
  EXPECT_EQ(c.post("/v1/queues/default/pause", "").status, 401u) << "no token";
  EXPECT_EQ(c.post("/v1/queues/default/pause", "", {{"Authorization", "Bearer wrong"}}).status, 401u);
  const reply r = c.post("/v1/queues/default/pause", "", {{"Authorization", "Bearer adm1n-token-0123"}});
  EXPECT_EQ(r.status, 409u) << r.body;
  EXPECT_EQ(json_string(r.body, "error"), "pause_unsupported");
  EXPECT_EQ(c.get("/v1/queues/default/pause").status, 405u);
  EXPECT_EQ(c.get("/v1/queues/default/pause").header("allow"), "POST");
  EXPECT_EQ(c.post("/v1/queues/default/drop", "", {{"Authorization", "Bearer adm1n-token-0123"}}).status, 404u);
}

TEST_F(HttpServerQueue, MemoryHasNoDeadLetterToReplayOrPurge) {
  const std::string id(32, 'a');
  const reply replay = c.post("/v1/jobs/" + id + "/replay", "", {{"Authorization", "Bearer adm1n-token-0123"}});
  EXPECT_EQ(replay.status, 409u) << replay.body;
  EXPECT_EQ(json_string(replay.body, "error"), "dead_letter_unsupported");
  EXPECT_EQ(c.post("/v1/jobs/" + id + "/replay", "").status, 401u) << "admin only";
  const reply purge = c.request("DELETE", "/v1/queues/default/dead?confirm=yes", "",
                                {{"Authorization", "Bearer adm1n-token-0123"}});
  EXPECT_EQ(purge.status, 409u);
  EXPECT_EQ(c.request("DELETE", "/v1/queues/default/dead", "", {{"Authorization", "Bearer adm1n-token-0123"}}).status,
            400u)
      << "no confirm=yes";
  EXPECT_EQ(c.get("/v1/jobs/" + id + "/replay").status, 405u);
  EXPECT_EQ(c.get("/v1/queues/default/dead").header("allow"), "DELETE");
}

// Both tokens set: the admin token reads what the access token reads, but
// submits nothing (it never reaches a handler or a job's record); the
// access token still cannot act as admin.
TEST(HttpServerQueueAdmin, TheAdminTokenAlsoReadsButSubmitsNothing) {
  token_file access{"acc3ss-token-0123"};
  token_file admin{"adm1n-token-0123"};
  server_options o = test_options();
  o.auth_token_file = access.path();
  o.admin_token_file = admin.path();
  test_server srv(o);
  EXPECT_EQ(get(srv.port(), "/v1/queues").status, 401u) << "no token";
  EXPECT_EQ(get(srv.port(), "/v1/queues", {{"Authorization", "Bearer wrong"}}).status, 401u);
  EXPECT_EQ(get(srv.port(), "/v1/queues", {{"Authorization", "Bearer acc3ss-token-0123"}}).status, 200u);
  EXPECT_EQ(get(srv.port(), "/v1/queues", {{"Authorization", "Bearer adm1n-token-0123"}}).status, 200u);
  EXPECT_EQ(get(srv.port(), "/metrics", {{"Authorization", "Bearer adm1n-token-0123"}}).status, 200u);
  const reply job = post(srv.port(), "/v1/jobs/echo", "hi", {{"Authorization", "Bearer acc3ss-token-0123"}});
  EXPECT_EQ(job.status, 200u) << job.body;
  EXPECT_EQ(job.body, "hi");
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "hi", {{"Authorization", "Bearer adm1n-token-0123"}}).status, 401u)
      << "a submit takes the access token only";
  const std::string id = json_string(post(srv.port(), "/v1/jobs/echo", "hi",
                                          {{"Authorization", "Bearer acc3ss-token-0123"}, {"Prefer", "respond-async"}})
                                         .body,
                                     "id");
  EXPECT_EQ(get(srv.port(), "/v1/jobs/" + id, {{"Authorization", "Bearer adm1n-token-0123"}}).status, 200u);
  EXPECT_EQ(
      client(srv.port()).request("DELETE", "/v1/jobs/" + id, "", {{"Authorization", "Bearer adm1n-token-0123"}}).status,
      401u)
      << "a cancel too";
  EXPECT_EQ(post(srv.port(), "/v1/queues/default/pause", "", {{"Authorization", "Bearer acc3ss-token-0123"}}).status,
            401u)
      << "the access token is not the admin's";
  EXPECT_EQ(post(srv.port(), "/v1/queues/default/pause", "", {{"Authorization", "Bearer adm1n-token-0123"}}).status,
            409u)
      << "admitted (memory cannot pause)";
}

TEST(HttpServerQueueAdmin, WithoutAnAdminTokenFileTheAdminActionsAreRefused) {
  test_server srv;
  const reply r = post(srv.port(), "/v1/queues/default/resume", "", {{"Authorization", "Bearer anything"}});
  EXPECT_EQ(r.status, 403u);
  EXPECT_EQ(json_string(r.body, "error"), "admin_disabled");
}

}  // namespace
}  // namespace hourglass::server::testing
