// The seeds' worked example through a fleet's queue, on a real Redis and
// real time, scaled down two and a half times: a 4.8 s user deadline, model
// attempts of 3 s. Every hop is a child job judged on the broker's clock and
// waits for its child in the broker. The first model attempt carries its
// 3 s, the second what is left (under 1.8 s); the service keeps 800 ms to
// answer (a daemon looks for due wakes every 200 ms at most, and a
// sanitizer's build on a loaded machine is slow to run each hop), so its
// fallback and the gateway's answer come before 4.8 s, and no job of the
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
  ch.user_deadline = 4800ms;
  ch.attempt = 3000ms;
  ch.model_minimum = 20ms;
  ch.service_keep = 800ms;
  server_options o = test_options();
  o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
  o.consumer = "a";
  o.lease = 600ms;  // a marked (cancelled) model stops within a renewal: 200 ms
  test_server a(o, [&ch](http_server& s) { ch.setup(s); });
  const auto sent = std::chrono::steady_clock::now();
  const reply r = post(a.port(), "/v1/jobs/gateway", "ask", {{"Prefer", "respond-async"}, {"Job-Deadline", "4800m"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string gateway = json_string(r.body, "id");
  std::string done;
  ASSERT_TRUE(wait_until(
      [&] {
        done = get(a.port(), "/v1/jobs/" + gateway).body;
        return json_string(done, "state") == "ok";
      },
      8s))
      << done;
  const auto answered = std::chrono::steady_clock::now() - sent;
  EXPECT_LT(answered, 4800ms) << "before the user's deadline";
  EXPECT_EQ(json_string(done, "result"), "fallback: the model did not answer in time");

  const std::vector<child_answer> attempts = ch.attempts();
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].verdict, child_answer::kind::accepted);
  EXPECT_LE(attempts[0].deadline, 3000ms);
  EXPECT_EQ(attempts[1].verdict, child_answer::kind::accepted) << attempts[1].message;
  EXPECT_LT(attempts[1].deadline, 1800ms) << "min(3 s, what the service had left)";
  EXPECT_GT(attempts[1].deadline, 600ms);
  // Nothing of the request works on: the second attempt is stopped (cause
  // parent) or ran into its own deadline, both before the user's 4.8 s.
  // (Its outcome is recorded after its handler returns, by the writer: the
  // state is waited for, and the handler has returned by then.)
  std::string last;
  EXPECT_TRUE(wait_until(
      [&] {
        last = get(a.port(), "/v1/jobs/" + attempts[1].id).body;
        const std::string st = json_string(last, "state");
        return st == "cancelled" || st == "deadline_exceeded";
      },
      4s))
      << last;
  EXPECT_EQ(ch.models_running.load(), 0);
}

}  // namespace
}  // namespace hourglass::server::testing
