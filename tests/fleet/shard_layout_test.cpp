// Where a sharded queue's shards sit in the slot space (shard_layout.hpp),
// as pure functions: an even step for a queue laid out anew, the widest gaps
// for shards added later, and a tag found for any slot.
#include "shard_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cluster_slots.hpp"

namespace hourglass::fleet::shard_layout_tests {
namespace {

using detail::spread_slots;

TEST(SpreadSlots, AQueueLaidOutAnewIsAnEvenStepFromShardZero) {
  EXPECT_EQ(spread_slots({0}, 2), (std::vector<std::uint16_t>{8192}));
  EXPECT_EQ(spread_slots({0}, 3), (std::vector<std::uint16_t>{5461, 10923}));
  EXPECT_EQ(spread_slots({10000}, 4), (std::vector<std::uint16_t>{14096, 1808, 5904})) << "around the ring";
  EXPECT_TRUE(spread_slots({123}, 1).empty());
  EXPECT_TRUE(spread_slots({}, 4).empty()) << "shard 0 is always placed";
}

// As redis-cli's clusterManagerCommandCreate slices the slots among m
// masters: slots_per_node = 16384.0 / m; master k's last slot is
// lround(cursor + slots_per_node - 1), the last master's 16383.
unsigned master_serving(unsigned slot, unsigned masters) {
  const double per = 16384.0 / masters;
  double cursor = 0;
  for (unsigned k = 0; k + 1 < masters; ++k, cursor += per) {
    if (slot <= static_cast<unsigned>(std::lround(cursor + per - 1))) return k;
  }
  return masters - 1;
}

TEST(EvenSlices, AsRedisCliSlicesThreeMasters) {
  EXPECT_EQ(detail::even_slices(3), (std::vector<unsigned>{0, 5461, 10923}));
  EXPECT_EQ(detail::even_slices(1), (std::vector<unsigned>{0}));
  for (const unsigned s : {5460u, 5461u, 10922u, 10923u})
    EXPECT_EQ(master_serving(s, 3), s < 5461 ? 0u : s < 10923 ? 1u : 2u);
}

// However shard 0 falls, n shards laid out anew land on n different masters
// of a cluster of m >= n masters sliced evenly.
TEST(SpreadSlots, OnAnEvenlySlicedClusterEachShardHasAMasterOfItsOwn) {
  for (unsigned masters = 2; masters <= 12; ++masters) {
    for (unsigned shards = 2; shards <= masters; ++shards) {
      for (unsigned first = 0; first < detail::cluster_slots; first += (masters <= 8 ? 3 : 29)) {
        std::vector<std::uint16_t> slots{static_cast<std::uint16_t>(first)};
        for (const std::uint16_t s : spread_slots(slots, shards)) slots.push_back(s);
        std::set<unsigned> served_by;
        for (const unsigned s : slots) served_by.insert(master_serving(s, masters));
        ASSERT_EQ(served_by.size(), shards) << masters << " masters, " << shards << " shards, shard 0 at " << first;
      }
    }
  }
}

TEST(SpreadSlots, ShardsAddedLaterFillTheWidestGapsAndNothingPlacedMoves) {
  EXPECT_EQ(spread_slots({0, 8192}, 4), (std::vector<std::uint16_t>{4096, 12288}));
  EXPECT_EQ(spread_slots({100, 200}, 3), (std::vector<std::uint16_t>{8342})) << "the long way round is the widest";
}

TEST(TagAtSlot, EverySlotAskedForHasATagOfTheShard) {
  for (const std::uint16_t slot : {0, 1, 5461, 8192, 10923, 16383}) {
    const std::string tag = detail::tag_at_slot("orders", 2, slot);
    EXPECT_EQ(detail::key_slot(tag), slot) << tag;
    EXPECT_EQ(detail::key_slot("hg:{" + tag + "}:stream"), slot) << "the keys' slot is the tag's";
    EXPECT_EQ(tag.rfind("orders:2:", 0), 0u) << tag;
  }
  EXPECT_EQ(detail::tag_at_slot("orders", 2, 8192), detail::tag_at_slot("orders", 2, 8192)) << "the same everywhere";
}

TEST(ShardTags, TheRecordSplitsAndJoins) {
  EXPECT_EQ(detail::split_tags("a:1:7 a:2:90"), (std::vector<std::string>{"a:1:7", "a:2:90"}));
  EXPECT_TRUE(detail::split_tags("").empty());
  EXPECT_EQ(detail::join_tags({"a:1", "a:2"}), "a:1 a:2");
  EXPECT_EQ(detail::join_tags({}), "");
}

}  // namespace
}  // namespace hourglass::fleet::shard_layout_tests
