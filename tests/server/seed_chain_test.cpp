// The seeds' worked example, through the queue: a user's request with a
// 12 s deadline goes gateway -> service -> model, each hop a child job of
// the one before, each waiting for its child without holding a worker. The
// model hangs. The service gives each model attempt min(10 s, what it has
// left): the first 10 s, the second what remains of 12 s less the
// reserves; the service's own wait ends just before its deadline with a
// fallback, and the gateway answers with it before the user's 12 s. No job
// works past the caller's deadline. When a model attempt needs 4 s and only
// 2 s are left, the second attempt is refused at enqueue and the fallback
// comes at once. Time is the manual clock's: every number is exact.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "hourglass/support/json.hpp"
#include "seed_chain.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

struct SeedChain : ::testing::Test {
  json::value job(const std::string& id) { return job_object(srv->port(), id); }
  std::string state(const std::string& id) { return job_state(srv->port(), id); }
  std::string child_of(const std::string& id) {
    std::string child;
    EXPECT_TRUE(wait_until([&] {
      const json::value j = job(id);
      if (!j.is_object() || !j.as_object().contains("children")) return false;
      child = std::string(j.at("children").as_array().at(0).as_string());
      return true;
    }));
    return child;
  }
  std::string send_request() {
    const reply r = c->post("/v1/jobs/gateway", "ask", {{"Prefer", "respond-async"}, {"Job-Deadline", "12S"}});
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }

  manual_clock clk;
  chain ch;
  std::unique_ptr<test_server> srv;
  std::optional<client> c;
  void start(duration model_minimum) {
    ch.model_minimum = model_minimum;
    srv = std::make_unique<test_server>(
        test_options(), [this](http_server& s) { ch.setup(s); }, clk);
    c.emplace(srv->port());
  }
};

TEST_F(SeedChain, TheSecondModelAttemptGetsWhatIsLeftOfTwelveSecondsAndNothingWorksPastThem) {
  start(100ms);
  const time_point sent = clk.now();
  const std::string gateway = send_request();
  const std::string service = child_of(gateway);
  ASSERT_TRUE(wait_until([&] { return ch.models_running.load() == 1; }));
  // The model may start before the service's run has returned its wait.
  EXPECT_TRUE(wait_until([&] { return srv->get().jobs().busy() == 1u; }))
      << "the model only: gateway and service wait without workers";
  ASSERT_EQ(ch.attempts().size(), 1u);
  EXPECT_EQ(ch.attempts()[0].deadline, 10s) << "min(10 s, 12 s less two reserves)";

  clk.advance(10s);  // the first attempt's 10 s: the model is stopped, the service tries again
  ASSERT_TRUE(wait_until([&] { return ch.attempts().size() == 2 && ch.models_running.load() == 1; }));
  const child_answer second = ch.attempts()[1];
  ASSERT_EQ(second.verdict, child_answer::kind::accepted) << second.message;
  EXPECT_EQ(second.deadline, 1990ms) << "min(10 s, the service's 1,995 ms left less the 5 ms reserve)";
  EXPECT_EQ(state(ch.attempts()[0].id), "deadline_exceeded");

  // The service's wait ends 100 ms before its deadline (11.995 s): it answers
  // with its fallback, its hung model stopped; the gateway's wait is over.
  // Its wake is put on the clock after the attempt is made.
  ASSERT_TRUE(clk.wait_for_timer_at(sent + 11895ms)) << job(service);
  clk.advance(1894ms);
  EXPECT_EQ(state(service), "waiting") << "1 ms before its wake time";
  clk.advance(1ms);
  ASSERT_TRUE(wait_until([&] { return state(gateway) == "ok"; })) << job(gateway) << job(service);
  EXPECT_EQ(job(gateway).at("result").as_string(), "fallback: the model did not answer in time");
  EXPECT_EQ(job(service).at("woke_by").as_string(), "deadline");
  EXPECT_EQ(job(gateway).at("woke_by").as_string(), "children");
  // Recorded after its handler returns: the state is what is waited for.
  ASSERT_TRUE(wait_until([&] { return state(second.id) == "cancelled"; })) << "the second attempt is stopped";
  EXPECT_EQ(job(second.id).at("cause").as_string(), "parent");
  EXPECT_EQ(ch.models_running.load(), 0);
  // At 11.895 s of the user's 12 s, with the clock standing there, every
  // job of the request has ended: nothing works past the caller's deadline.
  for (const std::string& id : {gateway, service, ch.attempts()[0].id, second.id}) {
    EXPECT_TRUE(wait_until([&] {
      const std::string st = state(id);
      return st != "queued" && st != "running" && st != "waiting";
    })) << job(id);
  }
}

TEST_F(SeedChain, ASecondAttemptThatCouldNotDoItsFourSecondsIsNotMadeAndTheFallbackComesAtOnce) {
  start(4s);
  const std::string gateway = send_request();
  ASSERT_TRUE(wait_until([&] { return ch.models_running.load() == 1; }));
  clk.advance(10s);
  ASSERT_TRUE(wait_until([&] { return state(gateway) == "ok"; })) << job(gateway);
  EXPECT_EQ(job(gateway).at("result").as_string(), "fallback: the model did not answer in time");
  ASSERT_EQ(ch.attempts().size(), 2u);
  EXPECT_EQ(ch.attempts()[1].verdict, child_answer::kind::refused);
  EXPECT_EQ(ch.attempts()[1].refusal, status::expired(expiry_stage::admission)) << "1,990 ms is not worth a 4 s call";
  EXPECT_EQ(srv->handler("model").rejected_insufficient_budget, 1u);
}

}  // namespace
}  // namespace hourglass::server::testing
