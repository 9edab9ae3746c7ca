// Durable on replicas: a write followed by WAIT on the same connection, and a
// queue whose enqueue is confirmed only once the master and N replicas hold
// the job (queue_options::replicas). Real redis-server master and replica.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/eventually.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "redis_server.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;

struct Replicated : ::testing::Test {
  redis_server master{{"--repl-diskless-sync-delay", "0"}};  // a replica's first sync at once, not after 5 s
  io_thread io;

  // A replica of `master`, once the master counts it online (its first sync done).
  std::unique_ptr<redis_server> start_replica() {
    auto r = std::make_unique<redis_server>(
        std::vector<std::string>{"--replicaof", "127.0.0.1", std::to_string(master.port())});
    redis_connection probe(io.io, master.endpoint());
    const bool up = test_common::eventually([&] {
      return probe.call(context(), {"INFO", "replication"}).str.find("state=online") != std::string::npos;
    });
    if (!up) throw std::runtime_error("the replica did not connect");
    return r;
  }
};

redis_result replicated_call(redis_client& c, std::vector<std::string> args, int replicas, duration timeout) {
  std::promise<redis_result> p;
  c.async_call_replicated(
      context(), std::move(args), [&p](redis_result r) { p.set_value(std::move(r)); }, replicas, timeout);
  return p.get_future().get();
}

TEST_F(Replicated, AWaitBehindAWriteCountsTheReplicasHoldingIt) {
  redis_connection redis(io.io, master.endpoint());
  const redis_result alone = replicated_call(redis, {"SET", "k", "1"}, 1, 100ms);
  ASSERT_EQ(alone.result, redis_result::code::ok) << alone.message;
  EXPECT_TRUE(alone.reply.is_status("OK")) << "the command's own reply";
  EXPECT_EQ(alone.replicas, 0) << "no replica: WAIT timed out with none";

  const auto replica = start_replica();
  const redis_result held = replicated_call(redis, {"SET", "k", "2"}, 1, 5s);
  ASSERT_EQ(held.result, redis_result::code::ok) << held.message;
  EXPECT_EQ(held.replicas, 1);
  redis_connection on_replica(io.io, replica->endpoint());
  EXPECT_EQ(on_replica.call(context(), {"GET", "k"}).str, "2") << "the replica has it";

  const redis_result refused = replicated_call(redis, {"INCR", "k", "extra"}, 1, 5s);
  ASSERT_EQ(refused.result, redis_result::code::ok);
  EXPECT_TRUE(refused.reply.is_error()) << "an error reply is answered as it is, without its WAIT";
  EXPECT_EQ(refused.replicas, -1);
}

TEST_F(Replicated, AnEnqueueIsConfirmedOnlyOnceTheReplicasHoldIt) {
  redis_connection redis(io.io, master.endpoint());
  job_queue queue(redis, {.name = "q", .replicas = 1, .replica_timeout = 100ms});
  queue.ensure_group(context());
  job_spec spec;
  spec.handler = "echo";
  spec.payload = "x";
  try {
    queue.enqueue(context(), spec);
    FAIL() << "confirmed without a replica";
  } catch (const redis_unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("reached 0 of 1 replicas within 100 ms"), std::string::npos) << e.what();
  }
  const auto bulk = queue.enqueue_bulk(context(), {spec, spec});
  ASSERT_EQ(bulk.size(), 2u);
  for (const auto& a : bulk) EXPECT_TRUE(a.error) << "each job of the batch unconfirmed";

  // With a replica, a timeout a loaded machine (sanitizers, a CI neighbour)
  // meets: the replica's acknowledgement can take longer than 100 ms there.
  const auto replica = start_replica();
  job_queue patient(redis, {.name = "q", .replicas = 1, .replica_timeout = 5s});
  const enqueued e = patient.enqueue(context(), spec);
  EXPECT_EQ(e.verdict, enqueued::kind::accepted);
  redis_connection on_replica(io.io, replica->endpoint());
  EXPECT_EQ(on_replica.call(context(), {"HGET", patient.key("job:" + e.id), "state"}).str, "queued")
      << "the replica holds the confirmed job";
}

}  // namespace
}  // namespace hourglass::fleet::testing
