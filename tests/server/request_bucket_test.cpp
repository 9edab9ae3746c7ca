// The pacing of costly requests, as a pure function of (state, now).
#include "core/request_bucket.hpp"

#include <gtest/gtest.h>

namespace hourglass::server::request_bucket_tests {
namespace {

using namespace std::chrono_literals;
using detail::request_bucket;

const time_point t0 = time_point{} + 1h;

TEST(RequestBucket, ABurstOfItsRateThenOneAtEachRefill) {
  request_bucket b(4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(b.take(t0)) << i;
  EXPECT_FALSE(b.take(t0)) << "the burst is spent";
  EXPECT_FALSE(b.take(t0 + 249ms)) << "a quarter second refills one";
  EXPECT_TRUE(b.take(t0 + 250ms));
  EXPECT_FALSE(b.take(t0 + 250ms));
  EXPECT_TRUE(b.take(t0 + 10s));
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.take(t0 + 10s)) << "refilled to its burst, no more";
  EXPECT_FALSE(b.take(t0 + 10s));
}

TEST(RequestBucket, AClockThatStepsBackRefillsNothing) {
  request_bucket b(1);
  EXPECT_TRUE(b.take(t0 + 5s));
  EXPECT_FALSE(b.take(t0));
  EXPECT_FALSE(b.take(t0 + 5s + 999ms)) << "counted from the latest time seen";
  EXPECT_TRUE(b.take(t0 + 6s));
}

TEST(RequestBucket, ARateOfZeroRefusesEverything) {
  request_bucket b(0);
  EXPECT_FALSE(b.take(t0));
  EXPECT_FALSE(b.take(t0 + 1h));
}

}  // namespace
}  // namespace hourglass::server::request_bucket_tests
