// The Redis Cluster client against a real six-node cluster on loopback
// (redis_cluster_fixture.hpp): every key on the master of its slot, the slot
// map learned once, MOVED after a slot migrates, ASK and TRYAGAIN while it
// migrates, and a fleet queue that enqueues, runs and finishes its jobs on
// the cluster as on one Redis.
#include "hourglass/fleet/redis_cluster.hpp"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "cluster_slots.hpp"
#include "consumer_fixture.hpp"
#include "redis_cluster_fixture.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;

struct RedisCluster : ::testing::Test {
  redis_cluster_servers cluster;
  io_thread io;
  // Declared after io: closed (its calls ended) while the io thread still runs.
  std::unique_ptr<redis_cluster> client;

  redis_cluster& connect(int max_redirects = 5) {
    redis_cluster_options o;
    o.max_redirects = max_redirects;
    client = std::make_unique<redis_cluster>(io.io, cluster.seeds(), o);
    return *client;
  }
  ~RedisCluster() override { client.reset(); }
};

TEST_F(RedisCluster, SendsEachCommandToTheMasterOfItsKeysSlot) {
  redis_cluster& redis = connect();
  for (int i = 0; i < 100; ++i) {
    const std::string k = "key:" + std::to_string(i);
    ASSERT_TRUE(redis.call(context(), {"SET", k, "v" + std::to_string(i)}).is_status("OK")) << k;
  }
  for (int i = 0; i < 100; ++i) {
    const std::string k = "key:" + std::to_string(i);
    EXPECT_EQ(redis.call(context(), {"GET", k}).str, "v" + std::to_string(i));
  }
  // Our slots are Redis's, and each key is on the master serving its slot.
  std::set<std::uint16_t> ports;
  for (const std::string k : {"key:0", "key:7", "key:42", "hg:{orders}:stream", "foo{bar}{zap}", "foo{}{bar}"}) {
    EXPECT_EQ(cluster.on(*cluster.nodes().front(), {"CLUSTER", "KEYSLOT", k}).integer, detail::key_slot(k)) << k;
  }
  for (int i = 0; i < 10; ++i) {
    const std::string k = "key:" + std::to_string(i);
    redis_server& owner = cluster.master_of(k);
    EXPECT_EQ(cluster.on(owner, {"GET", k}).str, "v" + std::to_string(i)) << k;
    ports.insert(owner.port());
  }
  EXPECT_GT(ports.size(), 1u) << "the keys spread over the masters";
  // A keyless command runs where its route's slot is served.
  EXPECT_EQ(redis.call(context(), {"CLUSTER", "MYID"}, false, "hg:{orders}:stream").str,
            cluster.node_id(cluster.master_of("hg:{orders}:stream")));
  EXPECT_EQ(redis.map_refreshes(), 1u) << "the map was read once";
  EXPECT_EQ(redis.redirects(), 0u);
  EXPECT_TRUE(redis.connected());
}

TEST_F(RedisCluster, FollowsAskWhileASlotMigratesThenMovedOnceItHas) {
  redis_cluster& redis = connect(/*max_redirects=*/20);
  ASSERT_TRUE(redis.call(context(), {"SET", "{m}a", "A"}).is_status("OK"));
  ASSERT_TRUE(redis.call(context(), {"SET", "{m}b", "B"}).is_status("OK"));
  redis_server& from = cluster.master_of("{m}");
  redis_server& to = cluster.other_master("{m}");

  // Mid-migration: {m}a has moved, {m}b has not.
  cluster.migrate_slot("{m}", to, {"{m}a"}, /*finish=*/false);
  EXPECT_EQ(redis.call(context(), {"GET", "{m}a"}).str, "A") << "ASK: asked of the importing node behind ASKING";
  EXPECT_EQ(redis.call(context(), {"GET", "{m}b"}).str, "B") << "still served where it was";
  EXPECT_GE(redis.redirects(), 1u);

  // A script on both keys gets TRYAGAIN until the migration completes; it is
  // sent again (then MOVED) and lands once.
  std::thread finisher([&] {
    std::this_thread::sleep_for(50ms);
    cluster.finish_migration("{m}", from, to);
  });
  const std::uint64_t before_script = redis.redirects();
  const redis_reply r = redis.call(
      context(), {"EVAL", "redis.call('SET', KEYS[1], 'A2') return redis.call('GET', KEYS[2])", "2", "{m}a", "{m}b"});
  finisher.join();
  EXPECT_EQ(r.str, "B") << r.str;
  EXPECT_GE(redis.redirects() - before_script, 2u) << "at least one TRYAGAIN, then the MOVED";
  EXPECT_EQ(cluster.on(to, {"GET", "{m}a"}).str, "A2");
  EXPECT_EQ(cluster.on(to, {"GET", "{m}b"}).str, "B");

  // Now MOVED once, then straight to the new master.
  EXPECT_EQ(redis.call(context(), {"GET", "{m}b"}).str, "B");
  const std::uint64_t after = redis.redirects();
  EXPECT_EQ(redis.call(context(), {"GET", "{m}a"}).str, "A2");
  EXPECT_EQ(redis.redirects(), after) << "the map knows the slot's new master";
}

TEST_F(RedisCluster, ANodeThatCannotBeReachedIsTheBrokerUnavailableNotAHang) {
  redis_cluster& redis = connect();
  ASSERT_TRUE(redis.call(context(), {"SET", "{d}k", "v"}).is_status("OK"));
  cluster.master_of("{d}").pause();  // accepts, never answers
  auto src = context_source::with_timeout(real_clock(), 300ms);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(redis.call(src.get(), {"GET", "{d}k"}), stopped_error);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s) << "bounded by the caller's deadline";
  cluster.master_of("{d}").resume();
  // Other slots were served meanwhile, and are now.
  EXPECT_TRUE(redis.call(context(), {"SET", "{e}k", "v"}).is_status("OK"));
}

// A slot nobody serves (CLUSTER DELSLOTS on its master): every call to it
// fails and asks for a new map, but the map is read at most every 100 ms
// (min_refresh_gap), not once a failed call.
TEST_F(RedisCluster, CallsThatKeepFailingReadTheSlotMapAtMostEveryGap) {
  redis_cluster& redis = connect();
  ASSERT_TRUE(redis.call(context(), {"SET", "{g}k", "v"}).is_status("OK"));
  redis_server& owner = cluster.master_of("{g}");
  const std::string slot = std::to_string(detail::key_slot("{g}k"));
  ASSERT_TRUE(cluster.on(owner, {"CLUSTER", "DELSLOTS", slot}).is_status("OK"));
  const std::uint64_t before = redis.map_refreshes();
  int failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < 1s) {
    try {
      redis.call(context(), {"GET", "{g}k"});
    } catch (const redis_unavailable&) {
      ++failed;
    }
  }
  const std::uint64_t reads = redis.map_refreshes() - before;
  ASSERT_TRUE(cluster.on(owner, {"CLUSTER", "ADDSLOTS", slot}).is_status("OK"));
  EXPECT_GT(failed, 50) << "the calls kept failing, each asking for a map";
  EXPECT_LE(reads, 13u) << failed << " failed calls";
  EXPECT_GE(reads, 5u) << "and the map was still read again, every gap";
}

// A client closed while its first slot-map read is in flight: the read's
// connection fails, the next seed would be asked, the client is shut. That
// path once took the client's lock twice and hung the I/O thread; the
// io_context must keep serving other clients.
TEST_F(RedisCluster, AClientClosedWhileReadingTheSlotMapLeavesTheIoThreadServing) {
  for (int i = 0; i < 30; ++i) {
    auto closing = std::make_unique<redis_cluster>(io.io, cluster.seeds());
    closing->async_call(context(), {"GET", "{h}k"}, [](redis_result) {});
    closing.reset();
  }
  auto served = std::async(std::launch::async, [&] { return connect().call(context(), {"SET", "{h}k", "v"}); });
  ASSERT_EQ(served.wait_for(10s), std::future_status::ready) << "the I/O thread hangs";
  EXPECT_TRUE(served.get().is_status("OK"));
}

TEST_F(RedisCluster, AFleetQueueRunsItsJobsOnTheCluster) {
  redis_cluster& commands = connect();
  redis_cluster reads(io.io, cluster.seeds());
  {
    job_queue queue(commands, {.name = "orders"});
    queue.ensure_group(context());
    recording_runner runner;
    executor jobs{executor_options{.workers = 2}};
    consumer_options o;
    o.name = "a";
    o.slots = 2;
    o.lease = 600ms;
    o.read_block = 50ms;
    consumer c(queue, reads, jobs, runner.get(), o);
    c.start(context());
    std::vector<std::string> ids;
    for (int i = 0; i < 20; ++i) {
      job_spec spec;
      spec.handler = "echo";
      spec.payload = "p" + std::to_string(i);
      spec.freshness = 30s;
      const enqueued e = queue.enqueue(context(), spec);
      ASSERT_EQ(e.verdict, enqueued::kind::accepted);
      ids.push_back(e.id);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(test_common::eventually([&] {
        const auto j = queue.find(context(), ids[i]);
        return j && j->state == "ok";
      })) << ids[i];
      EXPECT_EQ(queue.find(context(), ids[i])->result, "ran:p" + std::to_string(i));
    }
    // All of it on the master of the queue's slot.
    redis_server& owner = cluster.master_of(queue.key("stream"));
    EXPECT_EQ(cluster.on(owner, {"EXISTS", queue.key("job:" + ids.front())}).integer, 1);
    EXPECT_EQ(cluster.on(owner, {"XLEN", queue.key("stream")}).integer, 0) << "every entry finished and deleted";
    c.stop();
  }
  EXPECT_EQ(commands.redirects(), 0u);
}

}  // namespace
}  // namespace hourglass::fleet::testing
