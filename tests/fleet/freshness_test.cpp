// The fleet's time rules, exactly, without Redis: entry ids and TIME, age on
// the broker's clock, the local deadline, predicted wait and admission.
#include "hourglass/fleet/freshness.hpp"

#include <gtest/gtest.h>

namespace hourglass::fleet {
namespace {

using namespace std::chrono_literals;

TEST(StreamId, ParsesMsAndSeq) {
  EXPECT_EQ(parse_stream_id("1700000000123-7"), (stream_id{1700000000123, 7}));
  EXPECT_EQ(parse_stream_id("0-0"), (stream_id{0, 0}));
  for (const char* bad : {"", "-", "1-", "-1", "1", "1-2-3", "x-1", "1-x", " 1-1", "18446744073709551616-0"}) {
    EXPECT_FALSE(parse_stream_id(bad)) << bad;
  }
}

TEST(BrokerTime, SecondsAndMicros) {
  EXPECT_EQ(parse_broker_time("1000", "250"), 1'000'000'250);
  EXPECT_FALSE(parse_broker_time("1000", "1000000"));
  EXPECT_FALSE(parse_broker_time("", "1"));
  EXPECT_FALSE(parse_broker_time("1", "-1"));
}

// freshness.hpp's worked example (docs/fleet.md, "The clock rule").
TEST(Freshness, TheWorkedExample) {
  const time_point sent = time_point{} + 42s;
  const job_age age = age_on_broker(stream_id{1'000'000, 0}, 1'003'200'000);
  EXPECT_EQ(age.waited, 3200ms);
  EXPECT_FALSE(age.negative);
  EXPECT_EQ(start_by_on_our_clock(age, 5s, sent), time_point{} + 43800ms);
}

TEST(Freshness, OurWallClockIsNoInput) {
  // The same broker readings give the same local deadline, from the local
  // monotonic send time alone: a daemon 10 min fast or slow decides the same.
  const job_age age = age_on_broker(stream_id{5'000, 1}, 5'000'000 + 900'000);
  for (const auto sent : {time_point{} + 1s, time_point{} + 1h}) {
    EXPECT_EQ(start_by_on_our_clock(age, 1s, sent) - sent, 100ms);
  }
}

TEST(Freshness, ExpiredWhenTheWaitCoversTheFreshness) {
  const time_point sent = time_point{} + 1s;
  EXPECT_EQ(start_by_on_our_clock(job_age{1s, false}, 1s, sent), sent) << "no time left: due at once";
  EXPECT_EQ(start_by_on_our_clock(job_age{2s, false}, 1s, sent), sent);
  EXPECT_EQ(start_by_on_our_clock(job_age{0s, false}, duration::max(), sent), never);
}

TEST(Freshness, AnEntryNewerThanTimeCountsAsZeroAndIsFlagged) {
  const job_age age = age_on_broker(stream_id{2'000, 0}, 1'999'000);
  EXPECT_TRUE(age.negative);
  EXPECT_EQ(age.waited, 0s);
}

TEST(FleetAdmission, TheStoredFreshnessLosesTheEnqueuesRoundTripsSoItErrsEarly) {
  EXPECT_EQ(freshness_at_entry(1s, 3ms), 994ms) << "the round trip so far, and one more for the XADD";
  EXPECT_EQ(freshness_at_entry(1s, 0ms), 1s);
  EXPECT_EQ(freshness_at_entry(5ms, 3ms), 0ms) << "never below zero: it is refused, or expires at once";
  EXPECT_EQ(freshness_at_entry(duration::max(), 3ms), duration::max()) << "no freshness bound";
  EXPECT_EQ(freshness_at_entry(1s, duration::max()), 0ms);
}

}  // namespace
}  // namespace hourglass::fleet
