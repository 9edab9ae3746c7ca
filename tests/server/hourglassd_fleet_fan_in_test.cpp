// Fan-in in fleet mode, on a real Redis and real time: a parent's wait for
// its children lives in the broker (state waiting, its worker free), the
// finish of the child that meets its rule puts it back on the stream, and
// its wake time (its deadline less its keep, on the broker's clock) ends
// the wait with what has finished, the rest stopped (cause parent). The
// wait is the broker's: the daemon that ran the parent may stop meanwhile.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "fan_in_family.hpp"
#include "fleet/redis_server.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;
using fleet::testing::redis_server;

server_options fan_in_daemon(const redis_server& redis, std::size_t workers, const std::string& consumer = "a") {
  server_options o = test_options();
  o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
  o.consumer = consumer;
  o.lease = 600ms;
  o.workers = workers;
  return o;
}

struct FleetFanIn : ::testing::Test {
  json::value job(std::uint16_t port, const std::string& id) { return job_object(port, id); }
  std::string state(std::uint16_t port, const std::string& id) { return job_state(port, id); }
  std::string start_waiting_parent(std::uint16_t port, const std::string& deadline) {
    const reply r = post(port, "/v1/jobs/gather", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", deadline}});
    EXPECT_EQ(r.status, 202u) << r.body;
    const std::string id = json_string(r.body, "id");
    EXPECT_TRUE(wait_until([&] { return g.working.load() == 3 && state(port, id) == "waiting"; }, 5s)) << job(port, id);
    return id;
  }

  redis_server redis;
  gatherers g;
};

TEST_F(FleetFanIn, AParentWaitsInTheBrokerHoldingNoWorkerAndResumesWhenItsChildrenFinish) {
  test_server a(fan_in_daemon(redis, 4), [this](http_server& s) { g.setup(s); });
  const std::string parent = start_waiting_parent(a.port(), "20S");
  EXPECT_EQ(a.get().jobs().busy(), 3u) << "the children's workers only: the parent holds none";
  const json::value waiting = job(a.port(), parent);
  EXPECT_EQ(waiting.at("waiting_for").as_string(), "all") << waiting;
  const double wake_in = waiting.at("wake_in_ms").to_number<double>();
  EXPECT_LE(wake_in, 19900.0) << "its deadline less its 100 ms minimum, on the broker's clock";
  EXPECT_GT(wake_in, 15000.0);

  g.release[0] = true;
  g.release[1] = true;
  ASSERT_TRUE(wait_until([&] { return g.working.load() == 1; }));
  EXPECT_EQ(state(a.port(), parent), "waiting") << "two of three: not yet";
  g.release[2] = true;
  ASSERT_TRUE(wait_until([&] { return state(a.port(), parent) == "ok"; }, 5s)) << job(a.port(), parent);
  const json::value done = job(a.port(), parent);
  EXPECT_EQ(done.at("result").as_string(), "children ok=r0 ok=r1 ok=r2");
  EXPECT_EQ(done.at("wakes").to_number<int>(), 1);
  EXPECT_EQ(done.at("woke_by").as_string(), "children");
  EXPECT_EQ(g.runs.load(), 2);
}

// Child 2 never finishes: 2 s after a 4 s parent keeping 2 s was sent, its
// wait ends with the two results it has, and child 2 is stopped through the
// fleet's cancel path (at its daemon's next renewal) rather than left to
// work for nobody until its own deadline. (Seconds, not less: before the
// wake, the parent runs, three children are taken and two finish, which a
// sanitizer's build on a loaded machine is slow to do.)
TEST_F(FleetFanIn, AtItsWakeTimeTheParentResumesWithThePartialResultsAndTheRestAreStopped) {
  g.rule.keep = 2s;
  test_server a(fan_in_daemon(redis, 4), [this](http_server& s) { g.setup(s); });
  const auto sent_at = std::chrono::steady_clock::now();
  const std::string parent = start_waiting_parent(a.port(), "4S");
  g.release[0] = true;
  g.release[1] = true;
  ASSERT_TRUE(wait_until([&] { return state(a.port(), parent) == "ok"; }, 8s)) << job(a.port(), parent);
  const auto resumed_after = std::chrono::steady_clock::now() - sent_at;
  EXPECT_GE(resumed_after, 1900ms) << "not before its wake time";
  // Child 2 was marked at the wake; its daemon stops it at its next renewal,
  // which may come before the resumed run reads it.
  const std::string result(job(a.port(), parent).at("result").as_string());
  EXPECT_TRUE(result == "deadline ok=r0 ok=r1 running" || result == "deadline ok=r0 ok=r1 cancelled") << result;
  const std::string slow = g.sent().at(2);
  ASSERT_TRUE(wait_until([&] { return state(a.port(), slow) == "cancelled"; }, 5s)) << job(a.port(), slow);
  EXPECT_EQ(job(a.port(), slow).at("cause").as_string(), "parent");
  EXPECT_LT(job(a.port(), slow).at("run_ms").to_number<double>(), 3900.0) << "stopped, not run to its deadline";
}

// One worker: the parent ran on it and waits in the broker; child 0 took
// the worker and holds it, children 1 and 2 queue behind it. At the wake
// time (3 s in) promote cancels the queued two and marks child 0, which its
// daemon stops at its next renewal: the resumed run gets the worker then,
// not when child 0 has worked on to its own deadline (5 s in).
TEST_F(FleetFanIn, OnOneWorkerTheWaitsEndStopsTheChildHoldingItSoTheResumedRunGetsIt) {
  g.rule.keep = 2s;
  test_server a(fan_in_daemon(redis, 1), [this](http_server& s) { g.setup(s); });
  const auto sent_at = std::chrono::steady_clock::now();
  const reply r = post(a.port(), "/v1/jobs/gather", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", "5S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string parent = json_string(r.body, "id");
  ASSERT_TRUE(wait_until([&] { return g.working.load() == 1 && state(a.port(), parent) == "waiting"; }, 5s))
      << job(a.port(), parent);
  ASSERT_TRUE(wait_until([&] { return state(a.port(), parent) == "ok"; }, 10s)) << job(a.port(), parent);
  const auto resumed_after = std::chrono::steady_clock::now() - sent_at;
  EXPECT_GE(resumed_after, 2900ms) << "not before its wake time";
  EXPECT_LT(resumed_after, 4500ms) << "the resumed run waited for child 0's deadline";
  EXPECT_EQ(job(a.port(), parent).at("result").as_string().subview().substr(0, 9), "deadline ")
      << job(a.port(), parent);
  for (const std::string& child : g.sent()) {
    ASSERT_TRUE(wait_until([&] { return state(a.port(), child) == "cancelled"; }, 5s)) << job(a.port(), child);
    EXPECT_EQ(job(a.port(), child).at("cause").as_string(), "parent");
  }
  EXPECT_TRUE(wait_until([&] { return a.handler("work").finished_cancelled == 3u; }))
      << "each child's end counted once by the daemon that recorded it: " << a.handler("work").finished_cancelled;
}

// One worker, first success: child 0 ends ok and its finish resumes the
// parent, in the same script, cancelling children 1 and 2 (queued behind
// it, never released): the resumed run gets the worker next, not after
// they have each worked on to their deadlines.
TEST_F(FleetFanIn, OnOneWorkerTheFinishThatEndsTheWaitCancelsTheQueuedSiblings) {
  g.rule = fan_in::first_success();
  test_server a(fan_in_daemon(redis, 1), [this](http_server& s) { g.setup(s); });
  const reply r = post(a.port(), "/v1/jobs/gather", "p", {{"Prefer", "respond-async"}, {"Job-Deadline", "20S"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string parent = json_string(r.body, "id");
  ASSERT_TRUE(wait_until([&] { return g.working.load() == 1 && state(a.port(), parent) == "waiting"; }, 5s))
      << job(a.port(), parent);
  g.release[0] = true;
  ASSERT_TRUE(wait_until([&] { return state(a.port(), parent) == "ok"; }, 5s)) << job(a.port(), parent);
  EXPECT_EQ(job(a.port(), parent).at("woke_by").as_string(), "children");
  const std::vector<std::string> sent = g.sent();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(state(a.port(), sent[0]), "ok");
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(state(a.port(), sent[i]), "cancelled") << job(a.port(), sent[i]);
    EXPECT_EQ(job(a.port(), sent[i]).at("cause").as_string(), "parent");
  }
  EXPECT_EQ(g.runs.load(), 2) << "the parent ran twice; no sibling ran";
  EXPECT_TRUE(wait_until([&] { return a.handler("work").finished_cancelled == 2u; }))
      << "the daemon whose finish cancelled them counts them: " << a.handler("work").finished_cancelled;
}

// The parent ran on daemon a, which stops while it waits (its children
// handed back and taken by b): b resumes it when the children finish.
TEST_F(FleetFanIn, TheWaitIsTheBrokersSoAnotherDaemonResumesIt) {
  auto a = std::make_unique<test_server>(fan_in_daemon(redis, 4, "a"), [this](http_server& s) { g.setup(s); });
  const std::uint16_t port_a = a->port();
  const std::string parent = start_waiting_parent(port_a, "20S");
  test_server b(fan_in_daemon(redis, 4, "b"), [this](http_server& s) { g.setup(s); });
  for (auto& r : g.release) r = true;  // a's children end as it stops; none is left to run
  a.reset();
  ASSERT_TRUE(wait_until([&] { return state(b.port(), parent) == "ok"; }, 10s)) << job(b.port(), parent);
  EXPECT_EQ(job(b.port(), parent).at("result").as_string(), "children ok=r0 ok=r1 ok=r2");
}

}  // namespace
}  // namespace hourglass::server::testing
