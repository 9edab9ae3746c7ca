// A job that crosses a commit point (context::commit) says so in its
// outcome (job_timings::committed), whatever that outcome is. Exact: a
// manual executor on a manual clock, turned by the test.
#include <gtest/gtest.h>

#include "hourglass/executor.hpp"
#include "manual_executor.hpp"

namespace hourglass {
namespace {

using namespace std::chrono_literals;

TEST(ExecutorCommit, ADeadlineDuringTheCommitEndsTheJobDeadlineExceededAndCommitted) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk));
  bool after_commit_ran = false;
  auto job = ex.submit(job_options::within(clk, 100ms), [&](const context& ctx) {
    ctx.commit(20ms, [&] { clk.advance(150ms); });  // the write overruns the deadline, and completes
    ctx.check();                                    // the job stops here
    after_commit_ran = true;
    return 1;
  });
  ex.run_pending();
  const auto r = job.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_TRUE(r.timings.committed);
  EXPECT_FALSE(r.timings.completed_late);
  EXPECT_FALSE(after_commit_ran);
}

TEST(ExecutorCommit, NotEnoughBudgetMeansNothingCommitted) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk));
  bool committed_anything = false;
  auto job = ex.submit(job_options::within(clk, 100ms), [&](const context& ctx) {
    clk.advance(90ms);  // preparing took most of the budget
    ctx.commit(20ms, [&] { committed_anything = true; });
    return 1;
  });
  ex.run_pending();
  const auto r = job.get();
  EXPECT_EQ(r.st, status::expired(expiry_stage::run));
  EXPECT_FALSE(r.timings.committed);
  EXPECT_FALSE(committed_anything);
}

TEST(ExecutorCommit, AnOkJobThatCommittedSaysSo) {
  manual_clock clk;
  executor ex(testing::manual_executor(clk));
  auto committed = ex.submit(job_options::within(clk, 1s),
                             [](const context& ctx) { return ctx.commit(10ms, [] { return 5; }); });
  auto plain = ex.submit(job_options::within(clk, 1s), [](const context&) { return 6; });
  ex.run_pending();
  auto a = committed.get();
  auto b = plain.get();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value(), 5);
  EXPECT_TRUE(a.timings.committed);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b.timings.committed);
}

}  // namespace
}  // namespace hourglass
