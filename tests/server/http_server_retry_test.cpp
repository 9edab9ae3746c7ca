// Retries of async jobs in memory (no --broker): attempts after a retryable
// error, backoff on the daemon's clock, and every retry inside the job's
// overall deadline (Job-Deadline). The manual clock decides every due time.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>

#include "hourglass/support/json.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

namespace json = boost::json;

json::value job_of(client& c, const std::string& loc) {
  const auto doc = support::parse_json(c.get(loc).body);
  return doc ? *doc : json::value();
}
std::string retry_state(client& c, const std::string& loc) {
  const json::value j = job_of(c, loc);
  return j.is_object() ? std::string(j.at("state").as_string()) : "";
}

std::string submit_job(client& c, const std::string& handler = "flaky", headers hs = {}) {
  hs.emplace_back("Prefer", "respond-async");
  const reply r = c.post("/v1/jobs/" + handler, "x", hs);
  EXPECT_EQ(r.status, 202u) << r.body;
  return r.header("location");
}

// A handler that fails with a 503 `failures` times, then answers "done".
struct flaky {
  std::atomic<int> calls{0};
  int failures = 0;
  handler_fn fn() {
    return [this](const context&, const request_view&) {
      if (calls.fetch_add(1) < failures) throw handler_error(503, "upstream_down", "the upstream is down");
      return handler_result{"done", "text/plain"};
    };
  }
};

double metric(test_server& srv, const std::string& handler, const std::string& result) {
  client c(srv.port());
  return metric_value(c.get("/metrics").body,
                      "hourglass_job_retries_total{handler=\"" + handler + "\",result=\"" + result + "\"}");
}

TEST(HttpServerRetry, AFlakyJobIsRetriedWithinItsBackoffAndEndsOkOnAttemptThree) {
  manual_clock clk;
  flaky f;
  f.failures = 2;
  test_server srv(
      test_options(),
      [&](http_server& s) { s.add_handler("flaky", f.fn(), {.retry = {.max_attempts = 5, .base = 100ms, .cap = 1s}}); },
      clk);
  client c(srv.port());
  const std::string loc = submit_job(c);
  for (int attempt = 1; attempt <= 2; ++attempt) {
    SCOPED_TRACE(attempt);
    ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "scheduled"; })) << c.get(loc).body;
    const json::value j = job_of(c, loc);
    EXPECT_EQ(j.at("attempt").to_number<int>(), attempt);
    EXPECT_EQ(j.at("attempts_left").to_number<int>(), 5 - attempt);
    const json::array& tries = j.at("attempts").as_array();
    ASSERT_EQ(tries.size(), static_cast<std::size_t>(attempt));
    EXPECT_EQ(tries.back().at("outcome").as_string(), "error");
    EXPECT_EQ(tries.back().at("error").as_string(), "upstream_down");
    // Full jitter under 100 ms, then 200 ms: the wait is within [0, bound).
    const double bound_ms = attempt == 1 ? 100.0 : 200.0;
    const double due = j.at("due_in_ms").to_number<double>();
    EXPECT_GE(due, 0.0);
    EXPECT_LT(due, bound_ms);
    EXPECT_EQ(f.calls.load(), attempt) << "nothing runs before its due time";
    // To the due time, not the bound: the manual clock steps through every
    // timer on its way, and the next retry, due within the bound too, would
    // run before this loop saw it scheduled. "scheduled" is shown before the
    // retry's timer is on the clock: moving the clock first would strand it.
    ASSERT_TRUE(clk.wait_for_timers(1)) << "the retry's timer";
    clk.advance(std::chrono::microseconds(static_cast<long long>(std::ceil(due * 1000)) + 1));  // due_in_ms is rounded
  }
  ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "ok"; }));
  const json::value j = job_of(c, loc);
  EXPECT_EQ(j.at("result").as_string(), "done");
  EXPECT_EQ(j.at("attempt").to_number<int>(), 3);
  EXPECT_EQ(j.at("attempts").as_array().size(), 3u) << "every attempt listed, the last one too";
  EXPECT_EQ(f.calls.load(), 3);
  EXPECT_EQ(metric(srv, "flaky", "scheduled"), 2.0);
  EXPECT_EQ(metric(srv, "flaky", "exhausted"), 0.0);
}

// jitter=none: each wait is its ceiling, to the millisecond, and nothing runs
// a microsecond before it.
TEST(HttpServerRetry, WithoutJitterEachRetryWaitsItsWholeBackoff) {
  manual_clock clk;
  flaky f;
  f.failures = 2;
  test_server srv(
      test_options(), [&](http_server& s) { s.add_handler("flaky", f.fn()); }, clk);
  client c(srv.port());
  const std::string loc = submit_job(c, "flaky", {{"Job-Attempts", "3"}, {"Job-Backoff", "100m, 150m; jitter=none"}});
  for (const auto& [attempt_no, backoff] : {std::pair{1, 100ms}, std::pair{2, 150ms}}) {
    const int attempt = attempt_no;  // a lambda may not capture a structured binding in C++20
    const auto wait = backoff;
    SCOPED_TRACE(attempt);
    ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "scheduled"; })) << c.get(loc).body;
    EXPECT_EQ(job_of(c, loc).at("due_in_ms").to_number<double>(), static_cast<double>(wait.count()))
        << "100 ms, then 200 ms capped at 150 ms: no draw below them";
    ASSERT_TRUE(clk.wait_for_timers(1)) << "the retry's timer";
    clk.advance(wait - 1us);
    EXPECT_EQ(retry_state(c, loc), "scheduled") << "not a microsecond early";
    EXPECT_EQ(f.calls.load(), attempt);
    clk.advance(1us);
    ASSERT_TRUE(wait_until([&] { return f.calls.load() == attempt + 1; }));
  }
  ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "ok"; }));
  EXPECT_EQ(f.calls.load(), 3);
}

TEST(HttpServerRetry, ARetryThatWouldComeTooLateForTheJobsDeadlineEndsItAtOnce) {
  manual_clock clk;
  flaky f;
  f.failures = 100;
  test_server srv(
      test_options(),
      [&](http_server& s) {
        s.add_handler("flaky", f.fn(),
                      {.min_budget = 10ms, .retry = {.max_attempts = 5, .base = 10ms, .cap = 10ms, .jitter = false}});
      },
      clk);
  client c(srv.port());
  // Admitted with 15 ms (at least its 10 ms minimum); its retry, due 10 ms
  // after the failure, would start with 5 ms left, less than the 10 ms it
  // needs to be worth starting.
  const std::string loc = submit_job(c, "flaky", {{"Job-Deadline", "15m"}});
  ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "deadline_exceeded"; }));
  const json::value j = job_of(c, loc);
  EXPECT_EQ(j.at("stage").as_string(), "retry");
  EXPECT_EQ(j.at("attempt").to_number<int>(), 1);
  ASSERT_EQ(j.at("attempts").as_array().size(), 1u);
  EXPECT_EQ(j.at("attempts").at(0).at("error").as_string(), "upstream_down") << "the last error is kept";
  EXPECT_EQ(f.calls.load(), 1);
  EXPECT_EQ(metric(srv, "flaky", "no_budget"), 1.0);
}

TEST(HttpServerRetry, TheRequestsHeadersSetThePolicyAndAttemptsRunOut) {
  manual_clock clk;
  flaky f;
  f.failures = 100;
  test_server srv(
      test_options(), [&](http_server& s) { s.add_handler("flaky", f.fn()); }, clk);
  client c(srv.port());
  const std::string once = submit_job(c);
  ASSERT_TRUE(wait_until([&] { return retry_state(c, once) == "error"; }));
  EXPECT_FALSE(job_of(c, once).as_object().contains("attempt")) << "no policy: one attempt, no attempt fields";
  const std::string twice = submit_job(c, "flaky", {{"Job-Attempts", "2"}, {"Job-Backoff", "0m"}});
  ASSERT_TRUE(wait_until([&] { return retry_state(c, twice) == "scheduled"; }));
  ASSERT_TRUE(clk.wait_for_timers(1)) << "the retry's timer, on the clock after \"scheduled\" is shown";
  clk.advance(1ms);
  ASSERT_TRUE(wait_until([&] { return retry_state(c, twice) == "error"; }));
  const json::value j = job_of(c, twice);
  EXPECT_EQ(j.at("attempt").to_number<int>(), 2);
  EXPECT_EQ(j.at("attempts_left").to_number<int>(), 0);
  EXPECT_EQ(j.at("error").as_string(), "upstream_down");
  EXPECT_EQ(f.calls.load(), 3);
  EXPECT_EQ(metric(srv, "flaky", "scheduled"), 1.0);
  EXPECT_EQ(metric(srv, "flaky", "exhausted"), 1.0);
  const reply bad = c.post("/v1/jobs/flaky", "x", {{"Prefer", "respond-async"}, {"Job-Attempts", "0"}});
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(json_string(bad.body, "error"), "invalid_retry_policy");
  EXPECT_EQ(f.calls.load(), 3) << "nothing was taken";
}

TEST(HttpServerRetry, BadInputIsNeverRetried) {
  manual_clock clk;
  std::atomic<int> calls{0};
  test_server srv(
      test_options(),
      [&](http_server& s) {
        s.add_handler("strict",
                      [&](const context&, const request_view&) -> handler_result {
                        ++calls;
                        throw handler_error::bad_input("no");
                      },
                      {.retry = {.max_attempts = 5, .base = 0ms, .cap = 0ms}});
      },
      clk);
  client c(srv.port());
  const std::string loc = submit_job(c, "strict");
  ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "error"; }));
  EXPECT_EQ(json_string(c.get(loc).body, "error"), "invalid_argument");
  clk.advance(1s);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(metric(srv, "strict", "scheduled") + metric(srv, "strict", "exhausted"), 0.0);
}

TEST(HttpServerRetry, DeleteEndsAJobWaitingForItsRetryAndItNeverRunsAgain) {
  manual_clock clk;
  flaky f;
  f.failures = 1;
  test_server srv(
      test_options(),
      [&](http_server& s) { s.add_handler("flaky", f.fn(), {.retry = {.max_attempts = 3, .base = 1s, .cap = 1s}}); },
      clk);
  client c(srv.port());
  const std::string loc = submit_job(c);
  ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "scheduled"; }));
  const reply d = c.request("DELETE", loc);
  EXPECT_EQ(d.status, 200u) << "ended on the spot: nothing runs";
  EXPECT_EQ(json_string(d.body, "state"), "cancelled");
  clk.advance(2s);
  wait_until([] { return false; }, 100ms);  // a retry wrongly submitted would run now
  EXPECT_EQ(f.calls.load(), 1);
  EXPECT_EQ(retry_state(c, loc), "cancelled");
}

// A cancel that reaches a run is never retried: an attempt that fails
// retryably after it (its handler did not stop) ends the job cancelled, as
// the fleet's finish records it. (The executor reports such an attempt
// cancelled; a cancel that comes between the attempt's end and its retry
// is the table's: MemoryJobs.ARetryOfAJobACancelReachedIsRefusedWithItsCause.)
TEST(HttpServerRetry, AFailedAttemptOfAJobADeleteReachedIsRecordedCancelledNotRetried) {
  manual_clock clk;
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  test_server srv(
      test_options(),
      [&](http_server& s) {
        s.add_handler("stubborn",
                      [&](const context&, const request_view&) -> handler_result {
                        ++calls;
                        while (!release.load()) std::this_thread::sleep_for(1ms);  // deaf to its cancel
                        throw handler_error(503, "upstream_down", "the upstream is down");
                      },
                      {.retry = {.max_attempts = 3, .base = 1s, .cap = 1s}});
      },
      clk);
  client c(srv.port());
  const std::string loc = submit_job(c, "stubborn");
  ASSERT_TRUE(wait_until([&] { return calls.load() == 1; }));
  const reply d = c.request("DELETE", loc);
  EXPECT_EQ(d.status, 202u) << "marked: its worker stops it";
  EXPECT_EQ(json_string(d.body, "state"), "running");
  release = true;
  ASSERT_TRUE(wait_until([&] { return retry_state(c, loc) == "cancelled"; })) << c.get(loc).body;
  EXPECT_EQ(job_of(c, loc).at("cause").as_string(), "requested");
  clk.advance(2s);
  EXPECT_EQ(calls.load(), 1) << "never retried";
}

TEST(HttpServerRetry, TheRetryOptionSetsAHandlersPolicyOverItsRegistration) {
  manual_clock clk;
  flaky f;
  f.failures = 1;
  server_options o = test_options();
  o.handler_retries["flaky"] = {.max_attempts = 2, .base = 0ms, .cap = 0ms};  // --retry flaky=2,0s,0s
  test_server srv(
      o, [&](http_server& s) { s.add_handler("flaky", f.fn()); }, clk);
  client c(srv.port());
  const std::string loc = submit_job(c);
  clk.advance(1ms);  // the retry's timer, due at once
  ASSERT_TRUE(wait_until([&] {
    clk.run_due();
    return retry_state(c, loc) == "ok";
  })) << c.get(loc).body;
  EXPECT_EQ(job_of(c, loc).at("attempt").to_number<int>(), 2);

  server_options unknown = test_options();
  unknown.handler_retries["ghost"] = {.max_attempts = 2};
  EXPECT_THROW(test_server bad(unknown), std::invalid_argument) << "a policy for no handler stops the start";
}

}  // namespace
}  // namespace hourglass::server::testing
