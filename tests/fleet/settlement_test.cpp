// settle(): what a job's result becomes, without a broker or threads.
#include "settlement.hpp"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

namespace hourglass::fleet::detail::testing {
namespace {

using namespace std::chrono_literals;

std::map<std::string, std::string> as_map(const field_list& f) { return {f.begin(), f.end()}; }

error_record as_bad_input(std::exception_ptr e) {
  error_record r;
  r.http_status = 422;
  r.code = "bad_input";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    r.message = ex.what();
  }
  return r;
}

job_result<run_value> ran(std::string body) {
  job_result<run_value> r;
  r.result = run_value{run_value::kind::ran, {std::move(body), "text/plain"}};
  return r;
}
job_result<run_value> returned(run_value::kind k) {
  job_result<run_value> r;
  r.result = run_value{k, {}};
  return r;
}
job_result<run_value> ended(status st) {
  job_result<run_value> r;
  r.st = st;
  return r;
}
status cancelled_by(cancel_cause c) { return {outcome::cancelled, reject_reason::none, expiry_stage::none, c}; }

const delivery_facts started{false, true, 40ms, 7500us};
const delivery_facts queued_only{false, false, 40ms, std::nullopt};
const delivery_facts reclaimed_only{true, false, 40ms, std::nullopt};

TEST(Settle, AHandlersResultIsWrittenWithItsQueueAndRunTimes) {
  const settlement s = settle(started, ran("hi"), as_bad_input);
  ASSERT_EQ(s.what, settlement::action::write);
  EXPECT_EQ(s.counted, settlement::tally::none);
  const auto f = as_map(s.fields);
  EXPECT_EQ(f.at("state"), "ok");
  EXPECT_EQ(f.at("result"), "hi");
  EXPECT_EQ(f.at("content_type"), "text/plain");
  EXPECT_EQ(f.at("queued_ms"), "40.000");
  EXPECT_EQ(f.at("run_ms"), "7.500");
  EXPECT_EQ(s.fields.front().first, "state") << "the finish script reads the state first";
}

// A handler that waits (for its children, or a person's signal) ends its
// run without an outcome: written as a wait, nothing recorded or counted.
TEST(Settle, ARunThatEndsWaitingIsWrittenAsAWaitNotAnOutcome) {
  job_result<run_value> r = ran("");
  r.result->out.wait = wait_request{"signal:approve", 30s};
  const settlement s = settle(started, std::move(r), as_bad_input);
  ASSERT_EQ(s.what, settlement::action::write);
  ASSERT_TRUE(s.wait.has_value());
  EXPECT_EQ(s.wait->rule, "signal:approve");
  EXPECT_EQ(s.wait->keep, 30s);
  EXPECT_TRUE(s.fields.empty()) << "no outcome's fields";
  EXPECT_EQ(s.counted, settlement::tally::none);
  EXPECT_FALSE(s.retry.has_value());
}

TEST(Settle, AHandlersExceptionIsRecordedAsItsErrorRecordSays) {
  job_result<run_value> r = ended(status::error());
  r.error = std::make_exception_ptr(std::runtime_error("no such user"));
  const settlement e = settle(started, std::move(r), as_bad_input);
  ASSERT_EQ(e.what, settlement::action::write);
  const auto f = as_map(e.fields);
  EXPECT_EQ(f.at("state"), "error");
  EXPECT_EQ(f.at("error"), "bad_input");
  EXPECT_EQ(f.at("message"), "no such user");
  EXPECT_EQ(f.at("http_status"), "422");
  EXPECT_EQ(f.at("run_ms"), "7.500");
}

TEST(Settle, AFailedStartScriptLeavesTheEntryToReclaimAndCountsABrokerError) {
  job_result<run_value> r = ended(status::error());
  r.error = std::make_exception_ptr(std::runtime_error("redis: lost the connection"));
  const settlement s = settle(queued_only, std::move(r), as_bad_input);
  EXPECT_EQ(s.what, settlement::action::forget);
  EXPECT_EQ(s.counted, settlement::tally::broker_error);
}

TEST(Settle, ExpiredAtTheStartScriptIsStageQueueOrReclaimAndNeverRan) {
  const settlement q = settle(queued_only, returned(run_value::kind::expired), as_bad_input);
  ASSERT_EQ(q.what, settlement::action::write);
  EXPECT_EQ(q.counted, settlement::tally::expired);
  EXPECT_EQ(as_map(q.fields), (std::map<std::string, std::string>{
                                  {"state", "deadline_exceeded"}, {"stage", "queue"}, {"queued_ms", "40.000"}}));
  const settlement r = settle(reclaimed_only, returned(run_value::kind::expired), as_bad_input);
  EXPECT_EQ(as_map(r.fields).at("stage"), "reclaim");
}

TEST(Settle, ExpiredInOurExecutorsQueueIsStageQueueOrReclaim) {
  const settlement q = settle(queued_only, ended(status::expired(expiry_stage::queue)), as_bad_input);
  EXPECT_EQ(q.counted, settlement::tally::expired);
  EXPECT_EQ(as_map(q.fields).at("stage"), "queue");
  EXPECT_EQ(
      as_map(settle(reclaimed_only, ended(status::expired(expiry_stage::queue)), as_bad_input).fields).at("stage"),
      "reclaim");
}

TEST(Settle, ARunOutOfBudgetIsRecordedWithItsStageAndRunTime) {
  const settlement s = settle(started, ended(status::expired(expiry_stage::run)), as_bad_input);
  ASSERT_EQ(s.what, settlement::action::write);
  EXPECT_EQ(s.counted, settlement::tally::none) << "only expiry before a run counts as expired in queue";
  const auto f = as_map(s.fields);
  EXPECT_EQ(f.at("state"), "deadline_exceeded");
  EXPECT_EQ(f.at("stage"), "run");
  EXPECT_EQ(f.at("run_ms"), "7.500");
}

TEST(Settle, RefusedByThisDaemonsAdmissionGoesBackToTheFleet) {
  const settlement s = settle(queued_only, ended(status::expired(expiry_stage::admission)), as_bad_input);
  EXPECT_EQ(s.what, settlement::action::hand_back) << "another daemon may start it in time";
  EXPECT_TRUE(s.fields.empty());
}

TEST(Settle, RefusedByAFullOrStoppingExecutorGoesBackToTheFleet) {
  EXPECT_EQ(settle(queued_only, ended(status::rejected(reject_reason::queue_full)), as_bad_input).what,
            settlement::action::hand_back);
  EXPECT_EQ(settle(queued_only, ended(status::rejected(reject_reason::shutting_down)), as_bad_input).what,
            settlement::action::hand_back);
}

TEST(Settle, AJobWhoseCallMetAnOpenBreakerIsRecordedNotHandedBack) {
  // It ran: handing it back would run it again against the same open breaker.
  const settlement s = settle(started, ended(status::rejected(reject_reason::circuit_open)), as_bad_input);
  ASSERT_EQ(s.what, settlement::action::write);
  const auto f = as_map(s.fields);
  EXPECT_EQ(f.at("state"), "rejected");
  EXPECT_EQ(f.at("reason"), "circuit_open");
  EXPECT_EQ(f.at("run_ms"), "7.500");
  EXPECT_EQ(s.recorded, status::rejected(reject_reason::circuit_open));
}

TEST(Settle, AJobThatCrossedACommitPointSaysSoWhateverItsOutcome) {
  job_result<run_value> late = ended(status::expired(expiry_stage::run));
  late.timings.committed = true;
  const settlement s = settle(started, std::move(late), as_bad_input);
  ASSERT_EQ(s.what, settlement::action::write);
  EXPECT_EQ(as_map(s.fields).at("committed"), "1");
  EXPECT_EQ(as_map(settle(started, ran("hi"), as_bad_input).fields).count("committed"), 0u);
}

TEST(Settle, StoppedBeforeItStartedGoesBackUnlessADeleteAskedForIt) {
  EXPECT_EQ(settle(queued_only, ended(cancelled_by(cancel_cause::shutdown)), as_bad_input).what,
            settlement::action::hand_back);
  const settlement asked = settle(queued_only, ended(cancelled_by(cancel_cause::requested)), as_bad_input);
  ASSERT_EQ(asked.what, settlement::action::write);
  EXPECT_EQ(as_map(asked.fields).at("state"), "cancelled");
  EXPECT_EQ(as_map(asked.fields).at("cause"), "requested");
}

TEST(Settle, ACancelledRunIsRecordedWithItsCause) {
  const settlement s = settle(started, ended(cancelled_by(cancel_cause::shutdown)), as_bad_input);
  ASSERT_EQ(s.what, settlement::action::write);
  const auto f = as_map(s.fields);
  EXPECT_EQ(f.at("cause"), "shutdown");
  EXPECT_EQ(f.at("run_ms"), "7.500");
}

TEST(Settle, DeadLetteredOrNotOursLeavesNothingToWrite) {
  const settlement dead = settle(queued_only, returned(run_value::kind::dead), as_bad_input);
  EXPECT_EQ(dead.what, settlement::action::forget) << "the start script recorded state dead";
  EXPECT_EQ(dead.counted, settlement::tally::dead_lettered);
  const settlement skipped = settle(queued_only, returned(run_value::kind::skipped), as_bad_input);
  EXPECT_EQ(skipped.what, settlement::action::forget);
  EXPECT_EQ(skipped.counted, settlement::tally::none);
}

// ---- a failed attempt of a job with a retry policy ----

// A 503 from the handler (retryable), as the daemon describes it.
error_record as_upstream_down(std::exception_ptr) { return {503, "upstream_down", "the upstream is down", true}; }
error_record as_permanent(std::exception_ptr) { return {503, "upstream_down", "gone for good", false}; }

job_result<run_value> failed_attempt() {
  job_result<run_value> r = ended(status::error());
  r.error = std::make_exception_ptr(std::runtime_error("down"));
  return r;
}

// Attempt `attempt` of 3 (backoff 100 ms to 1 s), on the broker's clock at 1000 s.
delivery_facts attempt_facts(int attempt, time_point deadline) {
  delivery_facts d = started;
  d.retry.policy = {.max_attempts = 3, .base = 100ms, .cap = 1s};
  d.retry.attempt = attempt;
  d.retry.deadline = deadline;
  d.retry.now = time_point(1000s);
  d.retry.predicted_wait = 50ms;
  d.retry.min_budget = 20ms;
  d.retry.jitter = 0.5;
  return d;
}

TEST(SettleRetry, AFailedAttemptWithAttemptsLeftAsksTheFinishForARetry) {
  const settlement s = settle(attempt_facts(1, time_point(1010s)), failed_attempt(), as_upstream_down);
  ASSERT_EQ(s.what, settlement::action::write);
  ASSERT_TRUE(s.retry.has_value());
  EXPECT_EQ(s.retry->delay, 50ms) << "half (the jitter) of the first backoff, 100 ms";
  EXPECT_EQ(s.retry->need, 70ms) << "the predicted wait and the minimum budget, due before the deadline";
  EXPECT_EQ(s.retry->error, "upstream_down");
  EXPECT_EQ(s.retry->message, "the upstream is down");
  EXPECT_EQ(s.retry->run_time, 7500us);
  EXPECT_EQ(s.retry_verdict, job_retry_verdict::scheduled);
  // Should the retry no longer fit on the broker's own clock, this is recorded:
  const auto f = as_map(s.fields);
  EXPECT_EQ(s.fields.front(), (std::pair<std::string, std::string>{"state", "deadline_exceeded"}));
  EXPECT_EQ(f.at("stage"), "retry");
  EXPECT_EQ(f.at("error"), "upstream_down") << "the last attempt's error is kept";
  EXPECT_EQ(f.at("queued_ms"), "40.000");
  EXPECT_EQ(s.recorded, status::expired(expiry_stage::retry));
}

TEST(SettleRetry, ARetryThatWouldStartShortOfItsMinimumBudgetEndsTheJobAndOneWithExactlyItIsScheduled) {
  // due 1000.050 s + wait 50 ms + min budget 20 ms = 1000.120 s
  const time_point edge = time_point(1000s) + 120ms;
  const settlement at_edge = settle(attempt_facts(1, edge - 1ns), failed_attempt(), as_upstream_down);
  EXPECT_FALSE(at_edge.retry.has_value());
  EXPECT_EQ(at_edge.retry_verdict, job_retry_verdict::no_budget);
  EXPECT_EQ(as_map(at_edge.fields).at("state"), "deadline_exceeded");
  EXPECT_EQ(as_map(at_edge.fields).at("stage"), "retry");
  EXPECT_EQ(at_edge.recorded, status::expired(expiry_stage::retry));

  const settlement inside = settle(attempt_facts(1, edge), failed_attempt(), as_upstream_down);
  ASSERT_TRUE(inside.retry.has_value());
  EXPECT_EQ(inside.retry_verdict, job_retry_verdict::scheduled);
}

TEST(SettleRetry, TheLastAttemptOrAPermanentErrorIsRecordedAsTheError) {
  const settlement last = settle(attempt_facts(3, never), failed_attempt(), as_upstream_down);
  EXPECT_FALSE(last.retry.has_value());
  EXPECT_EQ(last.retry_verdict, job_retry_verdict::exhausted);
  EXPECT_EQ(as_map(last.fields).at("state"), "error");
  EXPECT_EQ(last.recorded, status::error());

  const settlement permanent = settle(attempt_facts(1, never), failed_attempt(), as_permanent);
  EXPECT_FALSE(permanent.retry.has_value());
  EXPECT_EQ(permanent.retry_verdict, job_retry_verdict::not_retryable);
  EXPECT_EQ(as_map(permanent.fields).at("message"), "gone for good");

  const settlement no_policy = settle(started, failed_attempt(), as_upstream_down);
  EXPECT_FALSE(no_policy.retry.has_value());
  EXPECT_FALSE(no_policy.retry_verdict.has_value()) << "a job of one attempt is not counted as retried";
}

TEST(SettleRetry, AnAttemptThatRanOutOfTheJobsDeadlineIsNeverRetried) {
  const settlement s = settle(attempt_facts(1, time_point(1010s)), ended(status::expired(expiry_stage::run)),
                              as_upstream_down);
  EXPECT_FALSE(s.retry.has_value());
  EXPECT_EQ(as_map(s.fields).at("stage"), "run");
}

}  // namespace
}  // namespace hourglass::fleet::detail::testing
