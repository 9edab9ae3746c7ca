// The reader's waits after failures in a row (read_backoff.hpp), without a
// broker or threads.
#include "read_backoff.hpp"

#include <gtest/gtest.h>

namespace hourglass::fleet::detail::testing {
namespace {

using namespace std::chrono_literals;

TEST(AfterFailedReads, FiftyMillisecondsDoublingToTwoSeconds) {
  EXPECT_EQ(after_failed_reads(0), 0ms) << "nothing failed";
  EXPECT_EQ(after_failed_reads(1), 50ms);
  EXPECT_EQ(after_failed_reads(2), 100ms);
  EXPECT_EQ(after_failed_reads(3), 200ms);
  EXPECT_EQ(after_failed_reads(6), 1600ms);
  EXPECT_EQ(after_failed_reads(7), 2s) << "capped";
  EXPECT_EQ(after_failed_reads(1000), 2s);
  EXPECT_EQ(after_failed_reads(static_cast<std::size_t>(-1)), 2s) << "no overflow";
}

TEST(AfterFailedTakes, TheFirstGoesOnAtOnceAndTheNextWaitAsFailedReadsDo) {
  EXPECT_EQ(after_failed_takes(0), 0ms);
  EXPECT_EQ(after_failed_takes(1), 0ms) << "a reply lost on its way: its entries are read again at once";
  EXPECT_EQ(after_failed_takes(2), 50ms);
  EXPECT_EQ(after_failed_takes(3), 100ms);
  EXPECT_EQ(after_failed_takes(8), 2s);
}

}  // namespace
}  // namespace hourglass::fleet::detail::testing
