// A job's timeline (job_view.hpp's timeline_json), pure: what each kind of
// job's record says of where its time went, and what it leaves out rather
// than guess.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "core/job_view.hpp"

namespace hourglass::server::detail {
namespace {

boost::json::array timeline(const job_view& j) { return boost::json::parse(timeline_json(j)).as_array(); }
double num(const boost::json::value& v, std::string_view key) { return v.at(key).to_number<double>(); }

TEST(JobTimeline, ARunJobWaitsStartsOnItsSecondDeliveryAndEnds) {
  job_view j;
  j.state = "ok";
  j.accepted = true;
  j.freshness_ms = 500;
  j.started_at_ms = 120;
  j.deliveries = 2;
  j.consumer = "b:8080";
  j.starts = {{40, "a:8080"}, {120, "b:8080"}};
  j.queued_ms = 120;
  j.run_ms = 30;
  const auto t = timeline(j);
  ASSERT_EQ(t.size(), 4u) << t;
  EXPECT_EQ(t[0].at("event"), "accepted");
  EXPECT_EQ(num(t[0], "freshness_ms"), 500);
  EXPECT_FALSE(t[0].as_object().contains("deadline_at_ms")) << "no Job-Deadline";
  EXPECT_EQ(t[1].at("event"), "delivered") << "the daemon that died holding it";
  EXPECT_EQ(num(t[1], "at_ms"), 40);
  EXPECT_EQ(t[1].at("consumer"), "a:8080");
  EXPECT_EQ(t[2].at("event"), "started");
  EXPECT_EQ(num(t[2], "waited_ms"), 120);
  EXPECT_EQ(num(t[2], "freshness_left_ms"), 380) << "the budget left at dispatch";
  EXPECT_EQ(num(t[2], "delivery"), 2);
  EXPECT_EQ(t[2].at("consumer"), "b:8080");
  EXPECT_EQ(t[3].at("event"), "finished");
  EXPECT_EQ(num(t[3], "at_ms"), 150);
  EXPECT_EQ(num(t[3], "run_ms"), 30);
}

TEST(JobTimeline, AJobThatExpiredWaitingNeverStartedAndEndedAtItsWait) {
  job_view j;
  j.state = "deadline_exceeded";
  j.stage = "queue";
  j.accepted = true;
  j.freshness_ms = 100;
  j.queued_ms = 140;
  const auto t = timeline(j);
  ASSERT_EQ(t.size(), 2u) << t;
  EXPECT_EQ(t[1].at("event"), "finished");
  EXPECT_EQ(t[1].at("stage"), "queue");
  EXPECT_EQ(num(t[1], "at_ms"), 140);
}

TEST(JobTimeline, ARetriedJobListsItsAttemptsAndCountsItsWaitFromItsDueTime) {
  job_view j;
  j.state = "running";
  j.accepted = true;
  j.freshness_ms = 1000;
  j.deadline_at_ms = 10'000;
  j.attempts = {{"error", "", "boom", "no", 40}};
  j.due_at_ms = 2000;
  j.started_at_ms = 2250;
  const auto t = timeline(j);
  ASSERT_EQ(t.size(), 4u) << t;
  EXPECT_EQ(num(t[0], "deadline_at_ms"), 10'000);
  EXPECT_EQ(t[1].at("event"), "attempt_ended");
  EXPECT_EQ(t[1].at("outcome"), "error");
  EXPECT_EQ(num(t[1], "run_ms"), 40);
  EXPECT_EQ(t[2].at("event"), "due");
  EXPECT_EQ(num(t[2], "at_ms"), 2000);
  EXPECT_EQ(num(t[3], "waited_ms"), 250) << "from its due time, not its acceptance";
  EXPECT_EQ(num(t[3], "freshness_left_ms"), 750);
}

TEST(JobTimeline, AttemptsAreNumberedFromTheFirstOneKept) {
  job_view j;
  j.state = "error";
  j.accepted = true;
  j.attempt = 12;  // twelve ran; the last ten are kept
  j.attempts.assign(10, attempt_view{"error", "", "boom", "no", 1});
  const auto t = timeline(j);
  ASSERT_EQ(t.size(), 12u) << t;
  EXPECT_EQ(num(t[1], "attempt"), 3);
  EXPECT_EQ(num(t[10], "attempt"), 12);
  j.state = "running";  // the twelfth runs: eleven ended, the last ten kept
  j.attempts.pop_back();
  j.attempts.push_back(attempt_view{"error", "", "boom", "no", 1});
  EXPECT_EQ(num(timeline(j)[1], "attempt"), 2);
}

TEST(JobTimeline, AnEarlierAttemptsStartIsNotTheWaitingRetrysAndUnknownTimesAreLeftOut) {
  job_view j;
  j.state = "scheduled";
  j.accepted = true;
  j.due_at_ms = 5000;
  j.started_at_ms = 10;  // the first attempt's
  const auto t = timeline(j);
  ASSERT_EQ(t.size(), 2u) << t;
  EXPECT_EQ(t[1].at("event"), "due");

  job_view dead;
  dead.state = "dead";
  dead.accepted = true;
  const auto d = timeline(dead);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].at("state"), "dead");
  EXPECT_FALSE(d[1].as_object().contains("at_ms")) << "no time recorded: none shown";

  job_view stale;  // judged stale as it was handed to a worker: it never ran
  stale.state = "deadline_exceeded";
  stale.stage = "queue";
  stale.accepted = true;
  stale.started_at_ms = 900;
  stale.queued_ms = 900;
  const auto s = timeline(stale);
  ASSERT_EQ(s.size(), 2u) << "no start: " << s;
  EXPECT_EQ(num(s[1], "at_ms"), 900);

  job_view cancelled;  // cancelled while it waited an hour for its due time
  cancelled.state = "cancelled";
  cancelled.accepted = true;
  cancelled.due_at_ms = 3'600'000;
  cancelled.queued_ms = 0;
  cancelled.finished_at_ms = 1000;
  const auto c = timeline(cancelled);
  ASSERT_EQ(c.size(), 3u) << c;
  EXPECT_EQ(num(c[2], "at_ms"), 1000) << "when it was cancelled, not its due time";

  job_view old;  // a fleet job enqueued before timelines were kept
  old.id = "x";
  old.state = "queued";
  EXPECT_EQ(job_json(old).find("timeline"), std::string::npos);
}

}  // namespace
}  // namespace hourglass::server::detail
