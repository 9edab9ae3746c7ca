// Child jobs in fleet mode, on a real Redis and real time: a child carries
// what its parent had left as its whole deadline on the broker's clock, is
// written in its parent's shard, names its parent and is listed by it, and
// a DELETE of the parent (running: marked) reaches the running child through
// the fleet's cancel path, cause parent.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "child_family.hpp"
#include "fleet/redis_server.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;
using fleet::testing::redis_server;

// A daemon on `redis` with `workers`, renewing (and so bringing a DELETE's
// marks) every 200 ms.
server_options on(const redis_server& redis, std::size_t workers, std::size_t shards = 1) {
  server_options o = test_options();
  o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
  o.consumer = "a";
  o.lease = 600ms;
  o.workers = workers;
  o.queue_shards = shards;
  return o;
}

TEST(FleetChildren, AChildCarriesItsParentsBudgetInItsShardAndTheParentsCancelStopsIt) {
  redis_server redis;
  family f;
  // One slot per shard, and the third where the work is: parent and child share a shard.
  test_server a(on(redis, 3, 2), [&f](http_server& s) { f.setup(s); });
  const auto job = [&](const std::string& id) {
    const auto doc = support::parse_json(get(a.port(), "/v1/jobs/" + id).body);
    return doc ? *doc : json::value();
  };
  const auto state = [&](const std::string& id) {
    const json::value j = job(id);
    return j.is_object() ? std::string(j.at("state").as_string()) : "";
  };

  const reply r = post(a.port(), "/v1/jobs/parent", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", "2S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string parent = json_string(r.body, "id");
  ASSERT_TRUE(wait_until([&] { return state(parent) == "running"; }));
  f.go = true;
  const std::vector<child_answer> sent = f.sent(1);
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].verdict, child_answer::kind::accepted) << sent[0].message;
  // Asked 10 s: carries the parent's 2 s less what it has run and the 5 ms reserve.
  EXPECT_LE(sent[0].deadline, 1995ms);
  EXPECT_GT(sent[0].deadline, 1000ms);
  EXPECT_EQ(sent[0].id.substr(30), parent.substr(30)) << "written in its parent's shard";

  const json::value child = job(sent[0].id);
  ASSERT_TRUE(child.is_object()) << sent[0].id;
  EXPECT_EQ(child.at("parent").as_string(), parent);
  const double deadline_at =
      child.at("timeline").as_array().at(0).at("deadline_at_ms").to_number<double>();  // on the broker's clock
  EXPECT_LE(deadline_at, 1995.0) << child;
  EXPECT_GT(deadline_at, 1000.0) << child;
  const json::value p = job(parent);
  ASSERT_TRUE(p.as_object().contains("children")) << p;
  ASSERT_EQ(p.at("children").as_array().size(), 1u) << p;
  EXPECT_EQ(p.at("children").as_array().at(0).as_string(), sent[0].id);

  // Both run; DELETE the parent: each is stopped at its daemon's next renewal.
  ASSERT_TRUE(wait_until([&] { return f.holding.load() == 2; }));
  const reply d = client(a.port()).request("DELETE", "/v1/jobs/" + parent);
  EXPECT_EQ(d.status, 202u) << d.body;
  ASSERT_TRUE(wait_until([&] { return state(parent) == "cancelled" && state(sent[0].id) == "cancelled"; }, 5s))
      << job(parent) << job(sent[0].id);
  EXPECT_EQ(json_string(get(a.port(), "/v1/jobs/" + parent).body, "cause"), "requested");
  EXPECT_EQ(json_string(get(a.port(), "/v1/jobs/" + sent[0].id).body, "cause"), "parent");
}

// Job-Parent from a caller outside: the enqueue script cuts the child's
// whole deadline to the parent's on the broker's clock, links them, and
// refuses a child of a job it does not hold (400) or that has finished (409).
TEST(FleetChildren, JobParentIsJudgedByTheEnqueueScriptOnTheBrokersClock) {
  redis_server redis;
  family f;
  test_server a(on(redis, 2), [&f](http_server& s) { f.setup(s); });
  const reply r = post(a.port(), "/v1/jobs/parent", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", "2S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string parent = json_string(r.body, "id");

  const reply c = post(a.port(), "/v1/jobs/echo", "x",
                       {{"Prefer", "respond-async"}, {"Job-Parent", parent}, {"Job-Deadline", "1M"}});
  ASSERT_EQ(c.status, 202u) << c.body;
  const std::string child = json_string(c.body, "id");
  const auto doc = support::parse_json(get(a.port(), "/v1/jobs/" + child).body);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->at("parent").as_string(), parent);
  const double deadline_at = doc->at("timeline").as_array().at(0).at("deadline_at_ms").to_number<double>();
  EXPECT_LE(deadline_at, 1995.0) << "cut from a minute to what the parent has left";
  EXPECT_GT(deadline_at, 1000.0);

  const reply unknown = post(a.port(), "/v1/jobs/echo", "x",
                             {{"Prefer", "respond-async"}, {"Job-Parent", std::string(32, 'b')}});
  EXPECT_EQ(unknown.status, 400u) << unknown.body;
  EXPECT_EQ(json_string(unknown.body, "error"), "invalid_parent");
  // Running (a loaded machine may not have started it yet): the DELETE marks it.
  ASSERT_TRUE(wait_until([&] { return json_string(get(a.port(), "/v1/jobs/" + parent).body, "state") == "running"; }));
  f.go = true;
  ASSERT_EQ(client(a.port()).request("DELETE", "/v1/jobs/" + parent).status, 202u);
  ASSERT_TRUE(
      wait_until([&] { return json_string(get(a.port(), "/v1/jobs/" + parent).body, "state") == "cancelled"; }));
  const reply late = post(a.port(), "/v1/jobs/echo", "x", {{"Prefer", "respond-async"}, {"Job-Parent", parent}});
  EXPECT_EQ(late.status, 409u) << late.body;
  EXPECT_EQ(json_string(late.body, "error"), "parent_finished");
}

// The child's deadline lives on the broker: a parent with 5 s enqueues a
// child asking 30 s (Job-Parent); the daemon running the child is killed
// with kill -9, another reclaims it and stops it at the parent's deadline
// less the reserve, stage run: never the 30 s it asked, nor its 60 s sleep.
// (5 s: before it, two daemons start, one runs the child and dies, and the
// other waits out the 1 s lease; a sanitizer's build on a loaded machine
// takes seconds for that.)
TEST(FleetChildren, AChildKeepsItsParentsDeadlineAcrossAKill9OfTheDaemonRunningIt) {
  redis_server redis;
  test_server a(on(redis, 1));  // runs the parent, its one worker busy throughout
  const auto args = [&](const std::string& consumer) {
    return std::vector<std::string>{
        "--listen",   "127.0.0.1:0", "--broker",        "redis://127.0.0.1:" + std::to_string(redis.port()),
        "--consumer", consumer,      "--lease",         "1s",
        "--workers",  "1",           "--drain-timeout", "100ms"};
  };
  const auto state_of = [&](const std::string& id) { return get(a.port(), "/v1/jobs/" + id).body; };
  const auto began = std::chrono::steady_clock::now();
  const reply r = post(a.port(), "/v1/jobs/sleep", R"({"ms": 60000})",
                       {{"Prefer", "respond-async"}, {"Job-Deadline", "5S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string parent = json_string(r.body, "id");
  ASSERT_TRUE(wait_until([&] { return json_string(state_of(parent), "state") == "running"; }));

  daemon_process b(args("b"));
  ASSERT_NE(b.wait_for_port(), 0u) << b.output();
  const reply c = post(a.port(), "/v1/jobs/sleep", R"({"ms": 60000})",
                       {{"Prefer", "respond-async"}, {"Job-Parent", parent}, {"Job-Deadline", "30S"}});
  ASSERT_EQ(c.status, 202u) << c.body;
  const std::string child = json_string(c.body, "id");
  ASSERT_TRUE(wait_until([&] {
    const std::string j = state_of(child);
    return json_string(j, "state") == "running" && json_string(j, "consumer") == "b";
  })) << state_of(child);
  daemon_process d(args("d"));  // started first: it cannot reclaim the child while b renews its lease
  ASSERT_NE(d.wait_for_port(), 0u) << d.output();
  b.signal(SIGKILL);
  b.wait_exit(5s);

  std::string done;
  ASSERT_TRUE(wait_until(
      [&] {
        done = state_of(child);
        return json_string(done, "state") == "deadline_exceeded";
      },
      20s))
      << done << d.output();
  const auto ended = std::chrono::steady_clock::now() - began;
  EXPECT_EQ(json_string(done, "stage"), "run") << done;
  EXPECT_EQ(json_number(done, "deliveries"), 2.0) << "reclaimed after its daemon died";
  EXPECT_EQ(json_string(done, "consumer"), "d");
  const auto doc = support::parse_json(done);
  ASSERT_TRUE(doc.has_value());
  EXPECT_LE(doc->at("timeline").as_array().at(0).at("deadline_at_ms").to_number<double>(), 4995.0) << done;
  EXPECT_LT(ended, 20s) << "stopped at its parent's deadline, not the 30 s it asked";
  EXPECT_TRUE(wait_until([&] { return json_string(state_of(parent), "state") == "deadline_exceeded"; }));
}

// The enqueue script holds a family within --max-children and
// --max-job-depth: past either, 409 and nothing written; the root's DELETE
// ends the whole family.
TEST(FleetChildren, AChildPastEitherBoundIsA409) {
  redis_server redis;
  server_options o = on(redis, 1);
  o.max_children = 2;
  o.max_job_depth = 2;
  test_server a(o);
  family_bounds_hold(a.port());
}

}  // namespace
}  // namespace hourglass::server::testing
