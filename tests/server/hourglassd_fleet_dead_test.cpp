// The dead letter over HTTP on a fleet: list dead jobs, replay one (refused
// at admission while it cannot start in time, queued again when it can),
// delete one, purge the oldest; every action needs the admin token. A
// produce-only daemon runs nothing, so jobs stay where the test puts them;
// a job is dead-lettered here as start.lua does it (its workers dying
// max_deliveries times is the fleet-fault tests' part).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fleet_front.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using json_value = boost::json::value;

struct FleetDead : fleet_front {
  json_value job_json_of(const std::string& id) {
    const auto doc = support::parse_json(get(front.port(), "/v1/jobs/" + id).body);
    return doc ? *doc : json_value();
  }
};

TEST_F(FleetDead, AReplayIsRefusedWhileItCannotStartInTimeAndQueuedAgainWhenItCan) {
  const std::string id = submit();  // no backlog yet: admitted
  dead_letter(id);
  EXPECT_NE(get(front.port(), "/v1/jobs?state=dead").body.find(id), std::string::npos);
  const std::string ahead = submit();  // now a job waits, and no daemon serves the queue

  EXPECT_EQ(client(front.port()).request("POST", "/v1/jobs/" + id + "/replay").status, 401u) << "admin only";
  const reply refused = admin_call("POST", "/v1/jobs/" + id + "/replay");
  EXPECT_EQ(refused.status, 504u) << refused.body;
  EXPECT_EQ(json_string(refused.body, "stage"), "admission") << "never queued to expire";
  EXPECT_EQ(json_string(get(front.port(), "/v1/jobs/" + id).body, "state"), "dead");

  ASSERT_EQ(client(front.port()).request("DELETE", "/v1/jobs/" + ahead).status, 200u);  // the backlog gone
  const reply replayed = admin_call("POST", "/v1/jobs/" + id + "/replay");
  ASSERT_EQ(replayed.status, 202u) << replayed.body;
  EXPECT_EQ(json_string(replayed.body, "state"), "queued");
  EXPECT_EQ(replayed.header("location"), "/v1/jobs/" + id) << "the same job, again";
  EXPECT_EQ(json_string(get(front.port(), "/v1/jobs/" + id).body, "state"), "queued");
  EXPECT_EQ(get(front.port(), "/v1/jobs?state=dead").body.find(id), std::string::npos);
  EXPECT_NE(get(front.port(), "/v1/jobs?state=queued").body.find(id), std::string::npos);
  EXPECT_EQ(broker({"HGET", "hg:{default}:job:" + id, "payload"}).str, "keep me");
  const reply again = admin_call("POST", "/v1/jobs/" + id + "/replay");
  EXPECT_EQ(again.status, 409u);
  EXPECT_EQ(json_string(again.body, "error"), "not_dead");
}

// What a dead job was sent is the first thing an operator looks at: its
// job object shows it (bounded, as text), its listing only its size.
TEST_F(FleetDead, ADeadJobShowsWhatItWasSent) {
  const std::string id = submit();
  const json_value queued = job_json_of(id);
  EXPECT_EQ(queued.at("payload").at("text").as_string(), "keep me") << "while it waits, too";
  dead_letter(id);
  const json_value dead = job_json_of(id);
  ASSERT_EQ(dead.at("state").as_string(), "dead");
  EXPECT_EQ(dead.at("payload").at("text").as_string(), "keep me");
  EXPECT_EQ(dead.at("payload").at("bytes").to_number<int>(), 7);
  const std::string listed = get(front.port(), "/v1/jobs?state=dead").body;
  EXPECT_NE(listed.find("\"payload_bytes\": 7"), std::string::npos) << listed;
  EXPECT_EQ(listed.find("keep me"), std::string::npos) << "a listing carries sizes, not payloads";
}

TEST_F(FleetDead, DeleteOneAndPurgeTheOldestWithConfirmation) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(submit());
    dead_letter(ids.back());
  }
  const auto doc = support::parse_json(get(front.port(), "/v1/queues/default").body);
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->at("counts").at("dead").to_number<int>(), 4);

  const reply one = admin_call("DELETE", "/v1/queues/default/dead/" + ids[0]);
  EXPECT_EQ(one.status, 200u) << one.body;
  EXPECT_EQ(get(front.port(), "/v1/jobs/" + ids[0]).status, 404u);
  EXPECT_EQ(admin_call("DELETE", "/v1/queues/default/dead/" + ids[0]).status, 404u);

  const reply unconfirmed = admin_call("DELETE", "/v1/queues/default/dead?limit=2");
  EXPECT_EQ(unconfirmed.status, 400u);
  EXPECT_NE(json_string(unconfirmed.body, "message").find("confirm=yes"), std::string::npos);
  const reply purged = admin_call("DELETE", "/v1/queues/default/dead?limit=2&confirm=yes");
  ASSERT_EQ(purged.status, 200u) << purged.body;
  EXPECT_EQ(json_string(purged.body, "purged"), "") << purged.body;  // a number, not a string
  const auto p = support::parse_json(purged.body);
  EXPECT_EQ(p->at("purged").to_number<int>(), 2);
  EXPECT_EQ(p->at("left").to_number<int>(), 1);
  EXPECT_EQ(get(front.port(), "/v1/jobs/" + ids[1]).status, 404u) << "the oldest first";
  EXPECT_EQ(json_string(get(front.port(), "/v1/jobs/" + ids[3]).body, "state"), "dead");
  EXPECT_EQ(client(front.port()).request("DELETE", "/v1/queues/default/dead?confirm=yes").status, 401u);
}

TEST_F(FleetDead, ABulkReplayTakesTheOldestUntilAdmissionRefusesOne) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(submit());  // admitted while nothing waits
    dead_letter(ids.back());
  }
  EXPECT_EQ(admin_call("POST", "/v1/queues/default/dead/replay?limit=2").status, 400u) << "confirm=yes needed";
  EXPECT_EQ(client(front.port()).request("POST", "/v1/queues/default/dead/replay?confirm=yes").status, 401u);

  // No daemon serves the queue: the first replay is admitted (nothing
  // waits), the second then sees a backlog no live slot will take.
  const reply r = admin_call("POST", "/v1/queues/default/dead/replay?limit=3&confirm=yes");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto v = support::parse_json(r.body);
  EXPECT_EQ(v->at("replayed").to_number<int>(), 1) << r.body;
  EXPECT_TRUE(v->at("refused").as_bool()) << "stopped at the first refusal: " << r.body;
  EXPECT_EQ(v->at("left").to_number<int>(), 2);
  EXPECT_EQ(json_string(get(front.port(), "/v1/jobs/" + ids[0]).body, "state"), "queued") << "the oldest first";
  EXPECT_EQ(json_string(get(front.port(), "/v1/jobs/" + ids[1]).body, "state"), "dead") << "refused: unchanged";

  ASSERT_EQ(client(front.port()).request("DELETE", "/v1/jobs/" + ids[0]).status, 200u);  // the backlog gone
  const reply rest = admin_call("POST", "/v1/queues/default/dead/replay?limit=1&confirm=yes");
  ASSERT_EQ(rest.status, 200u) << rest.body;
  EXPECT_EQ(support::parse_json(rest.body)->at("replayed").to_number<int>(), 1) << "bounded by its limit";
  EXPECT_FALSE(support::parse_json(rest.body)->at("refused").as_bool());
  EXPECT_EQ(support::parse_json(rest.body)->at("left").to_number<int>(), 1);
}

}  // namespace
}  // namespace hourglass::server::testing
