// Pausing a fleet's queue: one admin POST on any daemon, and every daemon
// stops taking jobs within a renewal period; waiting jobs keep ageing on the
// broker's clock, and those whose freshness runs out meanwhile end
// deadline_exceeded (stage queue) once the queue resumes; the rest run.
// Real daemons on a real Redis, on real time (renewals every 200 ms) with
// generous slack.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;
namespace json = boost::json;

struct FleetPause : ::testing::Test {
  server_options fleet_options(const std::string& consumer) {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = consumer;
    o.lease = 600ms;  // renewals every 200 ms
    o.workers = 2;
    o.admin_token_file = admin.path();
    return o;
  }
  std::string submit(std::uint16_t port, headers hs = {}) {
    hs.emplace_back("Prefer", "respond-async");
    const reply r = post(port, "/v1/jobs/echo", "x", hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }
  static double paused_gauge(test_server& s) {
    return metric_value(get(s.port(), "/metrics").body, "hourglass_fleet_paused");
  }
  static json::value queue(std::uint16_t port) {
    const auto doc = support::parse_json(get(port, "/v1/queues/default").body);
    return doc ? *doc : json::value();
  }

  redis_server redis;
  token_file admin{"adm1n-token-0123"};
  const headers as_admin{{"Authorization", "Bearer adm1n-token-0123"}};
};

TEST_F(FleetPause, APausedQueueRunsNothingAcrossTheFleetAndResumesWithItsStaleJobsExpired) {
  test_server a(fleet_options("a"));
  test_server b(fleet_options("b"));
  const std::string warm = submit(b.port());
  ASSERT_TRUE(wait_until([&] { return json_string(get(a.port(), "/v1/jobs/" + warm).body, "state") == "ok"; }));

  const auto asked = std::chrono::steady_clock::now();
  const reply paused = post(a.port(), "/v1/queues/default/pause", "", as_admin);
  ASSERT_EQ(paused.status, 200u) << paused.body;
  EXPECT_TRUE(support::parse_json(paused.body)->at("paused").as_bool());
  EXPECT_NE(paused.body.find("\"paused_since\""), std::string::npos);
  ASSERT_TRUE(wait_until([&] { return paused_gauge(a) == 1 && paused_gauge(b) == 1; }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 2s) << "within a renewal period (200 ms), with slack";
  // A read already blocking when the pause came may still deliver what arrives during it (at most 500 ms).
  wait_until([] { return false; }, 1000ms);

  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(submit(i % 2 ? a.port() : b.port()));
  const std::string stale = submit(a.port(), {{"Job-Freshness", "300m"}});
  wait_until([] { return false; }, 800ms);  // paused: a consumer would have taken them by now
  for (const std::string& id : ids) EXPECT_EQ(json_string(get(a.port(), "/v1/jobs/" + id).body, "state"), "queued");
  EXPECT_EQ(json_string(get(a.port(), "/v1/jobs/" + stale).body, "state"), "queued") << "waits, ageing";
  const json::value q = queue(b.port());
  ASSERT_TRUE(q.is_object());
  EXPECT_TRUE(q.at("paused").as_bool()) << "the same on every daemon";
  EXPECT_EQ(q.at("counts").at("queued").to_number<int>(), 4);
  EXPECT_GE(q.at("oldest_queued_age_ms").to_number<double>(), 700.0);
  EXPECT_EQ(q.at("live_slots").to_number<int>(), 4)
      << "both daemons' slots are live, only not reading: " << support::serialize_json(q);

  const reply resumed = post(b.port(), "/v1/queues/default/resume", "", as_admin);
  ASSERT_EQ(resumed.status, 200u) << resumed.body;
  EXPECT_FALSE(support::parse_json(resumed.body)->at("paused").as_bool());
  for (const std::string& id : ids) {
    EXPECT_TRUE(wait_until([&] { return json_string(get(a.port(), "/v1/jobs/" + id).body, "state") == "ok"; })) << id;
  }
  ASSERT_TRUE(
      wait_until([&] { return json_string(get(a.port(), "/v1/jobs/" + stale).body, "state") == "deadline_exceeded"; }));
  EXPECT_EQ(json_string(get(a.port(), "/v1/jobs/" + stale).body, "stage"), "queue") << "never run";
  EXPECT_TRUE(wait_until([&] { return paused_gauge(a) == 0 && paused_gauge(b) == 0; }));
}

TEST_F(FleetPause, AProducerThatRefusesWhilePausedAnswers503AndOneThatDoesNotQueues) {
  server_options strict = fleet_options("strict");
  strict.produce_only = true;
  strict.refuse_while_paused = true;
  test_server refusing(strict);
  server_options lax = fleet_options("lax");
  lax.produce_only = true;
  test_server queueing(lax);
  ASSERT_EQ(post(refusing.port(), "/v1/queues/default/pause", "", as_admin).status, 200u);

  const reply refused = post(refusing.port(), "/v1/jobs/echo", "x", {{"Prefer", "respond-async"}});
  EXPECT_EQ(refused.status, 503u) << refused.body;
  EXPECT_EQ(json_string(refused.body, "error"), "queue_paused");
  EXPECT_EQ(refused.header("retry-after"), "") << "a pause lasts as long as an operator wants: no hint";
  EXPECT_EQ(metric_value(get(refusing.port(), "/metrics").body,
                         R"(hourglass_jobs_rejected_total{handler="echo",reason="queue_paused"})"),
            1);
  const reply bulk = post(refusing.port(), "/v1/jobs:bulk", R"({"jobs": [{"handler": "echo", "payload": "a"}]})");
  EXPECT_NE(bulk.body.find("queue_paused"), std::string::npos) << bulk.body;
  EXPECT_EQ(queue(refusing.port()).at("counts").at("queued").to_number<int>(), 0) << "nothing of them queued";

  const std::string waiting = submit(queueing.port());  // without the flag: it waits for the resume
  EXPECT_EQ(queue(refusing.port()).at("counts").at("queued").to_number<int>(), 1);

  ASSERT_EQ(post(refusing.port(), "/v1/queues/default/resume", "", as_admin).status, 200u);
  // (no daemon here consumes: with a job waiting admission could promise no start)
  ASSERT_EQ(client(refusing.port()).request("DELETE", "/v1/jobs/" + waiting).status, 200u);
  submit(refusing.port());  // taken again at once: the broker's switch, read at each enqueue
}

}  // namespace
}  // namespace hourglass::server::testing
