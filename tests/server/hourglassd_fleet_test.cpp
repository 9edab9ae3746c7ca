// hourglassd --broker: async jobs through a real redis-server, shared by
// several daemons (protocol.md, "Fleet mode"). In-process daemons for the
// API; the hourglassd binary for kill -9 and SIGTERM.
#include <gtest/gtest.h>

#include <csignal>
#include <string>

#include "fleet/redis_server.hpp"
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
  // Polls GET /v1/jobs/{id} on `port` until its state is `want`; the last body.
  std::string wait_state(std::uint16_t port, const std::string& id, const std::string& want,
                         std::chrono::milliseconds limit = 10s) {
    std::string last;
    wait_until(
        [&] {
          last = get(port, "/v1/jobs/" + id).body;
          return json_string(last, "state") == want;
        },
        limit);
    return last;
  }
  std::string submit(std::uint16_t port, const std::string& handler, const std::string& body, headers hs = {}) {
    hs.emplace_back("Prefer", "respond-async");
    const reply r = post(port, "/v1/jobs/" + handler, body, hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
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

TEST_F(FleetDaemon, WithTheBrokerDownAJobGets503AndNever202) {
  test_server a(fleet_options("a"));
  redis.kill9();
  const reply down = post(a.port(), "/v1/jobs/echo", "x", {{"Prefer", "respond-async"}});
  EXPECT_EQ(down.status, 503u) << down.body;
  EXPECT_EQ(json_string(down.body, "error"), "broker_unavailable");
  EXPECT_EQ(get(a.port(), "/v1/jobs/00000000000000000000000000000000").status, 503u);
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
  const std::uint16_t pa = a.wait_for_port();
  ASSERT_NE(pa, 0) << a.output();
  const std::string id = submit(pa, "sleep", R"({"ms": 300})");
  wait_state(pa, id, "running");
  a.signal(SIGKILL);
  a.wait_exit(5s);
  daemon_process b(daemon_args("b"));
  const std::uint16_t pb = b.wait_for_port();
  ASSERT_NE(pb, 0) << b.output();
  const std::string done = wait_state(pb, id, "ok", 15s);
  EXPECT_EQ(json_string(done, "state"), "ok") << done << b.output();
  EXPECT_EQ(json_number(done, "deliveries"), 2.0) << "started again after its worker died";
}

TEST_F(FleetDaemon, SigtermHandsUnfinishedJobsBackForAnotherDaemonAtOnce) {
  daemon_process a(daemon_args("a"));
  const std::uint16_t pa = a.wait_for_port();
  ASSERT_NE(pa, 0) << a.output();
  const std::string id = submit(pa, "sleep", R"({"ms": 60000})");
  wait_state(pa, id, "running");
  a.signal(SIGTERM);
  EXPECT_EQ(a.wait_exit(10s), 0) << a.output();
  test_server b(fleet_options("b"));
  const std::string running = wait_state(b.port(), id, "running", 5s);
  EXPECT_EQ(json_number(running, "deliveries"), 1.0) << "a drain is not a failed delivery: " << running;
}

TEST_F(FleetDaemon, ASecondDaemonUnderALiveDaemonsNameRefusesToStart) {
  test_server a(fleet_options("same"));
  daemon_process b(daemon_args("same"));
  EXPECT_EQ(b.wait_exit(10s), 1) << b.output();
  EXPECT_NE(b.output().find("held by a live process"), std::string::npos) << b.output();
}

}  // namespace
}  // namespace hourglass::server::testing
