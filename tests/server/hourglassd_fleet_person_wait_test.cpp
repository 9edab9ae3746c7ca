// A person's wait in fleet mode, on a real Redis and real time: the wait is
// the broker's, so every daemon may be killed with kill -9 while the job
// waits longer than its whole machine budget; the signal, sent to a daemon
// started afterwards, resumes it there with the machine budget it had left.
// Without a signal the broker ends it at the wait's own limit, stage
// human_wait, though its machine budget was shorter.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;
using fleet::testing::redis_server;

std::vector<std::string> approval_daemon(const redis_server& redis, const std::string& consumer) {
  return {"--listen",   "127.0.0.1:0", "--broker",        "redis://127.0.0.1:" + std::to_string(redis.port()),
          "--consumer", consumer,      "--lease",         "1s",
          "--workers",  "2",           "--drain-timeout", "100ms"};
}

TEST(FleetPersonWait, AJobWaitingForAPersonOutlivesAKill9AndResumesWithTheBudgetItHadLeft) {
  redis_server redis;
  std::string id;
  {
    daemon_process b(approval_daemon(redis, "b"));
    const std::uint16_t port = b.wait_for_port();
    ASSERT_NE(port, 0u) << b.output();
    const reply r = post(port, "/v1/jobs/approval", R"({"work_ms": 200, "signal": "approve", "wait_ms": 30000})",
                         {{"Prefer", "respond-async"}, {"Job-Deadline", "2S"}});
    ASSERT_EQ(r.status, 202u) << r.body;
    id = json_string(r.body, "id");
    ASSERT_TRUE(wait_until([&] { return job_state(port, id) == "waiting"; }, 5s)) << job_object(port, id);
    b.signal(SIGKILL);
    ASSERT_TRUE(b.wait_exit(5s).has_value());
  }
  // No daemon at all, for longer than the job's whole machine budget.
  std::this_thread::sleep_for(2500ms);
  daemon_process d(approval_daemon(redis, "d"));
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0u) << d.output();
  const json::value waiting = job_object(port, id);
  ASSERT_EQ(waiting.at("state").as_string(), "waiting") << waiting;
  EXPECT_EQ(waiting.at("waiting_for").as_string(), "signal:approve");
  EXPECT_GE(waiting.at("human_wait_used_ms").to_number<double>(), 2500.0) << waiting;
  // 2 s less the 200 ms it worked, less what taking and running it cost
  // (a sanitizer's build on a loaded machine: hundreds of ms); a wait
  // charged to it would leave nothing.
  const double left = waiting.at("machine_left_ms").to_number<double>();
  EXPECT_LE(left, 1800.0) << waiting;
  EXPECT_GT(left, 1000.0) << "the wait was not charged to the machine's budget: " << waiting;

  const reply s = post(port, "/v1/jobs/" + id + "/signals/approve", "approved by ops");
  ASSERT_EQ(s.status, 200u) << s.body;
  ASSERT_TRUE(wait_until([&] { return job_state(port, id) == "ok"; }, 5s)) << job_object(port, id) << d.output();
  const json::value done = job_object(port, id);
  const auto result = support::parse_json(std::string(done.at("result").as_string()));
  ASSERT_TRUE(result.has_value()) << done;
  EXPECT_EQ(result->at("payload").as_string(), "approved by ops");
  const double remaining = result->at("remaining_ms").to_number<double>();
  EXPECT_LE(remaining, 1800.0) << done;
  EXPECT_GT(remaining, 800.0) << "resumed with what it had left, not what the clock says: " << done;
  EXPECT_EQ(done.at("woke_by").as_string(), "signal");
  EXPECT_EQ(done.at("consumer").as_string(), "d");
  EXPECT_EQ(post(port, "/v1/jobs/" + id + "/signals/approve", "again").status, 409u) << "delivered once";
}

TEST(FleetPersonWait, WithoutASignalTheBrokerEndsItAtTheWaitsLimitNotItsShorterMachineBudget) {
  redis_server redis;
  server_options o = test_options();
  o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
  o.consumer = "a";
  o.lease = 600ms;
  test_server a(o);
  // 300 ms of machine budget; a person may take 2 s.
  const reply r = post(a.port(), "/v1/jobs/approval", R"({"work_ms": 0, "signal": "approve", "wait_ms": 2000})",
                       {{"Prefer", "respond-async"}, {"Job-Deadline", "300m"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string id = json_string(r.body, "id");
  ASSERT_TRUE(wait_until([&] { return job_state(a.port(), id) == "waiting"; }, 5s));
  const auto queue = support::parse_json(get(a.port(), "/v1/queues/default").body);
  ASSERT_TRUE(queue);
  EXPECT_EQ(queue->at("counts").at("waiting").to_number<int>(), 1) << "in the delayed set at its limit, waiting...";
  EXPECT_EQ(queue->at("counts").at("scheduled").to_number<int>(), 0) << "...not scheduled to run";
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(job_state(a.port(), id), "waiting") << "past its machine budget, within the person's";
  ASSERT_TRUE(wait_until([&] { return job_state(a.port(), id) == "deadline_exceeded"; }, 5s))
      << job_object(a.port(), id);
  const json::value j = job_object(a.port(), id);
  EXPECT_EQ(j.at("stage").as_string(), "human_wait");
  EXPECT_GE(j.at("human_wait_used_ms").to_number<double>(), 2000.0) << j;
  EXPECT_TRUE(wait_until([&] { return a.handler("approval").expired_human_wait == 1u; }))
      << "counted by the daemon whose reader ended it";
}

}  // namespace
}  // namespace hourglass::server::testing
