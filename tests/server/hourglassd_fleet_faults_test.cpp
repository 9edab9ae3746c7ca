// Fleet mode under faults, with real hourglassd processes on one real
// redis-server: random kill -9 of daemons while jobs run (a Jepsen-style
// total check), a poison job that kills its worker every time, and a broker
// killed and restarted (appendfsync always).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/sanitized.hpp"
#include "fleet/redis_server.hpp"
#include "hourglass/fleet/redis.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;

struct FleetFaults : ::testing::Test {
  std::vector<std::string> args(const std::string& consumer, const std::string& extra_deliveries = "20") {
    return {"--listen",        "127.0.0.1:0", "--broker",         "redis://127.0.0.1:" + std::to_string(redis.port()),
            "--consumer",      consumer,      "--lease",          "1s",
            "--workers",       "2",           "--max-deliveries", extra_deliveries,
            "--drain-timeout", "2s"};
  }
  // The same, with /metrics rendered at each scrape (workers_busy is then now's).
  std::vector<std::string> args_with_fresh_metrics(const std::string& consumer) {
    std::vector<std::string> a = args(consumer);
    a.insert(a.end(), {"--metrics-cache", "0s"});
    return a;
  }
  fleet::redis_reply raw(std::vector<std::string> a) {
    fleet::testing::io_thread io;
    fleet::redis_connection c(io.io, redis.endpoint());
    return c.call(context(), std::move(a));
  }
  // Workers of the daemon on `port` running a job now (-1: no answer). Its
  // page is rendered afresh only with --metrics-cache 0.
  static double workers_busy(std::uint16_t port) {
    const reply r = get(port, "/metrics", {}, 5s);
    if (r.status != 200) return -1;
    const double busy = metric_value(r.body, "hourglass_workers_busy");
    return std::isnan(busy) ? -1 : busy;
  }
  std::string state_of(std::uint16_t port, const std::string& id, std::string* body = nullptr) {
    const reply r = get(port, "/v1/jobs/" + id, {}, 5s);
    if (body != nullptr) *body = r.body;
    return r.status == 200 ? json_string(r.body, "state") : "";
  }

  redis_server redis;
};

// A daemon of the fleet that the chaos thread kills and restarts under its name.
struct member {
  std::string name;
  std::unique_ptr<daemon_process> proc;
  std::atomic<std::uint16_t> port{0};
};

// 5,000 jobs in Release, so that the random kills (one every 300 ms) land
// many times on jobs queued, running and being reclaimed; the sanitizer
// builds, several times slower per request, run 1,000 to stay inside the
// test timeout.
constexpr int kTotalJobs = hourglass::testing::sanitized ? 1000 : 5000;

TEST_F(FleetFaults, KillingDaemonsAtRandomLosesNoAcceptedJobAndRecordsOneOutcomeEach) {
  constexpr int kDaemons = 4;
  constexpr int kJobs = kTotalJobs;
  std::vector<std::unique_ptr<member>> fleet;
  for (int i = 0; i < kDaemons; ++i) {
    auto m = std::make_unique<member>();
    m->name = "d" + std::to_string(i);
    m->proc = std::make_unique<daemon_process>(args_with_fresh_metrics(m->name));
    m->port = m->proc->wait_for_port();
    ASSERT_NE(m->port.load(), 0) << m->proc->output();
    fleet.push_back(std::move(m));
  }

  std::atomic<bool> submitting{true};
  int kills = 0;
  int kills_mid_job = 0;  // of a daemon whose workers were running jobs
  // The sanitizer builds' 1,000 jobs are done sooner: fewer kills can land on them.
  constexpr int kMidJobKills = hourglass::testing::sanitized ? 3 : 8;
  std::thread chaos([&] {
    std::mt19937 rng(12345);
    // Kills go on after the last submit, while the backlog runs: 8 at least,
    // and on until enough landed on running jobs (bounded: an idle fleet ends it).
    while (submitting || kills < 8 || (kills_mid_job < kMidJobKills && kills < 30)) {
      std::this_thread::sleep_for(300ms);  // the chaos's pace (a kill every 300 ms at most) is the scenario
      member& victim = *fleet[rng() % kDaemons];
      // Not hoped for: the kill lands on jobs running (or, once the backlog
      // is gone, on an idle daemon after 2 s).
      if (wait_until([&] { return workers_busy(victim.port.load()) > 0; }, 2s)) ++kills_mid_job;
      victim.port = 0;
      victim.proc->signal(SIGKILL);
      victim.proc->wait_exit(5s);
      victim.proc = std::make_unique<daemon_process>(args_with_fresh_metrics(victim.name));  // the same name again
      victim.port = victim.proc->wait_for_port();
      ++kills;
    }
  });

  // Each job has an idempotency key; a failed submit is retried on another
  // daemon with the same key, so a job is never accepted twice. Its
  // freshness is the longest allowed: the backlog of 5,000 jobs behind
  // restarting daemons can take longer than the default 10 s on a loaded
  // machine, and this test is about losing nothing, not about expiry.
  std::map<std::string, std::string> id_of_key;
  int refused = 0;
  for (int j = 0; j < kJobs; ++j) {
    const std::string key = "job-" + std::to_string(j);
    for (int attempt = 0; attempt < 200 && id_of_key.count(key) == 0; ++attempt) {
      const std::uint16_t port = fleet[(j + attempt) % kDaemons]->port.load();
      if (port == 0) continue;
      const reply r = post(port, "/v1/jobs/sleep", R"({"ms": 20})",
                           {{"Prefer", "respond-async"}, {"Idempotency-Key", key}, {"Job-Freshness", "60S"}}, 5s);
      if (r.status == 202) {
        id_of_key[key] = json_string(r.body, "id");
      } else {
        ++refused;
        std::this_thread::sleep_for(5ms);
      }
    }
    ASSERT_EQ(id_of_key.count(key), 1u) << "job " << j << " never accepted";
  }
  submitting = false;
  chaos.join();
  EXPECT_GE(kills, 8) << "the chaos must have happened";
  EXPECT_GE(kills_mid_job, kMidJobKills) << "killed while running jobs, " << kills_mid_job << " times of " << kills;

  // Every accepted job ends ok, readable from every daemon, with one outcome.
  std::map<std::string, std::string> final_state;
  long long runs_beyond_one = 0;  // starts after the first: a killed run, or a second completion
  ASSERT_TRUE(wait_until(
      [&] {
        for (const auto& [key, id] : id_of_key) {
          if (final_state.count(id) != 0) continue;
          std::string body;
          const std::string s = state_of(fleet[0]->port, id, &body);
          if (s == "queued" || s == "running" || s.empty()) return false;
          final_state[id] = s;
          runs_beyond_one += std::max(0LL, static_cast<long long>(json_number(body, "deliveries")) - 1);
        }
        return true;
      },
      180s))
      << final_state.size() << " of " << id_of_key.size() << " jobs finished";
  int lost = 0;
  int unexpected = 0;
  for (const auto& [key, id] : id_of_key) {
    const auto it = final_state.find(id);
    if (it == final_state.end()) ++lost;
    if (it != final_state.end() && it->second != "ok") ++unexpected;
  }
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(unexpected, 0);
  for (int i = 1; i < kDaemons; ++i) {
    for (const auto& [key, id] : id_of_key) {
      ASSERT_EQ(state_of(fleet[i]->port, id), "ok") << "daemon " << i << " reads job " << id;
    }
  }
  // Nothing left behind, nothing deleted while pending.
  EXPECT_EQ(raw({"XLEN", "hg:{default}:stream"}).integer, 0);
  const fleet::redis_reply dup = raw({"HGET", "hg:{default}:stats", "duplicate_outcomes"});
  const long long duplicates = dup.is_nil() ? 0 : std::stoll(dup.str);
  long long counted = 0;
  for (const auto& m : fleet) {
    const std::string metrics = get(m->port, "/metrics").body;
    EXPECT_NE(metrics.find("hourglass_fleet_lost_entries_total 0\n"), std::string::npos) << m->name;
    const double n = metric_value(metrics, "hourglass_fleet_duplicate_outcomes_total");
    EXPECT_FALSE(std::isnan(n)) << m->name;
    counted += static_cast<long long>(n);
  }
  // The broker counts every second completion (the finish script, atomically);
  // each needs a run beyond the first. A daemon's own count dies with it, so
  // the live daemons' sum is at most the broker's. (A run cut by kill -9 is a
  // run beyond one with no outcome at all: the two are not equal.)
  EXPECT_LE(duplicates, runs_beyond_one);
  EXPECT_LE(counted, duplicates) << "duplicate outcomes: broker " << duplicates << ", live daemons " << counted;
  // Then drain: every daemon answers SIGTERM with exit 0, leaving nothing pending.
  for (const auto& m : fleet) {
    m->proc->signal(SIGTERM);
    EXPECT_EQ(m->proc->wait_exit(10s), 0) << m->name << ": " << m->proc->output();
  }
  EXPECT_EQ(raw({"XPENDING", "hg:{default}:stream", "hourglass"}).elements[0].integer, 0);
  std::cout << "[ fleet ] " << kJobs << " jobs, " << kills << " kill -9s, " << refused << " refused submits, "
            << runs_beyond_one << " runs beyond one, " << duplicates << " duplicate outcomes\n";
}

TEST_F(FleetFaults, DrainingADaemonUnderLoadLosesNothingAndCountsNoFailedDelivery) {
  daemon_process a(args("a"));
  daemon_process b(args("b"));
  const std::uint16_t pa = a.wait_for_port();
  const std::uint16_t pb = b.wait_for_port();
  ASSERT_NE(pa, 0) << a.output();
  ASSERT_NE(pb, 0) << b.output();
  std::vector<std::string> ids;
  for (int i = 0; i < 200; ++i) {
    const reply r = post(i % 2 == 0 ? pa : pb, "/v1/jobs/sleep", R"({"ms": 30})", {{"Prefer", "respond-async"}});
    ASSERT_EQ(r.status, 202u) << r.body;
    ids.push_back(json_string(r.body, "id"));
  }
  a.signal(SIGTERM);  // mid-backlog: its running jobs finish or go back, its queued ones go back
  EXPECT_EQ(a.wait_exit(20s), 0) << a.output();
  for (const std::string& id : ids) {
    std::string body;
    ASSERT_TRUE(wait_until([&] { return state_of(pb, id, &body) == "ok"; }, 60s)) << id << ": " << body;
    EXPECT_EQ(json_number(body, "deliveries"), 1.0) << "a drain is not a failed delivery: " << body;
  }
}

TEST_F(FleetFaults, APoisonJobIsDeadLetteredAfterMaxDeliveriesWithoutALoop) {
  auto d = std::make_unique<daemon_process>(args("p", "3"));
  std::uint16_t port = d->wait_for_port();
  ASSERT_NE(port, 0) << d->output();
  const reply r = post(port, "/v1/jobs/sleep", R"({"ms": 600000})", {{"Prefer", "respond-async"}});
  ASSERT_EQ(r.status, 202u) << r.body;
  const std::string id = json_string(r.body, "id");
  for (int run = 1; run <= 3; ++run) {
    std::string body;
    // Running in this life: the record says "running" from the last life too.
    ASSERT_TRUE(wait_until(
        [&] { return state_of(port, id, &body) == "running" && json_number(body, "deliveries") == run; }, 20s))
        << body;
    d->signal(SIGKILL);  // the job kills its worker process, every time
    d->wait_exit(5s);
    d = std::make_unique<daemon_process>(args("p", "3"));
    port = d->wait_for_port();
    ASSERT_NE(port, 0) << d->output();
  }
  std::string body;
  ASSERT_TRUE(wait_until([&] { return state_of(port, id, &body) == "dead"; }, 20s)) << body;
  EXPECT_EQ(json_string(body, "cause"), "max_deliveries");
  EXPECT_EQ(raw({"XLEN", "hg:{default}:dead"}).integer, 1);
  EXPECT_EQ(raw({"XLEN", "hg:{default}:stream"}).integer, 0) << "not delivered again";
}

TEST_F(FleetFaults, ABrokerKilledAndRestartedLosesNoJobThatGotA202) {
  daemon_process d(args_with_fresh_metrics("b"));
  const std::uint16_t port = d.wait_for_port();
  ASSERT_NE(port, 0) << d.output();
  std::vector<std::string> accepted;
  for (int i = 0; i < 50; ++i) {
    const reply r = post(port, "/v1/jobs/sleep", R"({"ms": 40})", {{"Prefer", "respond-async"}});
    ASSERT_EQ(r.status, 202u) << r.body;
    accepted.push_back(json_string(r.body, "id"));
  }
  ASSERT_TRUE(wait_until([&] { return workers_busy(port) > 0; }, 20s)) << "no job ran";
  redis.kill9();  // jobs are queued and running; appendfsync always has them on disk
  int refused_while_down = 0;
  for (int i = 0; i < 5; ++i) {
    const reply r = post(port, "/v1/jobs/sleep", R"({"ms": 1})", {{"Prefer", "respond-async"}});
    EXPECT_NE(r.status, 202u) << "no 202 for a job the broker does not hold";
    if (r.status == 503 && json_string(r.body, "error") == "broker_unavailable") ++refused_while_down;
  }
  EXPECT_EQ(refused_while_down, 5);
  // The jobs that were running finish while the broker is away (and none
  // starts without it): their outcomes wait for it.
  ASSERT_TRUE(wait_until([&] { return workers_busy(port) == 0; }, 20s)) << "jobs ran on without the broker";
  redis.restart();
  for (const std::string& id : accepted) {
    std::string body;
    ASSERT_TRUE(wait_until([&] { return state_of(port, id, &body) == "ok"; }, 60s)) << id << ": " << body;
  }
}

TEST_F(FleetFaults, DaemonsWhoseWallClocksAreTenMinutesOffDecideExactlyAsOnesWithoutSkew) {
  const std::vector<std::string> expected{"ok/", "deadline_exceeded/queue", "ok/"};
  for (const std::string skew : {"", "-10m", "+10m"}) {
    const std::vector<std::string> prefix = skewed_clock(skew);
    std::vector<std::string> a = args("skew" + skew, "3");
    a.insert(a.end(), {"--queue",
                       "q" + std::string(skew.empty()               ? "0"
                                         : skew.substr(0, 1) == "-" ? "m"
                                                                    : "p"),
                       "--workers", "1"});
    daemon_process d(a, prefix);
    const std::uint16_t port = d.wait_for_port();
    ASSERT_NE(port, 0) << d.output();
    if (!skew.empty()) {
      const std::string metrics = get(port, "/metrics").body;
      const double offset = metric_value(metrics, "hourglass_fleet_broker_clock_offset_seconds");
      EXPECT_NEAR(std::abs(offset), 600.0, 30.0) << "the skew is real: " << skew;
    }
    EXPECT_EQ(freshness_decisions(port), expected) << "skew " << (skew.empty() ? "none" : skew);
  }
}

// Two hosts 20 minutes apart in one fleet: the daemon that accepts (and
// stamps) a job at -10 min, another at +10 min runs it. Were any wall clock
// compared with another, every job would look 20 minutes old (or new).
TEST_F(FleetFaults, AFleetWhoseHostsDisagreeByTwentyMinutesDecidesAsAnUnskewedOne) {
  std::vector<std::vector<std::string>> seen;
  for (const auto& [early, late] : {std::pair<std::string, std::string>{"", ""}, {"-10m", "+10m"}}) {
    const std::string queue = early.empty() ? "pair0" : "pair1";
    const auto member = [&](const std::string& name) {
      std::vector<std::string> a = args(name + queue, "3");
      a.insert(a.end(), {"--queue", queue, "--workers", "1"});
      return a;
    };
    daemon_process p(member("early"), skewed_clock(early));
    daemon_process c(member("late"), skewed_clock(late));
    const std::uint16_t pp = p.wait_for_port();
    ASSERT_NE(pp, 0) << p.output();
    ASSERT_NE(c.wait_for_port(), 0) << c.output();
    seen.push_back(freshness_decisions(pp, 2));  // a blocker on each daemon, then stale and fresh
  }
  const std::vector<std::string> expected{"ok/", "ok/", "deadline_exceeded/queue", "ok/"};
  EXPECT_EQ(seen[0], expected) << "unskewed";
  EXPECT_EQ(seen[1], expected) << "-10 min and +10 min";
}

}  // namespace
}  // namespace hourglass::server::testing
