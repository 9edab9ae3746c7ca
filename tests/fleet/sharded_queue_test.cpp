// A queue over several shards (sharded_queue.hpp): each shard its own keys
// under its own hash tag; new jobs by Idempotency-Key or in turn; ids that
// name their shard; bulk answers in order; listing across shards. On one
// redis-server, and spread over a cluster.
#include "hourglass/fleet/sharded_queue.hpp"

#include <gtest/gtest.h>

#include <future>
#include <set>

#include "cluster_slots.hpp"
#include "consumer_fixture.hpp"
#include "hourglass/fleet/redis_cluster.hpp"
#include "job_hash.hpp"
#include "redis_cluster_fixture.hpp"
#include "shard_layout.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;

template <class T, class F>
T waited(F start) {
  std::promise<async_answer<T>> p;
  start([&p](async_answer<T> a) { p.set_value(std::move(a)); });
  async_answer<T> a = p.get_future().get();
  if (a.error) std::rethrow_exception(a.error);
  return std::move(a.value);
}

struct ShardedQueue : ::testing::Test {
  redis_server server;
  io_thread io;
  redis_connection redis{io.io, server.endpoint()};
  sharded_queue queue{redis, {.name = "orders", .shards = 3}};

  std::optional<fleet_job> find(const std::string& id) {
    return waited<std::optional<fleet_job>>([&](auto done) { queue.async_find(context(), id, done); });
  }
  enqueued enqueue(job_spec spec) {
    return waited<enqueued>([&](auto done) { queue.async_enqueue(context(), std::move(spec), done); });
  }
};

TEST_F(ShardedQueue, EachShardHasItsOwnKeysAndEachIdNamesItsShard) {
  queue.ensure_groups(context());
  EXPECT_EQ(queue.shard(0).key("stream"), "hg:{orders}:stream") << "shard 0 is the unsharded queue's keys";
  const std::vector<std::string> tags = detail::split_tags(redis.call(context(), {"GET", "hg:{orders}:shards"}).str);
  ASSERT_EQ(tags.size(), 2u) << "shard 0 records the others' tags";
  EXPECT_EQ(queue.shard(1).key("stream"), "hg:{" + tags[0] + "}:stream");
  EXPECT_EQ(queue.shard(2).key("job:x"), "hg:{" + tags[1] + "}:job:x");
  EXPECT_EQ(tags[0].rfind("orders:1:", 0), 0u) << tags[0];
  sharded_queue again(redis, {.name = "orders", .shards = 3});
  EXPECT_EQ(again.shard(2).key("stream"), queue.shard(2).key("stream")) << "every daemon reads the same tags";
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(enqueue({.handler = "echo", .payload = std::to_string(i)}).id);
  std::set<unsigned> shards;
  for (const std::string& id : ids) {
    const unsigned s = shard_of_job(id, 3);
    shards.insert(s);
    EXPECT_EQ(redis.call(context(), {"HGET", queue.shard(s).key("job:" + id), "state"}).str, "queued") << id;
    const auto j = find(id);
    ASSERT_TRUE(j) << id;
    EXPECT_EQ(j->state, "queued");
  }
  EXPECT_EQ(shards.size(), 3u) << "jobs without a key go to each shard in turn";
  for (unsigned s = 0; s < 3; ++s) {
    EXPECT_EQ(redis.call(context(), {"XLEN", queue.shard(s).key("stream")}).integer, 2) << "shard " << s;
  }
  EXPECT_EQ(shard_of_job(ids.front(), 1), 0u);
  EXPECT_EQ(shard_of_job("0123456789abcdef0123456789abcdff", 3), 0u) << "digits naming no shard: shard 0";
}

// A queue of one shard grown to 64: its jobs (in shard 0, whose keys are
// the unsharded queue's) are found by their ids, as a signal or a
// Job-Parent naming them looks them up. (With random last digits a quarter
// of them named another shard.)
TEST_F(ShardedQueue, JobsOfAQueueOfOneShardAreFoundOnceItHasMore) {
  job_queue one(redis, {.name = "grown"});
  one.ensure_group(context());
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(one.enqueue(context(), {.handler = "echo"}).id);
  sharded_queue grown(redis, {.name = "grown", .shards = 64});
  for (const std::string& id : ids) {
    EXPECT_EQ(shard_of_job(id, 64), 0u) << id;
    const auto j = waited<std::optional<fleet_job>>([&](auto done) { grown.async_find(context(), id, done); });
    ASSERT_TRUE(j) << "lost after the queue grew: " << id;
    EXPECT_EQ(j->state, "queued");
  }
}

// A queue sharded before shard tags were chosen keeps its {name:i} shards
// (their jobs are served where they are) and records them; fewer shards
// than recorded are refused; more are added into the widest gaps, the
// shards placed earlier unmoved.
TEST_F(ShardedQueue, AnEarlierLayoutIsKeptFewerShardsAreRefusedMoreAreAdded) {
  redis.call(context(), {"XGROUP", "CREATE", "hg:{old:1}:stream", "hourglass", "0", "MKSTREAM"});
  redis.call(context(), {"XGROUP", "CREATE", "hg:{old:2}:stream", "hourglass", "0", "MKSTREAM"});
  sharded_queue old(redis, {.name = "old", .shards = 3});
  EXPECT_EQ(old.shard(1).key("stream"), "hg:{old:1}:stream") << "its jobs stay where they are";
  EXPECT_EQ(old.shard(2).key("stream"), "hg:{old:2}:stream");
  EXPECT_EQ(redis.call(context(), {"GET", "hg:{old}:shards"}).str, "old:1 old:2");
  EXPECT_THROW(sharded_queue(redis, {.name = "old", .shards = 2}), std::invalid_argument) << "shards never go";

  sharded_queue two(redis, {.name = "grows", .shards = 2});
  const std::string first = two.shard(1).key("stream");
  sharded_queue four(redis, {.name = "grows", .shards = 4});
  EXPECT_EQ(four.shard(1).key("stream"), first) << "a shard with jobs never moves";
  std::vector<unsigned> slots;
  for (std::size_t s = 0; s < four.size(); ++s) slots.push_back(detail::key_slot(four.shard(s).key("stream")));
  EXPECT_EQ((slots[1] - slots[0] + 16384) % 16384, 8192u) << "two: half the ring apart";
  EXPECT_EQ((slots[2] - slots[0] + 16384) % 16384 % 8192, 4096u) << "the added ones in the gaps' middles";
  EXPECT_EQ((slots[3] - slots[0] + 16384) % 16384 % 8192, 4096u);
  EXPECT_NE(slots[2], slots[3]);
}

TEST_F(ShardedQueue, AnIdempotencyKeyAlwaysGoesToOneShardSoARepeatFindsTheFirstJob) {
  queue.ensure_groups(context());
  const enqueued first = enqueue({.handler = "echo", .idempotency_key = "order-17"});
  ASSERT_EQ(first.verdict, enqueued::kind::accepted);
  for (int i = 0; i < 4; ++i) {
    const enqueued again = enqueue({.handler = "echo", .idempotency_key = "order-17"});
    EXPECT_EQ(again.verdict, enqueued::kind::duplicate);
    EXPECT_EQ(again.id, first.id);
  }
  EXPECT_EQ(shard_of_job(first.id, 3), shard_of_key("order-17", 3));
  EXPECT_EQ(shard_of_key("order-17", 3), shard_of_key("order-17", 3));
  EXPECT_EQ(shard_of_key("anything", 1), 0u);
}

TEST_F(ShardedQueue, ABulkGoesToEachJobsShardAndIsAnsweredInOrder) {
  queue.ensure_groups(context());
  std::vector<job_spec> jobs;
  for (int i = 0; i < 7; ++i) jobs.push_back({.handler = "echo", .payload = "p" + std::to_string(i)});
  jobs[3].idempotency_key = "k";
  jobs.push_back({.handler = "echo", .payload = "again", .idempotency_key = "k"});
  std::promise<std::vector<async_answer<enqueued>>> p;
  queue.async_enqueue_bulk(context(), jobs, [&p](auto a) { p.set_value(std::move(a)); });
  const auto answers = p.get_future().get();
  ASSERT_EQ(answers.size(), 8u);
  for (std::size_t i = 0; i < 7; ++i) {
    ASSERT_FALSE(answers[i].error);
    ASSERT_EQ(answers[i].value.verdict, enqueued::kind::accepted) << i;
    const auto j = find(answers[i].value.id);
    ASSERT_TRUE(j);
    EXPECT_EQ(j->payload, "p" + std::to_string(i)) << "answer " << i << " is job " << i;
  }
  EXPECT_EQ(answers[7].value.verdict, enqueued::kind::duplicate);
  EXPECT_EQ(answers[7].value.id, answers[3].value.id);
}

TEST_F(ShardedQueue, AnIdFromBeforeTheQueueWasShardedIsFoundInShardZero) {
  // A job of the queue as it was with one shard, whose id's last digits
  // happen to name shard 1 (1 in 128 random ids do), written as enqueue writes it.
  job_queue before(redis, {.name = "orders"});
  before.ensure_group(context());
  const std::string id = new_job_id().substr(0, 30) + "01";
  const std::string entry = redis
                                .call(context(), {"XADD", before.key("stream"), "*", "id", id, "handler", "echo",
                                                  "freshness_ms", "-1", "min_budget_ms", "0"})
                                .str;
  redis.call(context(), job_hash(before.key("job:" + id))
                            .enqueued(id, "echo", "", entry)
                            .state(job_state::queued)
                            .set(job_field::deliveries, 0));
  ASSERT_EQ(shard_of_job(id, 3), 1u);
  const auto j = find(id);
  ASSERT_TRUE(j) << "looked up in the shard its digits name, then in shard 0";
  EXPECT_EQ(j->state, "queued");
  const cancelled_job c = waited<cancelled_job>([&](auto done) { queue.async_cancel(context(), id, done); });
  ASSERT_TRUE(c.job);
  EXPECT_TRUE(c.cancelled_here);
  EXPECT_EQ(c.job->state, "cancelled");
}

TEST_F(ShardedQueue, ListingWalksEveryShardOnceAndStatesComePerShard) {
  queue.ensure_groups(context());
  std::set<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.insert(enqueue({.handler = "echo"}).id);
  std::set<std::string> listed;
  std::string cursor;
  int pages = 0;
  do {
    const job_list page = waited<job_list>(
        [&](auto done) { queue.async_list(context(), {.state = "queued", .cursor = cursor, .count = 2}, done); });
    ASSERT_FALSE(page.invalid_cursor) << cursor;
    for (const fleet_job& j : page.jobs) EXPECT_TRUE(listed.insert(j.id).second) << "listed twice: " << j.id;
    cursor = page.next_cursor;
    ASSERT_LT(++pages, 50);
  } while (!cursor.empty());
  EXPECT_EQ(listed, ids);
  const job_list bad = waited<job_list>(
      [&](auto done) { queue.async_list(context(), {.state = "queued", .cursor = "7/0-0"}, done); });
  EXPECT_TRUE(bad.invalid_cursor);

  const auto states = waited<std::vector<queue_state>>(
      [&](auto done) { queue.async_queue_states(context(), queue_op::look, done); });
  ASSERT_EQ(states.size(), 3u);
  std::uint64_t total = 0;
  for (const queue_state& s : states) total += s.length;
  EXPECT_EQ(total, 10u);
}

TEST(MergeStates, TheShardsAreOneQueueOnShardZerosClockWithoutComparingTwoClocks) {
  // Shard 1's node is 300 s ahead of shard 0's.
  queue_state a;
  a.broker_now_us = 1'000'000'000;  // 1,000,000 ms
  a.length = 3;
  a.pending = 1;
  a.oldest_waiting = "999000-0";  // waited 1 s on its own clock
  a.dead_letters = 1;
  a.scheduled = 1;
  a.waiting = 1;
  a.mean_run = 10ms;
  a.consumers.push_back({"d1", 2, 1'005'000, 1});
  a.totals = {{"finished:ok", 5}};
  queue_state b;
  b.broker_now_us = 1'300'000'000;
  b.length = 4;
  b.pending = 2;
  b.oldest_waiting = "1297000-0";  // waited 3 s on its own clock: the longest
  b.scheduled = 2;
  b.mean_run = 30ms;
  b.paused_since_ms = 1'299'000;
  b.consumers.push_back({"d1", 2, 1'303'000, 2});
  b.consumers.push_back({"d2", 1, 1'302'000, 0});
  b.totals = {{"expired:queue", 1}, {"finished:ok", 7}};
  const queue_state m = merge_states({a, b});
  EXPECT_EQ(m.broker_now_us, a.broker_now_us);
  EXPECT_EQ(m.length, 7u);
  EXPECT_EQ(m.pending, 3u);
  EXPECT_EQ(m.scheduled, 3u);
  EXPECT_EQ(m.waiting, 1u);
  EXPECT_EQ(m.dead_letters, 1u);
  EXPECT_EQ(m.oldest_waiting, "997000-0") << "3 s before shard 0's now: its own wait, not a 300 s skew";
  EXPECT_EQ(m.paused_since_ms, 999'000) << "paused 1 s ago, on shard 0's clock";
  EXPECT_EQ(m.mean_run, 20ms);
  ASSERT_EQ(m.consumers.size(), 2u);
  EXPECT_EQ(m.consumers[0].name, "d1");
  EXPECT_EQ(m.consumers[0].slots, 4u);
  EXPECT_EQ(m.consumers[0].held, 3u);
  EXPECT_EQ(m.consumers[0].lease_expiry_ms, 1'003'000) << "the soonest, each moved onto shard 0's clock";
  EXPECT_EQ(m.consumers[1].lease_expiry_ms, 1'002'000);
  const std::vector<std::pair<std::string, std::uint64_t>> totals{{"finished:ok", 12}, {"expired:queue", 1}};
  EXPECT_EQ(m.totals, totals);
  EXPECT_EQ(merge_states({}).length, 0u);
}

TEST(SumOf, OneConsumerPerShardCountsAsOneProcess) {
  consumer_stats a, b;
  a.delivered = 3;
  a.outcomes_written = 2;
  a.backlog = 5;
  a.broker_clock_offset_us = -7;
  b.delivered = 4;
  b.outcomes_written = 1;
  b.backlog = 1;
  b.held = 2;
  b.paused = true;
  b.broker_clock_offset_us = 99;
  const consumer_stats t = sum_of({a, b});
  EXPECT_EQ(t.delivered, 7u);
  EXPECT_EQ(t.outcomes_written, 3u);
  EXPECT_EQ(t.backlog, 6);
  EXPECT_EQ(t.held, 2u);
  EXPECT_TRUE(t.paused);
  EXPECT_EQ(t.broker_clock_offset_us, -7) << "shard 0's";
  EXPECT_EQ(sum_of({}).delivered, 0u);
}

TEST(ShardedQueueOnACluster, ShardsSpreadOverTheMastersByTheirHashTags) {
  redis_cluster_servers cluster(3, 0);
  io_thread io;
  auto redis = std::make_unique<redis_cluster>(io.io, cluster.seeds());
  {
    // Eight shards over three masters: every master serves some.
    sharded_queue queue(*redis, {.name = "orders", .shards = 8});
    queue.ensure_groups(context());
    std::set<std::uint16_t> masters;
    for (std::size_t s = 0; s < queue.size(); ++s)
      masters.insert(cluster.master_of(queue.shard(s).key("stream")).port());
    EXPECT_EQ(masters.size(), 3u);
    // Three shards on three masters, for any name: each its own master.
    for (const char* name : {"billing", "emails", "q", "resize-images", "x7"}) {
      sharded_queue three(*redis, {.name = name, .shards = 3});
      std::set<std::uint16_t> own;
      for (std::size_t s = 0; s < three.size(); ++s) own.insert(cluster.master_of(three.shard(s).key("stream")).port());
      EXPECT_EQ(own.size(), 3u) << name;
    }
    std::vector<std::string> ids;
    for (int i = 0; i < 16; ++i) {
      const enqueued e = waited<enqueued>(
          [&](auto done) { queue.async_enqueue(context(), {.handler = "echo"}, done); });
      ids.push_back(e.id);
    }
    for (const std::string& id : ids) {
      const unsigned s = shard_of_job(id, 8);
      EXPECT_EQ(cluster.on(cluster.master_of(queue.shard(s).key("stream")), {"EXISTS", queue.shard(s).key("job:" + id)})
                    .integer,
                1)
          << id;
    }
  }
  redis.reset();
}

}  // namespace
}  // namespace hourglass::fleet::testing
