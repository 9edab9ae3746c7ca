// One process's consumers of a sharded queue (sharded_consumer.hpp): the
// pure sharing of its slots by each shard's demand, and, on a real
// redis-server, every job run once and the slots following the backlog.
#include "hourglass/fleet/sharded_consumer.hpp"

#include <gtest/gtest.h>

#include <future>
#include <numeric>

#include "consumer_fixture.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;
using shares = std::vector<std::size_t>;

TEST(ShareByDemand, EachShardGetsItsFloorThenTheRestInProportionToDemand) {
  EXPECT_EQ(share_by_demand(8, {0, 30, 10}, 1), (shares{1, 5, 2})) << "1 each, then 5 of 30:10 as 3.75:1.25";
  EXPECT_EQ(share_by_demand(8, {0, 0, 100}, 1), (shares{1, 1, 6}));
  EXPECT_EQ(share_by_demand(8, {0, 0, 100}, 0), (shares{0, 0, 8}));
  EXPECT_EQ(share_by_demand(6, {5, 5}, 0), (shares{3, 3}));
}

TEST(ShareByDemand, LargestRemaindersTakeWhatIsLeftTiesToTheLowerShard) {
  // 4 over 1:1:1 is 1.33 each: one more to the first shard.
  EXPECT_EQ(share_by_demand(4, {7, 7, 7}, 0), (shares{2, 1, 1}));
  // 5 over 1:2:2 is 1 : 2 : 2 exactly.
  EXPECT_EQ(share_by_demand(5, {1, 2, 2}, 0), (shares{1, 2, 2}));
  // 3 over 1:1:4 is 0.5 : 0.5 : 2: the lower of the two halves gets it.
  EXPECT_EQ(share_by_demand(3, {1, 1, 4}, 0), (shares{1, 0, 2}));
}

TEST(ShareByDemand, NoDemandAnywhereSharesEvenlyFirstShardsTakingTheRemainder) {
  EXPECT_EQ(share_by_demand(8, {0, 0, 0}, 1), (shares{3, 3, 2}));
  EXPECT_EQ(share_by_demand(8, {-4, 0, -1}, 0), (shares{3, 3, 2})) << "negative demand is none";
  EXPECT_EQ(share_by_demand(2, {-4, 6}, 0), (shares{0, 2}));
}

TEST(ShareByDemand, TooFewForEveryFloorGoesToTheFirstShardsAndNothingIsMadeUp) {
  EXPECT_EQ(share_by_demand(2, {0, 9, 9}, 1), (shares{1, 1, 0}));
  EXPECT_EQ(share_by_demand(0, {3, 9}, 1), (shares{0, 0}));
  EXPECT_TRUE(share_by_demand(5, {}, 1).empty());
  for (const std::size_t total : {1u, 7u, 64u, 1000u}) {
    const shares s = share_by_demand(total, {3, 1'000'000'000'000, 0, 17}, 1);
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), std::size_t{0}), total) << total;
  }
}

struct ShardedConsumer : ::testing::Test {
  ShardedConsumer() { queue.ensure_groups(context()); }

  std::vector<std::unique_ptr<redis_client>> readers() {
    std::vector<std::unique_ptr<redis_client>> each;
    for (std::size_t s = 0; s < queue.size(); ++s)
      each.push_back(std::make_unique<redis_connection>(io.io, server.endpoint()));
    return each;
  }
  static consumer_options options(std::size_t slots) {
    consumer_options o;
    o.name = "a";  // one daemon: the same name on every shard
    o.slots = slots;
    o.lease = 600ms;  // renewals, and sharing, every 200 ms
    o.read_block = 50ms;
    return o;
  }
  // The slots shard `shard`'s consumers offer admission now.
  std::uint64_t live_slots(std::size_t shard) {
    std::promise<async_answer<queue_state>> p;
    queue.shard(shard).async_queue_state(context(), queue_op::look,
                                         [&p](async_answer<queue_state> a) { p.set_value(std::move(a)); });
    async_answer<queue_state> a = p.get_future().get();
    if (a.error) std::rethrow_exception(a.error);
    std::uint64_t n = 0;
    for (const auto& c : a.value.consumers) n += c.slots;
    return n;
  }
  std::string state(const std::string& id) {
    const auto j = queue.of_id(id).find(context(), id);
    return j ? std::string(j->state) : "";
  }

  redis_server server;
  io_thread io;
  redis_connection redis{io.io, server.endpoint()};
  sharded_queue queue{redis, {.name = "orders", .shards = 3}};
  recording_runner runner;
};

TEST_F(ShardedConsumer, RunsEveryJobOfEveryShardOnce) {
  executor jobs{executor_options{.workers = 3}};
  sharded_consumer c(queue, readers(), jobs, runner.get(), options(3));
  c.start(context());
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    const job_spec spec{.handler = "echo", .payload = std::to_string(i)};
    ids.push_back(queue.for_new(spec).enqueue(context(), spec).id);
  }
  for (const std::string& id : ids) ASSERT_TRUE(eventually([&] { return state(id) == "ok"; })) << id;
  EXPECT_EQ(runner.ids().size(), ids.size()) << "each ran once";
  // Counted when each finish's reply comes, after the states are written.
  EXPECT_TRUE(eventually([&] { return c.stats().outcomes_written == ids.size(); }))
      << c.stats().outcomes_written << ": the shards' counts summed";
  c.stop();
}

// Six workers over three shards start at two each; once the renewals have
// read the backlog, all of it on shard 1, shard 1 runs four at once and the
// idle shards keep one slot each, offered to admission as their capacity.
TEST_F(ShardedConsumer, TheSlotsFollowTheBacklogAndEveryShardKeepsOne) {
  executor jobs{executor_options{.workers = 6}};
  sharded_consumer c(queue, readers(), jobs, runner.get(), options(6));
  EXPECT_EQ(c.slots(), (shares{2, 2, 2})) << "evenly before any demand is known";
  c.start(context());
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(queue.shard(1).enqueue(context(), {.handler = "block"}).id);
  ASSERT_TRUE(eventually([&] { return c.slots() == shares{1, 4, 1}; })) << c.slots()[1];
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 4; })) << runner.running.load();
  // Admission's view: each shard's live slots are its share.
  EXPECT_TRUE(eventually([&] { return live_slots(0) == 1u && live_slots(1) == 4u && live_slots(2) == 1u; }));

  // A job on an idle shard is still read and run at once.
  const std::string other = queue.shard(2).enqueue(context(), {.handler = "echo"}).id;
  EXPECT_TRUE(eventually([&] { return state(other) == "ok"; }));

  runner.released = true;
  for (const std::string& id : ids) ASSERT_TRUE(eventually([&] { return state(id) == "ok"; })) << id;
  // No demand left anywhere: evenly again.
  EXPECT_TRUE(eventually([&] { return c.slots() == shares{2, 2, 2}; })) << c.slots()[1];
  c.stop();
}

}  // namespace
}  // namespace hourglass::fleet::testing
