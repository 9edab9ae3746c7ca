// log_throttle: which repeated failures get a log line, and how many events
// each line stands for. Exact times, no clock.
#include "core/log_throttle.hpp"

#include <gtest/gtest.h>

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

TEST(LogThrottle, TheFirstEventIsLoggedAtOnceAndAFloodOnceAnInterval) {
  log_throttle t(1s);
  const time_point t0{};
  EXPECT_EQ(t.admit(t0), 1u);
  // A thousand more within the interval: held back.
  for (int i = 1; i <= 1000; ++i) EXPECT_EQ(t.admit(t0 + i * 999us), 0u) << i;
  // The next line, one interval after the last, stands for them and itself.
  EXPECT_EQ(t.admit(t0 + 1s), 1001u);
  EXPECT_EQ(t.admit(t0 + 1s + 999ms), 0u);
  EXPECT_EQ(t.admit(t0 + 2s), 2u);
}

TEST(LogThrottle, EventsFartherApartThanTheIntervalAreEachLogged) {
  log_throttle t(50ms);
  const time_point t0{};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(t.admit(t0 + i * 60ms), 1u) << i;
}

}  // namespace
}  // namespace hourglass::server::detail
