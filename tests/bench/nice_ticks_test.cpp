#include "overload/report.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace hourglass::bench {
namespace {

using ticks = std::vector<double>;

TEST(NiceTicks, StepIsOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(nice_ticks(5350, 6), (ticks{0, 1000, 2000, 3000, 4000, 5000, 6000}));
  EXPECT_EQ(nice_ticks(5350, 4), (ticks{0, 2000, 4000, 6000}));
  EXPECT_EQ(nice_ticks(53500, 6), (ticks{0, 10000, 20000, 30000, 40000, 50000, 60000}));
  EXPECT_EQ(nice_ticks(1000, 4), (ticks{0, 500, 1000}));
  EXPECT_EQ(nice_ticks(123, 5), (ticks{0, 50, 100, 150}));
  EXPECT_EQ(nice_ticks(2.5e6, 6), (ticks{0, 5e5, 1e6, 1.5e6, 2e6, 2.5e6}));
}

TEST(NiceTicks, TheAxisEndsAtTheFirstTickAtOrAboveMax) {
  EXPECT_EQ(nice_ticks(6000, 6), (ticks{0, 1000, 2000, 3000, 4000, 5000, 6000}));  // on a tick: no extra step
  EXPECT_EQ(nice_ticks(4954, 6), (ticks{0, 1000, 2000, 3000, 4000, 5000}));
  EXPECT_EQ(nice_ticks(999, 6), (ticks{0, 200, 400, 600, 800, 1000}));
  EXPECT_EQ(nice_ticks(1001, 6), (ticks{0, 200, 400, 600, 800, 1000, 1200}));
}

TEST(NiceTicks, FractionalTicksAreTheDoublesOfTheirDecimals) {
  EXPECT_EQ(nice_ticks(1, 6), (ticks{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(nice_ticks(0.7, 6), (ticks{0, 0.2, 0.4, 0.6, 0.8}));
  EXPECT_EQ(nice_ticks(0.03, 4), (ticks{0, 0.01, 0.02, 0.03}));
}

TEST(NiceTicks, NoPositiveFiniteMaxIsOneAndFewerThanOneStepIsOne) {
  const ticks unit{0, 0.2, 0.4, 0.6, 0.8, 1};
  EXPECT_EQ(nice_ticks(0, 6), unit);
  EXPECT_EQ(nice_ticks(-5, 6), unit);
  EXPECT_EQ(nice_ticks(std::nan(""), 6), unit);
  EXPECT_EQ(nice_ticks(std::numeric_limits<double>::infinity(), 6), unit);
  EXPECT_EQ(nice_ticks(7, 1), (ticks{0, 10}));
  EXPECT_EQ(nice_ticks(12, 0), (ticks{0, 20}));
}

}  // namespace
}  // namespace hourglass::bench
