// The lease decisions as pure functions: renewal and fencing times, the
// lease key's value, taking a name over, and whether a job is worth starting.
#include "hourglass/fleet/lease.hpp"

#include <gtest/gtest.h>

#include "hourglass/fleet/freshness.hpp"

namespace hourglass::fleet {
namespace {

using namespace std::chrono_literals;

TEST(LeaseTiming, RenewsThreeTimesALeaseAndFencesAFifthBeforeItsEnd) {
  const lease_timing t = lease_timing_for(10s);
  EXPECT_EQ(t.lease, 10s);
  EXPECT_EQ(t.renew_every, duration(10s) / 3);
  EXPECT_EQ(t.fence_after, 8s);
  EXPECT_EQ(t.reclaim_every, 1s) << "reclaim is looked for at least every second";
  EXPECT_EQ(lease_timing_for(600ms).reclaim_every, 200ms);
  EXPECT_GT(lease_timing_for(0s).renew_every, 0s) << "a zero lease cannot spin the keeper";
}

TEST(LeaseTiming, FencingCountsFromWhenTheLastGoodRenewalWasSent) {
  const lease_timing t = lease_timing_for(10s);
  const time_point sent = time_point{} + 1h;
  EXPECT_FALSE(must_fence(sent, sent + 8s - 1ns, t));
  EXPECT_TRUE(must_fence(sent, sent + 8s, t));
  EXPECT_FALSE(must_fence(sent, sent - 1s, t)) << "a reading before the renewal is not a lapse";
}

TEST(LeaseValue, IsTokenColonRenewals) {
  EXPECT_EQ(format_lease({"abc", 7}), "abc:7");
  lease_value v;
  ASSERT_TRUE(parse_lease("a:b:12", v));
  EXPECT_EQ(v.token, "a:b");
  EXPECT_EQ(v.renewals, 12u);
  EXPECT_FALSE(parse_lease("abc", v));
  EXPECT_FALSE(parse_lease(":3", v));
  EXPECT_FALSE(parse_lease("abc:", v));
  EXPECT_FALSE(parse_lease("abc:-1", v));
}

TEST(LeaseValue, ANameIsTakenOverOnlyFromAHolderThatStoppedRenewing) {
  EXPECT_EQ(judge_name("", ""), name_claim::free);
  EXPECT_EQ(judge_name("t:4", ""), name_claim::free) << "it expired meanwhile";
  EXPECT_EQ(judge_name("t:4", "t:4"), name_claim::dead_holder);
  EXPECT_EQ(judge_name("t:4", "t:5"), name_claim::live_holder);
  EXPECT_EQ(judge_name("", "u:0"), name_claim::live_holder) << "another process took it while we looked";
}

}  // namespace
}  // namespace hourglass::fleet
