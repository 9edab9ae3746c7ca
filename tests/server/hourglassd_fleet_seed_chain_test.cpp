// The seeds' worked example through a fleet's queue, on a real Redis and
// real time, scaled down five times: a 2.4 s user deadline, model attempts
// of 1.5 s. Every hop is a child job judged on the broker's clock and waits
// for its child in the broker. The first model attempt carries its 1.5 s,
// the second what is left (under 0.9 s); the service keeps 400 ms to
// answer (a daemon looks for due wakes every 200 ms at most), so its
// fallback and the gateway's answer come before 2.4 s, and no job of the
// request is left working after it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fleet/redis_server.hpp"
#include "hourglass/support/json.hpp"
#include "seed_chain.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;

TEST(FleetSeedChain, NoHopWorksPastTheUsersDeadlineAndTheSecondAttemptGetsOnlyWhatIsLeft) {
  redis_server redis;
  chain ch;
  ch.user_deadline = 2400ms;
  ch.attempt = 1500ms;
  ch.model_minimum = 20ms;
  ch.service_keep = 400ms;
  server_options o = test_options();
  o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
  o.consumer = "a";
  o.lease = 600ms;  // a marked (cancelled) model stops within a renewal: 200 ms
  test_server a(o, [&ch](http_server& s) { ch.setup(s); });
  const auto sent = std::chrono::steady_clock::now();
  const reply r = post(a.port(), "/v1/jobs/gateway", "ask", {{"Prefer", "respond-async"}, {"Job-Deadline", "2400m"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string gateway = json_string(r.body, "id");
  std::string done;
  ASSERT_TRUE(wait_until(
      [&] {
        done = get(a.port(), "/v1/jobs/" + gateway).body;
        return json_string(done, "state") == "ok";
      },
      5s))
      << done;
  const auto answered = std::chrono::steady_clock::now() - sent;
  EXPECT_LT(answered, 2400ms) << "before the user's deadline";
  EXPECT_EQ(json_string(done, "result"), "fallback: the model did not answer in time");

  const std::vector<child_answer> attempts = ch.attempts();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].verdict, child_answer::kind::accepted);
  EXPECT_LE(attempts[0].deadline, 1500ms);
  EXPECT_EQ(attempts[1].verdict, child_answer::kind::accepted) << attempts[1].message;
  EXPECT_LT(attempts[1].deadline, 900ms) << "min(1.5 s, what the service had left)";
  EXPECT_GT(attempts[1].deadline, 300ms);
  // Nothing of the request works on: the second attempt is stopped (cause
  // parent) or ran into its own deadline, both before the user's 2.4 s.
  EXPECT_TRUE(wait_until([&] { return ch.models_running.load() == 0; }, 2s));
  const std::string last = get(a.port(), "/v1/jobs/" + attempts[1].id).body;
  const std::string st = json_string(last, "state");
  EXPECT_TRUE(st == "cancelled" || st == "deadline_exceeded") << last;
}

}  // namespace
}  // namespace hourglass::server::testing
