// The reader's room (reading_room.hpp), without a broker or threads.
#include "reading_room.hpp"

#include <gtest/gtest.h>

namespace hourglass::fleet::detail::reading_room_testing {
namespace {

constexpr holding_limits one_slot_two_prefetched{.slots = 1, .prefetch = 2, .max_takes_in_flight = 1};

TEST(RoomToRead, SlotsAndPrefetchLessWhatItHolds) {
  EXPECT_EQ(room_to_read({}, one_slot_two_prefetched), 3u);
  EXPECT_EQ(room_to_read({.busy = 1}, one_slot_two_prefetched), 2u);
  EXPECT_EQ(room_to_read({.busy = 3}, one_slot_two_prefetched), 0u) << "full";
  EXPECT_EQ(room_to_read({.busy = 5}, one_slot_two_prefetched), 0u) << "over (a reclaim): no underflow";
}

TEST(RoomToRead, NoneWhileFencedPausedOrATakeIsInFlight) {
  EXPECT_EQ(room_to_read({.fenced = true}, one_slot_two_prefetched), 0u);
  EXPECT_EQ(room_to_read({.paused = true}, one_slot_two_prefetched), 0u);
  EXPECT_EQ(room_to_read({.takes_in_flight = 1}, one_slot_two_prefetched), 0u) << "its answer says what it holds";
  EXPECT_EQ(room_to_read({.takes_in_flight = 1}, {.slots = 1, .prefetch = 2, .max_takes_in_flight = 2}), 3u);
}

TEST(RoomToRead, NoneWhileAJobATakeStartedWaitsForAWorker) {
  // Read now, a prefetched entry could reach a worker first: two jobs
  // running on the broker for one slot, the started one waiting.
  EXPECT_EQ(room_to_read({.busy = 1, .started_waiting = 1}, one_slot_two_prefetched), 0u);
  EXPECT_EQ(room_to_read({.busy = 1, .started_waiting = 0}, one_slot_two_prefetched), 2u) << "a worker has it";
}

TEST(RoomToStart, OnlyTheFreeSlots) {
  EXPECT_EQ(room_to_start({}, one_slot_two_prefetched), 1u) << "the prefetched two are read unstarted";
  EXPECT_EQ(room_to_start({.busy = 1}, one_slot_two_prefetched), 0u);
  EXPECT_EQ(room_to_start({.busy = 2}, {.slots = 4, .prefetch = 0, .max_takes_in_flight = 1}), 2u);
  EXPECT_EQ(room_to_start({.takes_in_flight = 1}, one_slot_two_prefetched), 0u);
  EXPECT_EQ(room_to_start({.busy = 7}, {.slots = 4, .prefetch = 0, .max_takes_in_flight = 1}), 0u);
}

}  // namespace
}  // namespace hourglass::fleet::detail::reading_room_testing
