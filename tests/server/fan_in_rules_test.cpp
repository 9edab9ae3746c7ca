// The fan-in rules as pure functions (child_jobs.hpp): when a parent's wait
// is over, when it ends whatever has finished, and how the wait is spelled
// in the job object and the fleet's job hash.
#include <gtest/gtest.h>

#include "core/child_jobs.hpp"

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

TEST(FanInSatisfied, AllWaitsForEveryChildWhateverItsOutcome) {
  EXPECT_FALSE(fan_in_satisfied(fan_in::all(), 3, 2, 2));
  EXPECT_TRUE(fan_in_satisfied(fan_in::all(), 3, 3, 0));
  EXPECT_TRUE(fan_in_satisfied(fan_in::all(), 0, 0, 0)) << "no children: nothing to wait for";
}

TEST(FanInSatisfied, FirstNCountsEndsAndNeverWaitsForMoreChildrenThanThereAre) {
  EXPECT_FALSE(fan_in_satisfied(fan_in::first(2), 3, 1, 1));
  EXPECT_TRUE(fan_in_satisfied(fan_in::first(2), 3, 2, 0));
  EXPECT_TRUE(fan_in_satisfied(fan_in::first(5), 3, 3, 1)) << "five asked of three: all three";
}

TEST(FanInSatisfied, FirstSuccessWaitsPastFailuresUntilOneSucceedsOrAllHaveEnded) {
  EXPECT_FALSE(fan_in_satisfied(fan_in::first_success(), 3, 2, 0));
  EXPECT_TRUE(fan_in_satisfied(fan_in::first_success(), 3, 1, 1));
  EXPECT_TRUE(fan_in_satisfied(fan_in::first_success(), 3, 3, 0)) << "none succeeded: no more to wait for";
}

TEST(WakeTime, TheDeadlineLessTheKeepOrTheMinimumBudgetAndNeverForAJobWithoutOne) {
  const time_point deadline = time_point{} + 10s;
  EXPECT_EQ(wake_time(deadline, fan_in::all(), 100ms), time_point{} + 9900ms);
  fan_in keep = fan_in::all();
  keep.keep = 2s;
  EXPECT_EQ(wake_time(deadline, keep, 100ms), time_point{} + 8s);
  EXPECT_EQ(wake_time(time_point::max(), keep, 100ms), time_point::max());
}

TEST(FanInText, EachRuleIsSpelledAndReadBack) {
  for (const fan_in& f : {fan_in::all(), fan_in::first(3), fan_in::first_success()}) {
    const std::optional<fan_in> back = parse_fan_in(fan_in_text(f));
    ASSERT_TRUE(back) << fan_in_text(f);
    EXPECT_EQ(back->until, f.until);
    if (f.until == fan_in::rule::first_n) {
      EXPECT_EQ(back->n, f.n);
    }
  }
  EXPECT_EQ(fan_in_text(fan_in::first(3)), "first:3");
  for (const char* junk : {"", "first:", "first:x", "first:3x", "any"}) EXPECT_FALSE(parse_fan_in(junk)) << junk;
}

TEST(OutcomeOfChild, TellsTheStateItsDetailAndAnOkChildsResult) {
  job_view ok;
  ok.id = "a";
  ok.handler = "work";
  ok.state = "ok";
  ok.result = "r";
  ok.content_type = "text/plain";
  const child_outcome o = outcome_of_child(ok);
  EXPECT_TRUE(o.finished());
  EXPECT_TRUE(o.ok());
  EXPECT_EQ(o.result, "r");
  job_view late;
  late.state = "deadline_exceeded";
  late.stage = "run";
  EXPECT_EQ(outcome_of_child(late).detail, "run");
  job_view failed;
  failed.state = "error";
  failed.error = "failed";
  failed.http_status = 502;
  failed.result = "never shown";
  EXPECT_EQ(outcome_of_child(failed).detail, "failed");
  EXPECT_EQ(outcome_of_child(failed).http_status, 502u);
  EXPECT_TRUE(outcome_of_child(failed).result.empty());
  job_view waiting;
  waiting.state = "waiting";
  EXPECT_FALSE(outcome_of_child(waiting).finished());
}

}  // namespace
}  // namespace hourglass::server::detail
