// Retries of async jobs in fleet mode (--broker): a failed attempt's retry
// waits in Redis (the delayed set, on the broker's clock), any daemon moves
// it to the stream when due, and every retry stays inside the job's overall
// deadline. Real redis-server, real daemons on loopback, real time (the
// broker's clock decides): generous bounds that still assert.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <mutex>
#include <string>
#include <vector>

#include "fleet/redis_server.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/rfc3339.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

using fleet::testing::redis_server;
namespace json = boost::json;

// A handler that fails with a 503 `failures` times (after `fail_after`),
// then answers "done"; it keeps each call's time and idempotency key.
struct failing_handler {
  std::atomic<int> calls{0};
  int failures = 0;
  duration fail_after{};
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> at;
  std::vector<std::string> keys;
  handler_fn fn() {
    return [this](const context& ctx, const request_view& req) {
      {
        std::lock_guard lock(mu);
        at.push_back(std::chrono::steady_clock::now());
        keys.emplace_back(req.idempotency_key);
      }
      if (calls.fetch_add(1) < failures) {
        if (fail_after > duration::zero()) ctx.sleep_for(fail_after);
        throw handler_error(503, "upstream_down", "the upstream is down");
      }
      return handler_result{"done", "text/plain"};
    };
  }
};

struct FleetRetry : ::testing::Test {
  server_options fleet_options(const std::string& consumer) {
    server_options o = test_options();
    o.broker = "redis://127.0.0.1:" + std::to_string(redis.port());
    o.consumer = consumer;
    o.lease = 600ms;
    o.workers = 2;
    return o;
  }
  json::value job(std::uint16_t port, const std::string& id) {
    const auto doc = support::parse_json(get(port, "/v1/jobs/" + id).body);
    return doc ? *doc : json::value();
  }
  static std::string state_of(const json::value& j) {
    return j.is_object() && j.as_object().contains("state") ? std::string(j.at("state").as_string()) : "";
  }
  // Polls the job until its state is `want`; the job as last read.
  json::value wait_job(std::uint16_t port, const std::string& id, const std::string& want,
                       std::chrono::milliseconds limit = 15s) {
    json::value last;
    wait_until(
        [&] {
          last = job(port, id);
          return state_of(last) == want;
        },
        limit);
    return last;
  }
  std::string submit(std::uint16_t port, const std::string& handler, headers hs = {}, const std::string& body = "x") {
    hs.emplace_back("Prefer", "respond-async");
    const reply r = post(port, "/v1/jobs/" + handler, body, hs);
    EXPECT_EQ(r.status, 202u) << r.body;
    return json_string(r.body, "id");
  }
  fleet::redis_reply broker_call(std::vector<std::string> cmd) {
    fleet::testing::io_thread io;
    fleet::redis_connection c(io.io, redis.endpoint());
    return c.call(context(), std::move(cmd));
  }
  long long delayed_count() { return broker_call({"ZCARD", "hg:{default}:delayed"}).integer; }
  bool in_delayed_set(const std::string& id) { return !broker_call({"ZSCORE", "hg:{default}:delayed", id}).is_nil(); }
  static double retries(test_server& s, const std::string& handler, const std::string& result) {
    return metric_value(get(s.port(), "/metrics").body,
                        "hourglass_job_retries_total{handler=\"" + handler + "\",result=\"" + result + "\"}");
  }

  redis_server redis;
};

TEST_F(FleetRetry, AFlakyJobIsRetriedThroughRedisAndEndsOkOnAttemptThree) {
  failing_handler f;
  f.failures = 2;
  const auto add = [&](http_server& s) {
    s.add_handler("flaky", f.fn(), {.retry = {.max_attempts = 5, .base = 100ms, .cap = 1s}});
  };
  test_server a(fleet_options("a"), add);
  test_server b(fleet_options("b"), add);
  const std::string id = submit(a.port(), "flaky");
  const json::value done = wait_job(b.port(), id, "ok");
  ASSERT_EQ(state_of(done), "ok") << support::serialize_json(done);
  EXPECT_EQ(done.at("result").as_string(), "done");
  EXPECT_EQ(done.at("attempt").to_number<int>(), 3);
  EXPECT_EQ(done.at("attempts_left").to_number<int>(), 2);
  const json::array& tries = done.at("attempts").as_array();
  ASSERT_EQ(tries.size(), 3u) << "every attempt listed, the last one too";
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(tries[i].at("outcome").as_string(), "error");
    EXPECT_EQ(tries[i].at("error").as_string(), "upstream_down");
  }
  EXPECT_EQ(tries[2].at("outcome").as_string(), "ok");
  EXPECT_EQ(f.calls.load(), 3);
  {
    std::lock_guard lock(f.mu);
    ASSERT_EQ(f.at.size(), 3u);
    // Full jitter under 100 ms, then under 200 ms; plus the fleet's own
    // moves (a reader looks at least every 200 ms) and a loaded machine's.
    EXPECT_LT(f.at[1] - f.at[0], 100ms + 2s);
    EXPECT_LT(f.at[2] - f.at[1], 200ms + 2s);
    EXPECT_EQ(f.keys[0], id) << "no Idempotency-Key: the job's id";
    EXPECT_EQ(f.keys[1], id) << "every attempt sees the same key";
    EXPECT_EQ(f.keys[2], id);
  }
  // Counted when the finish's reply comes, after the broker records it.
  EXPECT_TRUE(wait_until([&] { return retries(a, "flaky", "scheduled") + retries(b, "flaky", "scheduled") == 2.0; }));
  EXPECT_EQ(delayed_count(), 0);
  EXPECT_TRUE(wait_until([&] { return a.handler("flaky").finished_ok + b.handler("flaky").finished_ok == 1u; }))
      << "one job, one outcome, however many attempts";
  EXPECT_EQ(a.handler("flaky").finished_error + b.handler("flaky").finished_error, 0u);
}

// jitter=none reaches the consumer that plans the retry: each of five jobs
// waits its whole 3 s backoff, counted from its failure, which came after
// it was sent: seen `elapsed` after sending, it is due in at least 3 s less
// that. With full jitter (uniform below 3 s) all five would pass about
// never on an idle machine; a loaded one only makes the bound looser.
TEST_F(FleetRetry, WithoutJitterEveryRetryIsDueItsWholeBackoffLater) {
  failing_handler f;
  f.failures = 1000;
  test_server a(fleet_options("a"), [&](http_server& s) { s.add_handler("flaky", f.fn()); });
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> sent;
  for (int i = 0; i < 5; ++i) {
    const auto at = std::chrono::steady_clock::now();
    sent.emplace_back(submit(a.port(), "flaky", {{"Job-Attempts", "2"}, {"Job-Backoff", "3S, 3S; jitter=none"}}), at);
  }
  for (const auto& [id, at] : sent) {
    const json::value waiting = wait_job(a.port(), id, "scheduled");
    ASSERT_EQ(state_of(waiting), "scheduled") << support::serialize_json(waiting);
    const double elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - at).count();
    const double due_in = waiting.at("due_in_ms").to_number<double>();
    EXPECT_GE(due_in + elapsed_ms, 2990.0) << support::serialize_json(waiting);  // the broker's ms, rounded
    EXPECT_LE(due_in, 3100.0) << "due_ms is rounded up, and read against the broker's clock as last measured";
  }
}

TEST_F(FleetRetry, ARetryThatWouldEndPastTheJobsDeadlineIsNotScheduled) {
  // The attempt fails 2 s in; a retry at once (no backoff) would still need
  // its 1.5 s minimum budget: 3.5 s > the 3 s the job was given.
  failing_handler f;
  f.failures = 10;
  f.fail_after = 2s;
  test_server a(fleet_options("a"), [&](http_server& s) {
    s.add_handler("slow_fail", f.fn(), {.min_budget = 1500ms, .retry = {.max_attempts = 3, .base = 0ms, .cap = 0ms}});
  });
  const std::string id = submit(a.port(), "slow_fail", {{"Job-Deadline", "3S"}});
  const json::value done = wait_job(a.port(), id, "deadline_exceeded");
  ASSERT_EQ(state_of(done), "deadline_exceeded") << support::serialize_json(done);
  EXPECT_EQ(done.at("stage").as_string(), "retry");
  EXPECT_EQ(done.at("error").as_string(), "upstream_down") << "the last attempt's error is kept";
  EXPECT_EQ(done.at("attempt").to_number<int>(), 1);
  EXPECT_EQ(f.calls.load(), 1) << "never run again";
  EXPECT_TRUE(wait_until([&] { return retries(a, "slow_fail", "no_budget") == 1.0; }))
      << "counted when the finish's reply comes, after the broker records it";
  EXPECT_EQ(retries(a, "slow_fail", "scheduled"), 0.0);
  EXPECT_TRUE(wait_until([&] { return a.handler("slow_fail").finished_deadline_exceeded == 1u; }));
  EXPECT_EQ(delayed_count(), 0);
}

TEST_F(FleetRetry, AScheduledRetryIsCancelledByADeleteAndNeverRuns) {
  failing_handler f;
  f.failures = 10;
  test_server a(fleet_options("a"), [&](http_server& s) {
    s.add_handler("flaky", f.fn(), {.retry = {.max_attempts = 3, .base = 60s, .cap = 60s}});
  });
  // A backoff of 60 s scaled by the jitter: retry until one draws at least 1 s.
  std::string id;
  json::value waiting;
  for (int i = 0; i < 20; ++i) {
    id = submit(a.port(), "flaky");
    waiting = wait_job(a.port(), id, "scheduled");
    if (state_of(waiting) == "scheduled" && waiting.at("due_in_ms").to_number<double>() > 1000) break;
  }
  ASSERT_EQ(state_of(waiting), "scheduled") << support::serialize_json(waiting);
  EXPECT_LE(waiting.at("due_in_ms").to_number<double>(), 60000.0);
  EXPECT_EQ(waiting.at("attempt").to_number<int>(), 1);
  EXPECT_EQ(waiting.at("attempts_left").to_number<int>(), 2);
  // Listed as retrying (and as scheduled: it waits for a due time), walked along the delayed set.
  EXPECT_NE(get(a.port(), "/v1/jobs?state=retrying").body.find(id), std::string::npos);
  EXPECT_NE(get(a.port(), "/v1/jobs?state=scheduled&handler=flaky").body.find(id), std::string::npos);
  EXPECT_EQ(get(a.port(), "/v1/jobs?state=scheduled&handler=other").body.find(id), std::string::npos);
  // Its own runs only: retries of the jobs tried before it in the loop above may still run.
  const auto runs_of = [&f](const std::string& job) {
    std::lock_guard lock(f.mu);
    return std::count(f.keys.begin(), f.keys.end(), job);
  };
  const auto calls = runs_of(id);
  const reply del = client(a.port()).request("DELETE", "/v1/jobs/" + id);
  EXPECT_EQ(del.status, 200u) << del.body;
  EXPECT_EQ(json_string(del.body, "state"), "cancelled");
  EXPECT_EQ(state_of(job(a.port(), id)), "cancelled");
  wait_until([] { return false; }, 500ms);  // a move that wrongly kept it would run it now
  EXPECT_EQ(runs_of(id), calls);
}

TEST_F(FleetRetry, RetriesWaitingInRedisSurviveSigkillOfEveryDaemon) {
  // `call` to an upstream nobody listens on: a 500 each attempt, retryable.
  const std::vector<std::string> args{"--listen",
                                      "127.0.0.1:0",
                                      "--broker",
                                      "redis://127.0.0.1:" + std::to_string(redis.port()),
                                      "--lease",
                                      "1s",
                                      "--workers",
                                      "1",
                                      "--upstream",
                                      "down=http://127.0.0.1:9",
                                      "--breaker-failures",  // every attempt reaches the (dead) upstream
                                      "1000"};
  std::string id, delayed;
  {
    std::vector<std::string> first = args;
    first.insert(first.end(), {"--consumer", "a"});
    daemon_process a(first);
    const std::uint16_t pa = a.wait_for_port();
    ASSERT_NE(pa, 0) << a.output();
    // The backoff is 3 s scaled by the jitter: one due at least 1 s out,
    // so it surely waits when the daemon dies.
    json::value waiting;
    for (int i = 0; i < 20; ++i) {
      id = submit(pa, "call", {{"Job-Attempts", "3"}, {"Job-Backoff", "3S"}},
                  R"({"upstream": "down", "handler": "echo"})");
      waiting = wait_job(pa, id, "scheduled");
      if (state_of(waiting) == "scheduled" && waiting.at("due_in_ms").to_number<double>() > 1000) break;
    }
    ASSERT_EQ(state_of(waiting), "scheduled") << support::serialize_json(waiting) << a.output();
    delayed = submit(pa, "echo", {{"Job-Delay", "2S"}, {"Job-Freshness", "30S"}}, "later");
    a.signal(SIGKILL);
    a.wait_exit(5s);
  }
  EXPECT_TRUE(in_delayed_set(id)) << "held by Redis, not by the dead daemon";
  EXPECT_TRUE(in_delayed_set(delayed)) << "and the delayed job";
  std::vector<std::string> second = args;
  second.insert(second.end(), {"--consumer", "b"});
  daemon_process b(second);
  const std::uint16_t pb = b.wait_for_port();
  ASSERT_NE(pb, 0) << b.output();
  const json::value done = wait_job(pb, id, "error", 30s);
  ASSERT_EQ(state_of(done), "error") << support::serialize_json(done) << b.output();
  EXPECT_EQ(done.at("error").as_string(), "upstream_unreachable");
  EXPECT_EQ(done.at("attempt").to_number<int>(), 3) << "both retries ran, on the new daemon";
  EXPECT_EQ(done.at("attempts_left").to_number<int>(), 0);
  EXPECT_EQ(done.at("attempts").as_array().size(), 3u);
  EXPECT_FALSE(in_delayed_set(id));
  const json::value later = wait_job(pb, delayed, "ok");
  EXPECT_EQ(state_of(later), "ok") << support::serialize_json(later);
  if (state_of(later) == "ok") {
    EXPECT_EQ(later.at("result").as_string(), "later");
  }
}

// Daemons whose wall clocks are ten minutes off, either way, delay and retry
// exactly as an unskewed one: every due time is the broker's TIME plus the
// delay (or a Job-Not-Before compared with the broker's TIME). Were a
// daemon's own clock used, the job at +10 min would wait ten minutes more,
// and the one at -10 min would run at once.
TEST_F(FleetRetry, SkewedDaemonsDelayAndRetryOnTheBrokersClock) {
  for (const std::string skew : {"", "-10m", "+10m"}) {
    SCOPED_TRACE("skew " + (skew.empty() ? std::string("none") : skew));
    const std::string queue = skew.empty() ? "q0" : skew.substr(0, 1) == "-" ? "qm" : "qp";
    daemon_process d({"--listen", "127.0.0.1:0", "--broker", "redis://127.0.0.1:" + std::to_string(redis.port()),
                      "--queue", queue, "--consumer", "skew" + queue, "--workers", "2", "--upstream",
                      "down=http://127.0.0.1:9", "--breaker-failures", "1000", "--schedule", "tick|@every 1s|echo"},
                     skewed_clock(skew));
    const std::uint16_t port = d.wait_for_port();
    ASSERT_NE(port, 0) << d.output();
    const auto began = std::chrono::steady_clock::now();  // before `wall`: the due times count from it
    const auto wall = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
    const std::string by_delay = submit(port, "echo", {{"Job-Delay", "1500m"}});
    const std::string by_time = submit(
        port, "echo", {{"Job-Not-Before", support::format_rfc3339(wall + std::chrono::milliseconds(1500))}});
    const std::string retried = submit(port, "call", {{"Job-Attempts", "2"}, {"Job-Backoff", "200m"}},
                                       R"({"upstream": "down", "handler": "echo"})");
    for (const std::string& id : {by_delay, by_time}) {
      const json::value waiting = job(port, id);
      EXPECT_EQ(state_of(waiting), "scheduled") << support::serialize_json(waiting);
      if (state_of(waiting) != "scheduled") continue;
      EXPECT_GT(waiting.at("due_in_ms").to_number<double>(), 500.0) << "judged on the broker's clock";
      EXPECT_LE(waiting.at("due_in_ms").to_number<double>(), 1500.0);
    }
    for (const std::string& id : {by_delay, by_time}) {
      const json::value done = wait_job(port, id, "ok", 10s);
      EXPECT_EQ(state_of(done), "ok") << support::serialize_json(done) << d.output();
    }
    EXPECT_GE(std::chrono::steady_clock::now() - began, 1400ms) << "neither ran before its due time";
    // The schedule fired on the broker's clock: its last fire is now, not ten minutes off.
    const auto sched = support::parse_json(get(port, "/v1/schedules").body);
    ASSERT_TRUE(sched.has_value());
    const json::object& tick = sched->at("schedules").as_array().at(0).as_object();
    EXPECT_GE(tick.at("fires").at("enqueued").to_number<int>(), 1) << support::serialize_json(*sched);
    if (tick.contains("last_fire")) {
      const auto fired = support::parse_rfc3339(tick.at("last_fire").as_string());
      ASSERT_TRUE(fired.has_value());
      const auto now = std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
      EXPECT_LT(std::chrono::abs(now - *fired), std::chrono::seconds(5)) << support::serialize_json(*sched);
    }
    const json::value failed = wait_job(port, retried, "error", 10s);
    EXPECT_EQ(state_of(failed), "error") << support::serialize_json(failed);
    if (state_of(failed) == "error") {
      EXPECT_EQ(failed.at("attempt").to_number<int>(), 2);
    }
  }
}

}  // namespace
}  // namespace hourglass::server::testing
