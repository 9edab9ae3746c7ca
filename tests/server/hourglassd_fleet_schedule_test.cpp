// Periodic jobs in fleet mode: three daemons on one Redis, one schedule
// firing every second: each fire enqueued once fleet-wide (settled by the
// broker's record, its job keyed by the fire); the whole fleet down for
// several fires, then back: the missed fires counted, at most one catch-up
// run. Real time on the broker's clock: bounds with slack that still assert.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/fleet/redis.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;

// Counts runs and the distinct jobs they belong to.
struct fire_log {
  std::mutex mu;
  std::vector<std::string> keys;  // each run's idempotency key: one per fire
  handler_fn fn() {
    return [this](const context&, const request_view& req) {
      std::lock_guard lock(mu);
      keys.emplace_back(req.idempotency_key);
      return handler_result{"fired", "text/plain"};
    };
  }
  std::size_t runs() {
    std::lock_guard lock(mu);
    return keys.size();
  }
  std::size_t distinct() {
    std::lock_guard lock(mu);
    return std::set<std::string>(keys.begin(), keys.end()).size();
  }
};

struct FleetSchedule : ::testing::Test {
  server_options member(const std::string& consumer) {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = consumer;
    o.lease = 600ms;
    o.workers = 2;
    schedule_options s;
    s.name = "tick";
    s.cron = "@every 1s";
    s.handler = "fired";
    o.schedules = {s};
    return o;
  }
  std::unique_ptr<test_server> start(const std::string& consumer) {
    return std::make_unique<test_server>(member(consumer),
                                         [this](http_server& s) { s.add_handler("fired", log.fn()); });
  }
  double fleet_fires(const std::vector<std::unique_ptr<test_server>>& fleet, const std::string& result) {
    double n = 0;
    for (const auto& d : fleet) {
      n += metric_value(get(d->port(), "/metrics").body,
                        R"(hourglass_schedule_fires_total{schedule="tick",result=")" + result + "\"}");
    }
    return n;
  }
  std::string record(const std::string& field) {
    fleet::testing::io_thread io;
    fleet::redis_connection c(io.io, redis.endpoint());
    const fleet::redis_reply r = c.call(context(), {"HGET", "hg:{default}:schedule:tick", field});
    return r.is_nil() ? "" : r.str;
  }

  redis_server redis;
  fire_log log;
};

TEST_F(FleetSchedule, ThreeDaemonsRunEachFireOnceAndAFleetBackFromDowntimeCatchesUpOnce) {
  std::vector<std::unique_ptr<test_server>> fleet;
  for (const char* name : {"a", "b", "c"}) fleet.push_back(start(name));
  wait_until([] { return false; }, 5s);  // about five fires
  const double enqueued = fleet_fires(fleet, "enqueued");
  EXPECT_GE(enqueued, 3.0);
  EXPECT_LE(enqueued, 7.0);
  // The fleet keeps firing every second: each enqueued fire has run once
  // in a quiet moment between two fires (a snapshot of the count would be
  // overtaken by the next fire's run, or by two queued ones run at once).
  double fires_now = enqueued;
  ASSERT_TRUE(wait_until(
      [&] {
        fires_now = fleet_fires(fleet, "enqueued");
        return static_cast<double>(log.runs()) == fires_now;
      },
      5s))
      << log.runs() << " runs of " << fires_now << " fires";
  EXPECT_EQ(log.distinct(), log.runs()) << "no fire ran twice";
  EXPECT_EQ(fleet_fires(fleet, "missed"), 0.0);
  EXPECT_EQ(record("missed"), "");

  // The whole fleet down for about four fires.
  fleet.clear();
  const std::size_t runs_before = log.runs();
  wait_until([] { return false; }, 4200ms);
  fleet.push_back(start("a"));
  ASSERT_TRUE(wait_until([&] { return fleet_fires(fleet, "missed") > 0; }, 5s));
  const double missed = fleet_fires(fleet, "missed");
  EXPECT_GE(missed, 2.0) << "the fires nobody ran are counted";
  EXPECT_LE(missed, 5.0);
  EXPECT_EQ(record("missed"), std::to_string(static_cast<int>(missed))) << "on the broker's record too";
  // Back up: one catch-up run at most, then one a second.
  wait_until([] { return false; }, 600ms);
  EXPECT_LE(log.runs() - runs_before, 2u) << "catching up never floods";
}

}  // namespace
}  // namespace hourglass::server::testing
