// What the renewer does with a renewal's answer (renewal.hpp), without a
// broker, threads or a clock: when to give up waiting, when to fence, when
// to renew next, and which held entries hear of it.
#include "renewal.hpp"

#include <gtest/gtest.h>

namespace hourglass::fleet::detail::testing {
namespace {

using namespace std::chrono_literals;

const lease_timing timing = lease_timing_for(30s);  // renewals every 10 s, fencing at 24 s
const time_point t0 = time_point{} + 1h;

renewal_facts facts(time_point sent, time_point now, time_point last_renewed, bool self_fenced = false) {
  return {sent, now, last_renewed, self_fenced, false};
}

TEST(RenewalLimit, AnAnswerIsWaitedForUntilTheFencingPoint) {
  EXPECT_EQ(renewal_limit(t0, t0 + 10s, timing), t0 + 24s);
  EXPECT_EQ(renewal_limit(t0, t0 + 24s - 1ns, timing), t0 + 24s);
  EXPECT_EQ(renewal_limit(t0, t0 + 24s, timing), t0 + 34s) << "past it: a renewal period";
  EXPECT_EQ(renewal_limit(time_point{}, t0, timing), t0 + 10s) << "the first renewal";
}

TEST(AfterRenewal, AnAnswerRenewsFromWhenItWasSent) {
  const job_queue::renew_answer a;
  const renewal_decision d = after_renewal(&a, facts(t0 + 10s, t0 + 11s, t0), timing);
  EXPECT_TRUE(d.renewed);
  EXPECT_FALSE(d.fence);
  EXPECT_FALSE(d.broker_error);
  EXPECT_FALSE(d.name_taken);
  EXPECT_FALSE(d.self_fenced);
  EXPECT_FALSE(d.renewed_again);
  EXPECT_EQ(d.next, t0 + 20s) << "a period after it was sent, not after its answer";
  EXPECT_TRUE(d.entries.empty());
}

TEST(AfterRenewal, AFailureIsTriedAgainSoonAndFencesAtMostOfALease) {
  const renewal_decision early = after_renewal(nullptr, facts(t0 + 10s, t0 + 24s - 1ns, t0), timing);
  EXPECT_TRUE(early.broker_error);
  EXPECT_FALSE(early.fence);
  EXPECT_FALSE(early.self_fenced);
  EXPECT_EQ(early.next, t0 + 24s - 1ns + 200ms) << "min(lease/3, 200 ms) after the failure";
  const renewal_decision late = after_renewal(nullptr, facts(t0 + 20s, t0 + 24s, t0), timing);
  EXPECT_TRUE(late.fence) << "lease - lease/5 since the last renewal that got through was sent";
  EXPECT_TRUE(late.self_fenced);
  EXPECT_FALSE(late.renewed);
  const renewal_decision again = after_renewal(nullptr, facts(t0 + 25s, t0 + 25s, t0, true), timing);
  EXPECT_FALSE(again.fence) << "fenced once";
  EXPECT_TRUE(again.self_fenced);
  EXPECT_TRUE(again.broker_error);
  const lease_timing short_lease = lease_timing_for(300ms);
  EXPECT_EQ(after_renewal(nullptr, facts(t0, t0, t0), short_lease).next, t0 + 100ms) << "a third of a short lease";
}

TEST(AfterRenewal, AFailureWhileStoppingIsNotTheBrokers) {
  renewal_facts f = facts(t0 + 20s, t0 + 30s, t0);
  f.stopping = true;
  const renewal_decision d = after_renewal(nullptr, f, timing);
  EXPECT_FALSE(d.broker_error);
  EXPECT_FALSE(d.fence);
}

TEST(AfterRenewal, ARenewalAfterAFenceLiftsIt) {
  const job_queue::renew_answer a;
  const renewal_decision d = after_renewal(&a, facts(t0 + 30s, t0 + 30s, t0, true), timing);
  EXPECT_TRUE(d.renewed);
  EXPECT_TRUE(d.renewed_again);
  EXPECT_FALSE(d.self_fenced) << "reading goes on";
}

TEST(AfterRenewal, ANameTakenStopsEveryJobAndReadingForGood) {
  job_queue::renew_answer a;
  a.fenced = true;
  const renewal_decision d = after_renewal(&a, facts(t0 + 10s, t0 + 10s, t0), timing);
  EXPECT_TRUE(d.name_taken);
  EXPECT_TRUE(d.fence);
  EXPECT_TRUE(d.self_fenced);
  EXPECT_FALSE(d.renewed);
  EXPECT_FALSE(d.broker_error);
}

TEST(AfterRenewal, MarkedEntriesAreStoppedAsRequestedAndLostOnesLeft) {
  job_queue::renew_answer a;
  a.marked = {"1-0", "2-0"};
  a.lost = {"3-0", "4-0"};
  a.deleted = {"4-0", "5-0"};
  const renewal_decision d = after_renewal(&a, facts(t0 + 10s, t0 + 10s, t0), timing);
  using entry_event = std::pair<std::string, held_event>;
  EXPECT_EQ(d.entries,
            (std::vector<entry_event>{
                {"1-0", held_event::delete_marked}, {"2-0", held_event::delete_marked}, {"3-0", held_event::lost}}))
      << "a deleted entry is nobody's: it is not lost to another daemon";
}

}  // namespace
}  // namespace hourglass::fleet::detail::testing
