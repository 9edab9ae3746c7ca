// The enqueue script's verdicts as the fleet store answers them
// (stores/fleet_views.hpp, created_of): a pure function, so each verdict is
// checked here without a broker.
#include <gtest/gtest.h>

#include "stores/fleet_views.hpp"

namespace hourglass::server::detail {
namespace fleet_views_testing {

using namespace std::chrono_literals;
using verdict = fleet::enqueued::kind;

fleet::enqueued answer(verdict v, bool scheduled = false) {
  fleet::enqueued r;
  r.verdict = v;
  r.id = "0123456789abcdef0123456789abcdef";
  r.scheduled = scheduled;
  return r;
}

TEST(FleetCreated, AnAcceptedJobIsQueuedOrScheduledAsTheScriptPutIt) {
  const created queued = created_of(answer(verdict::accepted), 2s, 2s);
  EXPECT_EQ(queued.verdict, created::kind::accepted);
  EXPECT_EQ(queued.job.id, "0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(queued.job.in(jobs::job_state::queued));
  EXPECT_TRUE(created_of(answer(verdict::accepted, true), 2s, 2s).job.in(jobs::job_state::scheduled));
  const created again = created_of(answer(verdict::duplicate), 2s, 2s);
  EXPECT_EQ(again.verdict, created::kind::duplicate);
  EXPECT_EQ(again.job.id, "0123456789abcdef0123456789abcdef") << "the first job's";
}

TEST(FleetCreated, AdmissionRefusesWithTheBudgetAskedAndLeft) {
  const created r = created_of(answer(verdict::refused), 2s, 150ms);
  EXPECT_EQ(r.verdict, created::kind::refused);
  EXPECT_EQ(r.refusal, status::expired(expiry_stage::admission));
  EXPECT_EQ(r.budget, 2s);
  EXPECT_EQ(r.remaining, 150ms);
  EXPECT_TRUE(r.job.id.empty()) << "nothing was written";
}

TEST(FleetCreated, APausedQueueAndAParentsFamilyRefuseAsTheMemoryStoreDoes) {
  const created paused = created_of(answer(verdict::paused), 2s, 2s);
  EXPECT_EQ(paused.verdict, created::kind::refused);
  EXPECT_EQ(paused.refusal, status::rejected(reject_reason::queue_paused));
  const std::pair<verdict, parent_problem> family[] = {{verdict::no_parent, parent_problem::unknown},
                                                       {verdict::parent_finished, parent_problem::finished},
                                                       {verdict::too_deep, parent_problem::too_deep},
                                                       {verdict::too_many_children, parent_problem::too_many_children}};
  for (const auto& [v, why] : family) {
    const created got = created_of(answer(v), 2s, 2s);
    const created want = parent_refusal(why);
    EXPECT_EQ(got.verdict, want.verdict);
    EXPECT_EQ(got.http_status, want.http_status);
    EXPECT_EQ(got.error, want.error);
    EXPECT_FALSE(got.error.empty());
  }
}

}  // namespace fleet_views_testing
}  // namespace hourglass::server::detail
