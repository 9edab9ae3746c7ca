// hourglassd --broker: async jobs through a real redis-server, shared by
// several daemons (docs/fleet.md). In-process daemons for the
// API; the hourglassd binary for kill -9 and SIGTERM.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <csignal>
#include <string>
#include <utility>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;

struct FleetDaemon : ::testing::Test {
  server_options fleet_options(const std::string& consumer) {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = consumer;
    o.lease = 600ms;  // renewals every 200 ms
    o.workers = 2;
    return o;
  }
  std::vector<std::string> daemon_args(const std::string& consumer) {
    return {"--listen",   "127.0.0.1:0", "--broker",        "redis://127.0.0.1:" + std::to_string(redis.port()),
            "--consumer", consumer,      "--lease",         "1s",
            "--workers",  "1",           "--drain-timeout", "100ms"};
  }
  std::string submit(std::uint16_t port, const std::string& handler, const std::string& body, headers hs = {}) {
    hs.emplace_back("Prefer", "respond-async");
    const reply r = post(port, "/v1/jobs/" + handler, body, hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }
  // Submits a sleep of `ms` to an in-process daemon and waits until it runs; its id.
  std::string running_on_server(test_server& s, int ms) {
    const std::string id = submit(s.port(), "sleep", "{\"ms\": " + std::to_string(ms) + "}");
    wait_state(s.port(), id, "running");
    return id;
  }
  // Submits a sleep of `ms` to a daemon process and waits until it runs there; its id.
  std::string running_on(daemon_process& d, std::uint16_t port, int ms) {
    EXPECT_NE(port, 0) << d.output();
    const std::string id = submit(port, "sleep", "{\"ms\": " + std::to_string(ms) + "}");
    wait_state(port, id, "running");
    return id;
  }

  redis_server redis;
};

TEST_F(FleetDaemon, AnAsyncJobGoesThroughTheBrokerAndEveryDaemonAnswersForIt) {
  test_server a(fleet_options("a"));
  test_server b(fleet_options("b"));
  const reply r = post(a.port(), "/v1/jobs/echo", "hello", {{"Prefer", "respond-async"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string id = json_string(r.body, "id");
  EXPECT_EQ(r.header("location"), "/v1/jobs/" + id);
  const std::string done = wait_state(b.port(), id, "ok");
  EXPECT_EQ(json_string(done, "result"), "hello") << done;
  EXPECT_EQ(get(a.port(), "/v1/jobs/" + id).body, done) << "the same record from every daemon";
  EXPECT_EQ(get(a.port(), "/v1/jobs/00000000000000000000000000000000").status, 404u);
  const std::string metrics = get(a.port(), "/metrics").body;
  EXPECT_NE(metrics.find("hourglass_fleet_backlog "), std::string::npos);
  EXPECT_NE(metrics.find("hourglass_fleet_duplicate_outcomes_total 0"), std::string::npos);
  EXPECT_NE(metrics.find("hourglass_fleet_broker_errors_total{op=\"enqueue\"} 0"), std::string::npos);
}

TEST_F(FleetDaemon, AJobsTimelineIsReadOnTheBrokersClock) {
  server_options o = fleet_options("solo");
  o.workers = 1;
  test_server a(o);
  submit(a.port(), "sleep", R"({"ms": 2000})");
  const std::string id = submit(a.port(), "echo", "x", {{"Job-Freshness", "30S"}});  // waits for the sleep
  const std::string done = wait_state(a.port(), id, "ok");
  const auto t = boost::json::parse(done).at("timeline").as_array();
  ASSERT_EQ(t.size(), 3u) << done;
  EXPECT_EQ(t[0].at("event"), "accepted");
  const double freshness = t[0].at("freshness_ms").to_number<double>();  // what was left of it at the broker
  EXPECT_LE(freshness, 30'000);
  EXPECT_GT(freshness, 29'000);
  EXPECT_EQ(t[1].at("event"), "started");
  const double waited = t[1].at("waited_ms").to_number<double>();
  EXPECT_GE(waited, 1000) << "behind the 2 s sleep, on the broker's clock: " << done;
  EXPECT_LT(waited, 10'000) << done;
  EXPECT_EQ(t[1].at("at_ms").to_number<double>(), waited);
  EXPECT_EQ(t[1].at("freshness_left_ms").to_number<double>(), freshness - waited);
  EXPECT_EQ(t[1].at("delivery").to_number<double>(), 1);
  EXPECT_EQ(t[1].at("consumer"), "solo");
  EXPECT_EQ(t[2].at("event"), "finished");
  EXPECT_EQ(t[2].at("state"), "ok");
  EXPECT_GE(t[2].at("at_ms").to_number<double>(), waited);
}

TEST_F(FleetDaemon, AProduceOnlyDaemonTakesJobsThatOthersRun) {
  server_options front = fleet_options("front");
  front.produce_only = true;
  test_server a(front);
  std::vector<std::string> ids{submit(a.port(), "echo", "job 0")};
  wait_until([] { return false; }, 300ms);  // time a consumer would need to take it
  EXPECT_EQ(json_string(get(a.port(), "/v1/jobs/" + ids[0]).body, "state"), "queued") << "nobody runs it yet";
  // No daemon consumes: a job behind it could never be promised a start.
  const reply refused = post(a.port(), "/v1/jobs/echo", "x", {{"Prefer", "respond-async"}});
  EXPECT_EQ(refused.status, 504u) << refused.body;
  EXPECT_EQ(json_string(refused.body, "stage"), "admission");
  test_server b(fleet_options("back"));
  for (int i = 1; i < 4; ++i) ids.push_back(submit(a.port(), "echo", "job " + std::to_string(i)));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string done = wait_state(a.port(), ids[i], "ok");
    EXPECT_EQ(json_string(done, "result"), "job " + std::to_string(i));
    EXPECT_EQ(json_string(done, "consumer"), "back");
  }
  EXPECT_EQ(a.handler("echo").admitted, 4u);
  EXPECT_EQ(a.handler("echo").finished_ok, 0u) << "the front daemon ran none";
  // counted once the finish script's reply is back, which may be just after the state reads "ok"
  EXPECT_TRUE(wait_until([&] { return b.handler("echo").finished_ok == 4u; })) << b.handler("echo").finished_ok;
}

TEST_F(FleetDaemon, EveryAcceptedJobIsCountedOnceInTheFleetsMetrics) {
  // Admitted on the daemon that answered 202; finished on the one that
  // recorded its outcome: summed over the fleet, admitted = finished.
  test_server a(fleet_options("a"));
  test_server b(fleet_options("b"));
  std::vector<std::pair<std::string, std::string>> want;  // id, final state
  for (int i = 0; i < 6; ++i) want.emplace_back(submit(i % 2 ? a.port() : b.port(), "sleep", R"({"ms": 1})"), "ok");
  want.emplace_back(submit(a.port(), "sleep", R"({"ms": -5})"), "error");
  const std::string stopped = running_on_server(a, 60000);
  ASSERT_EQ(client(b.port()).request("DELETE", "/v1/jobs/" + stopped).status, 202u);
  want.emplace_back(stopped, "cancelled");
  for (const auto& [id, state] : want) EXPECT_EQ(json_string(wait_state(a.port(), id, state), "state"), state) << id;
  const auto fleet_sum = [&](std::uint64_t handler_snapshot::*field) {
    return a.handler("sleep").*field + b.handler("sleep").*field;
  };
  EXPECT_EQ(fleet_sum(&handler_snapshot::admitted), 8u);
  EXPECT_EQ(a.handler("sleep").admitted, 5u) << "counted where the 202 was given";
  EXPECT_TRUE(wait_until([&] {
    return fleet_sum(&handler_snapshot::finished_ok) == 6u && fleet_sum(&handler_snapshot::finished_error) == 1u &&
           fleet_sum(&handler_snapshot::finished_cancelled) == 1u;
  })) << "ok "
      << fleet_sum(&handler_snapshot::finished_ok) << ", error " << fleet_sum(&handler_snapshot::finished_error)
      << ", cancelled " << fleet_sum(&handler_snapshot::finished_cancelled);
  EXPECT_EQ(fleet_sum(&handler_snapshot::finished_deadline_exceeded), 0u);
  EXPECT_EQ(fleet_sum(&handler_snapshot::rejected_queue_full), 0u) << "the executors' own counts stay out of it";
}

TEST_F(FleetDaemon, AJobTheFleetsBacklogCannotStartInTimeGets504AtAdmission) {
  test_server a(fleet_options("a"));  // 2 workers
  for (int i = 0; i < 2; ++i) running_on_server(a, 60000);
  for (int i = 0; i < 10; ++i) submit(a.port(), "sleep", R"({"ms": 1})");  // the backlog: not delivered
  {
    fleet::testing::io_thread io;
    fleet::redis_connection c(io.io, redis.endpoint());
    c.call(context(), {"HSET", "hg:{default}:stats", "mean_run_us", "1000000"});
  }
  // predicted wait: 10 x 1 s / 2 live slots = 5 s
  const reply tight = post(a.port(), "/v1/jobs/sleep", R"({"ms": 1})",
                           {{"Prefer", "respond-async"}, {"Job-Freshness", "1S"}});
  EXPECT_EQ(tight.status, 504u) << tight.body;
  EXPECT_EQ(json_string(tight.body, "error"), "deadline_exceeded");
  EXPECT_EQ(json_string(tight.body, "stage"), "admission");
  EXPECT_EQ(a.handler("sleep").rejected_insufficient_budget, 1u);
  const reply enough = post(a.port(), "/v1/jobs/sleep", R"({"ms": 1})",
                            {{"Prefer", "respond-async"}, {"Job-Freshness", "60S"}});
  EXPECT_EQ(enough.status, 202u) << enough.body;
}

TEST_F(FleetDaemon, AnIdempotencyKeyAnswersTheFirstJobAgain) {
  test_server a(fleet_options("a"));
  const headers key{{"Prefer", "respond-async"}, {"Idempotency-Key", "order-17"}};
  const reply first = post(a.port(), "/v1/jobs/echo", "x", key);
  const reply again = post(a.port(), "/v1/jobs/echo", "x", key);
  ASSERT_EQ(first.status, 202u) << first.body;
  ASSERT_EQ(again.status, 202u) << again.body;
  EXPECT_EQ(json_string(again.body, "id"), json_string(first.body, "id"));
  EXPECT_NE(again.body.find("\"duplicate\": true"), std::string::npos) << again.body;
  EXPECT_EQ(first.body.find("duplicate"), std::string::npos);
  const reply bad = post(a.port(), "/v1/jobs/echo", "x",
                         {{"Prefer", "respond-async"}, {"Idempotency-Key", std::string(129, 'k')}});
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(json_string(bad.body, "error"), "invalid_idempotency_key");
}

TEST_F(FleetDaemon, ABulkRequestIsAdmittedJobByJobAndEachJobRunsOnce) {
  test_server a(fleet_options("a"));
  const reply r = post(a.port(), "/v1/jobs:bulk",
                       R"({"jobs": [
      {"handler": "echo", "payload": "first", "idempotency_key": "order-9"},
      {"handler": "echo", "payload": "again", "idempotency_key": "order-9"},
      {"handler": "echo", "payload": "x", "idempotency_key": ")" +
                           std::string(129, 'k') + R"("},
      {"handler": "echo", "payload": "second", "content_type": "text/plain"}]})");
  ASSERT_EQ(r.status, 200u) << r.body;
  const auto doc = support::parse_json(r.body);
  ASSERT_TRUE(doc.has_value()) << r.body;
  const boost::json::array& jobs = doc->at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 4u);
  const auto status = [&](std::size_t i) { return jobs[i].at("status").to_number<int>(); };
  const auto id = [&](std::size_t i) { return std::string(jobs[i].at("body").at("id").as_string()); };
  EXPECT_EQ(status(0), 202);
  EXPECT_EQ(status(1), 202);
  EXPECT_EQ(id(1), id(0)) << "one job per idempotency key, even within one batch";
  EXPECT_TRUE(jobs[1].at("body").at("duplicate").as_bool());
  EXPECT_EQ(status(2), 400);
  EXPECT_EQ(jobs[2].at("body").at("error").as_string(), "invalid_idempotency_key");
  EXPECT_EQ(status(3), 202);
  EXPECT_EQ(json_string(wait_state(a.port(), id(0), "ok"), "result"), "first");
  const std::string second = wait_state(a.port(), id(3), "ok");
  EXPECT_EQ(json_string(second, "result"), "second");
  EXPECT_EQ(json_string(second, "content_type"), "text/plain");
  EXPECT_EQ(a.handler("echo").admitted, 2u) << "the duplicate and the invalid job were not admitted";
}

TEST_F(FleetDaemon, WithTheBrokerDownAJobGets503AndNever202) {
  test_server a(fleet_options("a"));
  redis.kill9();
  const reply down = post(a.port(), "/v1/jobs/echo", "x", {{"Prefer", "respond-async"}});
  EXPECT_EQ(down.status, 503u) << down.body;
  EXPECT_EQ(json_string(down.body, "error"), "broker_unavailable");
  EXPECT_EQ(get(a.port(), "/v1/jobs/00000000000000000000000000000000").status, 503u);
  EXPECT_EQ(a.handler("echo").rejected_broker_unavailable, 1u) << "a refusal, counted as one";
  EXPECT_EQ(a.handler("echo").admitted, 0u);
  EXPECT_EQ(post(a.port(), "/v1/jobs/echo", "sync", {}).status, 200u) << "sync jobs never touch the broker";
  redis.restart();
  std::string id;
  ASSERT_TRUE(wait_until(
      [&] {
        const reply r = post(a.port(), "/v1/jobs/echo", "back", {{"Prefer", "respond-async"}});
        if (r.status == 202u) id = json_string(r.body, "id");
        return r.status == 202u;
      },
      10s));
  EXPECT_EQ(json_string(wait_state(a.port(), id, "ok"), "result"), "back");
}

TEST_F(FleetDaemon, ADeleteOnOneDaemonStopsTheJobRunningOnAnother) {
  test_server a(fleet_options("a"));
  const std::string id = submit(a.port(), "sleep", R"({"ms": 60000})");
  wait_state(a.port(), id, "running");
  test_server b(fleet_options("b"));
  const reply del = client(b.port()).request("DELETE", "/v1/jobs/" + id);
  EXPECT_EQ(del.status, 202u) << del.body;
  const std::string done = wait_state(b.port(), id, "cancelled", 5s);
  EXPECT_EQ(json_string(done, "cause"), "requested") << done;
}

TEST_F(FleetDaemon, AJobOfADaemonKilledWithSigkillIsFinishedByAnother) {
  daemon_process a(daemon_args("a"));
  const std::string id = running_on(a, a.wait_for_port(), 1500);  // long enough for the kill to land mid-run
  a.signal(SIGKILL);
  a.wait_exit(5s);
  daemon_process b(daemon_args("b"));
  const std::uint16_t pb = b.wait_for_port();
  ASSERT_NE(pb, 0) << b.output();
  const std::string done = wait_state(pb, id, "ok", 15s);
  EXPECT_EQ(json_string(done, "state"), "ok") << done << b.output();
  EXPECT_EQ(json_number(done, "deliveries"), 2.0) << "started again after its worker died";
  // Its timeline: delivered to a (which died), started on b.
  const auto t = boost::json::parse(done).at("timeline").as_array();
  ASSERT_GE(t.size(), 3u) << done;
  EXPECT_EQ(t[1].at("event"), "delivered") << done;
  EXPECT_EQ(t[1].at("consumer"), "a");
  EXPECT_EQ(t[2].at("event"), "started");
  EXPECT_EQ(t[2].at("consumer"), "b");
  EXPECT_GE(t[2].at("at_ms").to_number<double>(), t[1].at("at_ms").to_number<double>());
}

TEST_F(FleetDaemon, SigtermHandsUnfinishedJobsBackForAnotherDaemonAtOnce) {
  daemon_process a(daemon_args("a"));
  const std::string id = running_on(a, a.wait_for_port(), 60000);
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(10s), 0) << a.output();
  test_server b(fleet_options("b"));
  const std::string running = wait_state(b.port(), id, "running", 5s);
  EXPECT_EQ(json_number(running, "deliveries"), 1.0) << "a drain is not a failed delivery: " << running;
}

TEST_F(FleetDaemon, ADrainingDaemonIsShownDrainingAndNoLongerCountedAsSlotsWhileItsJobFinishes) {
  std::vector<std::string> args = daemon_args("a");
  std::replace(args.begin(), args.end(), std::string("100ms"), std::string("20s"));  // --drain-timeout
  daemon_process a(args);
  const std::string id = running_on(a, a.wait_for_port(), 3000);
  server_options front = fleet_options("front");
  front.produce_only = true;  // looks, runs nothing
  test_server observer(front);
  a.signal(SIGTERM);
  std::string q;
  ASSERT_TRUE(wait_until(
      [&] {
        q = get(observer.port(), "/v1/queues/default").body;
        return q.find(R"("name": "a", "slots": 0, "held": 1)") != std::string::npos &&
               q.find(R"("draining": true)") != std::string::npos;
      },
      3s))
      << "within a renewal (--lease 1s: every 333 ms): " << q;
  EXPECT_NE(q.find(R"("live_slots": 0)"), std::string::npos) << "admission no longer counts it: " << q;
  EXPECT_EQ(a.wait_exit(10s), 0) << a.output();
  EXPECT_EQ(json_string(get(observer.port(), "/v1/jobs/" + id).body, "state"), "ok") << "its running job finished";
}

TEST_F(FleetDaemon, ASecondDaemonUnderALiveDaemonsNameRefusesToStart) {
  test_server a(fleet_options("same"));
  daemon_process b(daemon_args("same"));
  EXPECT_EQ(b.wait_exit(10s), 1) << b.output();
  EXPECT_NE(b.output().find("held by a live process"), std::string::npos) << b.output();
}

}  // namespace
}  // namespace hourglass::server::testing
