// Periodic jobs in memory (no --broker): fires on the daemon's clock (a
// manual clock here, which the schedules' wall clock follows), each settled
// once, a fire skipped while the previous one still runs, and GET
// /v1/schedules.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "hourglass/support/json.hpp"
#include "hourglass/support/rfc3339.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

struct tick_handler {
  std::atomic<int> calls{0};
  handler_fn fn() {
    return [this](const context&, const request_view&) {
      calls.fetch_add(1);
      return handler_result{"tick", "text/plain"};
    };
  }
};

struct HttpServerSchedule : ::testing::Test {
  server_options options_with(std::vector<schedule_options> schedules) {
    server_options o = test_options();
    o.schedules = std::move(schedules);
    return o;
  }
  static schedule_options every_second(const std::string& name, const std::string& handler, std::string body = "") {
    schedule_options s;
    s.name = name;
    s.cron = "@every 1s";
    s.handler = handler;
    s.body = std::move(body);
    return s;
  }
  // The schedule's entry of GET /v1/schedules.
  static json::object schedule_of(std::uint16_t port, const std::string& name) {
    const reply r = get(port, "/v1/schedules");
    EXPECT_EQ(r.status, 200u) << r.body;
    const auto doc = support::parse_json(r.body);
    if (!doc) return {};
    for (const json::value& s : doc->at("schedules").as_array()) {
      if (s.at("name").as_string() == name) return s.as_object();
    }
    return {};
  }
  static std::uint64_t fires(std::uint16_t port, const std::string& name, const char* result) {
    const json::object s = schedule_of(port, name);
    return s.contains("fires") ? s.at("fires").at(result).to_number<std::uint64_t>() : 0;
  }
  // The runner looks at every schedule, then sleeps a quarter second on the
  // daemon's clock: a timer at exactly then says its look at now is done.
  static void runner_looked(manual_clock& clk) { ASSERT_TRUE(clk.wait_for_timer_at(clk.now() + 250ms)); }
  static void step(manual_clock& clk, duration d) {
    clk.advance(d);
    runner_looked(clk);
  }
  // Quarter seconds until the first fire (the next whole second) is settled.
  static void until_first_fire(manual_clock& clk, std::uint16_t port, const std::string& name) {
    runner_looked(clk);
    for (int i = 0; i < 4 && fires(port, name, "enqueued") == 0; ++i) step(clk, 250ms);
    ASSERT_EQ(fires(port, name, "enqueued"), 1u);
    ASSERT_EQ(fires(port, name, "missed"), 0u);
  }
};

// (Which of several due fires runs is plan_fires' rule, tested on its own:
// here the manual clock steps through the runner's timers as it advances,
// so a long advance is looked at more than once.)
TEST_F(HttpServerSchedule, EveryFireIsSettledOnceAndEachEnqueuedFireHasOneOutcome) {
  manual_clock clk;
  tick_handler h;
  test_server srv(
      options_with({every_second("tick", "tick")}), [&](http_server& s) { s.add_handler("tick", h.fn()); }, clk);
  const std::uint16_t port = srv.port();
  until_first_fire(clk, port, "tick");
  ASSERT_TRUE(wait_until([&] { return h.calls.load() == 1; }));
  const json::object one = schedule_of(port, "tick");
  EXPECT_FALSE(one.at("last_job").as_string().empty());
  const auto first_fire = support::parse_rfc3339(one.at("last_fire").as_string());
  ASSERT_TRUE(first_fire.has_value());
  step(clk, 5s);  // five more fires, each settled once: run, missed or skipped
  // A look that began before the advance ended may be the one whose sleep
  // the step saw (a loaded machine): one more quarter is a whole look at a
  // time past the fifth fire (and before the sixth).
  step(clk, 250ms);
  const json::object six = schedule_of(port, "tick");
  EXPECT_EQ(support::parse_rfc3339(six.at("last_fire").as_string()), *first_fire + std::chrono::seconds(5));
  const std::uint64_t enqueued = fires(port, "tick", "enqueued");
  EXPECT_EQ(enqueued + fires(port, "tick", "missed") + fires(port, "tick", "skipped_overlap"), 6u);
  // Each enqueued fire gets one outcome: it ran, or (the advance jumped
  // past its one-second freshness before a worker took it, as a loaded
  // machine allows) it expired in the queue; none is lost, none runs twice.
  const auto listed = [&](const std::string& state) {
    const auto doc = support::parse_json(get(port, "/v1/jobs?handler=tick&limit=100&state=" + state).body);
    return doc ? doc->at("jobs").as_array().size() : std::size_t{0};
  };
  ASSERT_TRUE(wait_until([&] { return listed("finished") == enqueued; })) << listed("finished") << " of " << enqueued;
  const std::size_t ran = listed("ok");
  EXPECT_EQ(ran + listed("deadline_exceeded"), enqueued);
  EXPECT_EQ(static_cast<std::size_t>(h.calls.load()), ran) << "every run is one ok job";
  EXPECT_GE(ran, 1u);
  const std::string metrics = get(port, "/metrics").body;
  EXPECT_EQ(metric_value(metrics, R"(hourglass_schedule_fires_total{schedule="tick",result="enqueued"})"),
            static_cast<double>(enqueued));
}

TEST_F(HttpServerSchedule, AFireWhileThePreviousStillRunsIsSkipped) {
  manual_clock clk;
  test_server srv(options_with({every_second("slow", "sleep", R"({"ms": 60000})")}), {}, clk);
  const std::uint16_t port = srv.port();
  until_first_fire(clk, port, "slow");
  const std::string job = std::string(schedule_of(port, "slow").at("last_job").as_string());
  ASSERT_TRUE(wait_until([&] { return json_string(get(port, "/v1/jobs/" + job).body, "state") == "running"; }));
  step(clk, 1s);
  EXPECT_EQ(fires(port, "slow", "skipped_overlap"), 1u);
  EXPECT_EQ(fires(port, "slow", "enqueued"), 1u);
  EXPECT_EQ(std::string(schedule_of(port, "slow").at("last_job").as_string()), job) << "still the running one";
}

TEST_F(HttpServerSchedule, TheScheduleListShowsEachScheduleAndItsNextFire) {
  schedule_options nightly;
  nightly.name = "nightly";
  nightly.cron = "0 3 * * *";
  nightly.zone = "Europe/Berlin";
  nightly.handler = "echo";
  nightly.freshness = std::chrono::minutes(10);
  test_server srv(options_with({nightly}));
  json::object s;
  ASSERT_TRUE(wait_until([&] {
    s = schedule_of(srv.port(), "nightly");
    return s.contains("next_fire");
  }));
  EXPECT_EQ(s.at("cron").as_string(), "0 3 * * *");
  EXPECT_EQ(s.at("zone").as_string(), "Europe/Berlin");
  EXPECT_EQ(s.at("overlap").as_string(), "skip");
  EXPECT_EQ(s.at("freshness_ms").to_number<double>(), 600000.0);
  const std::string next(s.at("next_fire").as_string());
  EXPECT_TRUE(next.find("T01:00:00Z") != std::string::npos || next.find("T02:00:00Z") != std::string::npos)
      << "03:00 in Berlin is 01:00 or 02:00 UTC: " << next;
  EXPECT_FALSE(s.contains("last_fire")) << "nothing fired yet";
}

TEST_F(HttpServerSchedule, AScheduleOfAnUnknownHandlerStopsTheDaemonFromStarting) {
  EXPECT_THROW(test_server srv(options_with({every_second("ghost", "no_such_handler")})), std::invalid_argument);
}

}  // namespace
}  // namespace hourglass::server::testing
