// The group commit's decisions, without a broker: what goes when, in which
// batches, and that no waiting call is left behind.
#include "batch_lane.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hourglass::fleet::detail {
namespace {

struct test_call : lane_call<int> {
  int n = 0;
  std::size_t size = 0;
};
using lane = batch_lane<test_call>;

lane::batch calls(int first, int count, std::size_t size = 0) {
  lane::batch b;
  for (int i = first; i < first + count; ++i) {
    auto c = std::make_shared<test_call>();
    c->n = i;
    c->size = size;
    b.push_back(std::move(c));
  }
  return b;
}

std::vector<int> numbers(const std::optional<lane::batch>& b) {
  std::vector<int> out;
  if (b) {
    for (const auto& c : *b) out.push_back(c->n);
  }
  return out;
}

TEST(BatchLane, ALoneCallGoesAtOnceAndLaterOnesWaitForItsAnswer) {
  lane l(lane::limits{});
  EXPECT_EQ(numbers(l.push(calls(0, 1))), std::vector<int>{0});
  EXPECT_FALSE(l.push(calls(1, 2)).has_value()) << "one batch at the broker";
  EXPECT_FALSE(l.push(calls(3, 1)).has_value());
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{1, 2, 3})) << "all that waited, in order, in one batch";
  EXPECT_EQ(l.in_flight(), 1u);
  EXPECT_FALSE(l.next().has_value());
  EXPECT_EQ(l.in_flight(), 0u);
  EXPECT_EQ(numbers(l.push(calls(4, 1))), std::vector<int>{4}) << "idle again: at once";
}

TEST(BatchLane, ABatchIsAtMostMaxCallsAndMaxBytes) {
  lane l(lane::limits{.max_calls = 3, .max_bytes = 10, .bytes = [](const test_call& c) { return c.size; }});
  ASSERT_TRUE(l.push(calls(0, 1)).has_value());
  EXPECT_FALSE(l.push(calls(1, 5)).has_value());
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{4, 5}));
  EXPECT_FALSE(l.push(calls(6, 3, 4)).has_value());
  EXPECT_FALSE(l.push(calls(9, 1, 50)).has_value());
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{6, 7})) << "4 + 4 bytes fit in 10, a third does not";
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{8}));
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{9})) << "a call larger than max_bytes still goes, alone";
  EXPECT_FALSE(l.next().has_value());
}

TEST(BatchLane, OnlyCallsThatMayShareAScriptCallGoTogether) {
  lane l(lane::limits{.same_batch = [](const test_call& a, const test_call& b) { return a.size == b.size; }});
  ASSERT_TRUE(l.push(calls(0, 1)).has_value());
  EXPECT_FALSE(l.push(calls(1, 2, 1)).has_value());
  EXPECT_FALSE(l.push(calls(3, 1, 2)).has_value());
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{1, 2}));
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{3}));
}

TEST(BatchLane, ASecondBatchGoesOnlyOnceItIsWorthAScriptCall) {
  lane l(lane::limits{.max_calls = 8, .max_in_flight = 2, .overlap_at = 4});
  EXPECT_EQ(numbers(l.push(calls(0, 1))), std::vector<int>{0});
  EXPECT_FALSE(l.push(calls(1, 3)).has_value()) << "3 waiting: fewer than overlap_at";
  EXPECT_EQ(numbers(l.push(calls(4, 1))), (std::vector<int>{1, 2, 3, 4})) << "4 waiting: a second batch goes";
  EXPECT_EQ(l.in_flight(), 2u);
  EXPECT_FALSE(l.push(calls(5, 10)).has_value()) << "never more than max_in_flight";
  EXPECT_EQ(numbers(l.next()), (std::vector<int>{5, 6, 7, 8, 9, 10, 11, 12}));
  EXPECT_FALSE(l.next().has_value()) << "2 waiting: they go with the other batch's answer";
  EXPECT_EQ(l.in_flight(), 1u);
  EXPECT_EQ(numbers(l.push(calls(15, 2))), (std::vector<int>{13, 14, 15, 16})) << "worth a batch beside the other";
  EXPECT_EQ(l.in_flight(), 2u);
  EXPECT_FALSE(l.next().has_value());
  EXPECT_FALSE(l.push(calls(17, 1)).has_value());
  EXPECT_EQ(numbers(l.next()), std::vector<int>{17}) << "nothing is left behind";
  EXPECT_FALSE(l.next().has_value());
  EXPECT_EQ(l.in_flight(), 0u);
}

}  // namespace
}  // namespace hourglass::fleet::detail
