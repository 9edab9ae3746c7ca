// A job's states and the listing's filters (hourglass/jobs/job_state.hpp):
// one table, every state.
#include "hourglass/jobs/job_state.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hourglass::jobs::job_state_testing {
namespace {

struct row {
  job_state state;
  std::string_view name;
  bool final;
};
constexpr row every_state[] = {
    {job_state::queued, "queued", false},
    {job_state::running, "running", false},
    {job_state::scheduled, "scheduled", false},
    {job_state::waiting, "waiting", false},
    {job_state::ok, "ok", true},
    {job_state::error, "error", true},
    {job_state::deadline_exceeded, "deadline_exceeded", true},
    {job_state::cancelled, "cancelled", true},
    {job_state::rejected, "rejected", true},
    {job_state::dead, "dead", true},
};

TEST(JobState, EveryStateHasOneNameThatParsesBack) {
  ASSERT_EQ(std::size(every_state), all_job_states.size()) << "a state missing from the table";
  for (const row& r : every_state) {
    EXPECT_EQ(to_string(r.state), r.name);
    EXPECT_EQ(parse_job_state(r.name), r.state) << r.name;
    EXPECT_EQ(is_final(r.state), r.final) << r.name;
  }
  for (const std::string_view not_a_state : {"", "finished", "retrying", "Queued", "queued ", "delayed", "any"})
    EXPECT_FALSE(parse_job_state(not_a_state)) << '"' << not_a_state << '"';
}

TEST(JobState, AnOutcomeNamesItsFinalState) {
  EXPECT_EQ(final_state(outcome::ok), job_state::ok);
  EXPECT_EQ(final_state(outcome::error), job_state::error);
  EXPECT_EQ(final_state(outcome::deadline_exceeded), job_state::deadline_exceeded);
  EXPECT_EQ(final_state(outcome::cancelled), job_state::cancelled);
  EXPECT_EQ(final_state(outcome::rejected), job_state::rejected);
  EXPECT_EQ(final_state(outcome::invalid), job_state::rejected) << "never held; were it, refused";
}

TEST(JobFilter, AnyOneStateFinishedOrRetrying) {
  EXPECT_EQ(parse_job_filter("")->k, job_filter::kind::any);
  EXPECT_EQ(parse_job_filter("finished")->k, job_filter::kind::finished);
  EXPECT_EQ(parse_job_filter("retrying")->k, job_filter::kind::retrying);
  EXPECT_FALSE(parse_job_filter("delayed"));
  EXPECT_FALSE(parse_job_filter("FINISHED"));
  for (const row& r : every_state) {
    const auto one = parse_job_filter(r.name);
    ASSERT_TRUE(one) << r.name;
    for (const row& other : every_state) {
      EXPECT_EQ(one->matches(other.state, false), other.state == r.state) << r.name << " ~ " << other.name;
    }
    EXPECT_TRUE(parse_job_filter("")->matches(r.state, false));
    EXPECT_EQ(parse_job_filter("finished")->matches(r.state, false), r.final) << r.name;
    EXPECT_EQ(parse_job_filter("retrying")->matches(r.state, true), r.state == job_state::scheduled) << r.name;
  }
  EXPECT_FALSE(parse_job_filter("retrying")->matches(job_state::scheduled, false)) << "a first attempt's delay";
  EXPECT_TRUE(parse_job_filter("scheduled")->matches(job_state::scheduled, true)) << "retrying is a subset";
}

}  // namespace
}  // namespace hourglass::jobs::job_state_testing
