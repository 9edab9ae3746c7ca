// queue.lua on a real redis-server: a queue's counts read in one step, the
// oldest entry not yet delivered, the consumers with their slots and the
// entries they hold, and the pause switch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "job_hash.hpp"
#include "lua_script_fixture.hpp"

namespace hourglass::fleet::testing {
namespace {

struct QueueScript : LuaScript {
  queue_state run(const std::string& op) {
    return detail::decode_queue(eval(detail::queue_script, {stream, delayed, dead, slots, stats, paused}, {op, group}));
  }
};

TEST_F(QueueScript, CountsTheOldestWaitingEntryAndTheConsumers) {
  std::vector<std::string> entries;
  for (int i = 0; i < 3; ++i) entries.push_back(enqueue(new_job_id()));
  deliver("c1", 1);
  call({"HSET", slots, "c1", "4:99999999999999"});
  call({"HSET", stats, "mean_run_us", "2500"});
  call({"ZADD", delayed, "1", new_job_id()});
  call({"XADD", dead, "*", "id", new_job_id(), "deliveries", "3"});
  const queue_state q = run("look");
  EXPECT_GT(q.broker_now_us, 0);
  EXPECT_EQ(q.length, 3u);
  EXPECT_EQ(q.pending, 1u);
  EXPECT_EQ(q.oldest_waiting, entries[1]) << "the first one not delivered";
  EXPECT_EQ(q.scheduled, 1u);
  EXPECT_EQ(q.dead_letters, 1u);
  EXPECT_EQ(q.mean_run, std::chrono::microseconds(2500));
  EXPECT_FALSE(q.paused_since_ms);
  ASSERT_EQ(q.consumers.size(), 1u);
  EXPECT_EQ(q.consumers[0].name, "c1");
  EXPECT_EQ(q.consumers[0].slots, 4u);
  EXPECT_EQ(q.consumers[0].lease_expiry_ms, 99999999999999);
  EXPECT_EQ(q.consumers[0].held, 1u);

  call({"HDEL", slots, "c1"});  // it left (or died) holding an entry: listed all the same
  const queue_state left = run("look");
  ASSERT_EQ(left.consumers.size(), 1u);
  EXPECT_EQ(left.consumers[0].slots, 0u);
  EXPECT_FALSE(left.consumers[0].lease_expiry_ms);
  EXPECT_EQ(left.consumers[0].held, 1u);
}

TEST_F(QueueScript, RetryingAndWaitingAmongTheScheduledAndTheFleetsTotals) {
  const std::string delayed_job = new_job_id(), retry = new_job_id(), parent = new_job_id(), resumed = new_job_id();
  call({"ZADD", delayed, "100", delayed_job, "200", retry, "250", parent, "260", resumed});
  call(job_hash(job(delayed_job)).set(job_field::attempt, 1).state(job_state::scheduled));
  call(job_hash(job(retry)).set(job_field::attempt, 2).state(job_state::scheduled));
  call(job_hash(job(parent)).set(job_field::attempt, 1).state(job_state::waiting));
  call(job_hash(job(resumed))
           .set(job_field::attempt, 2)
           .state(job_state::waiting));  // a retry that now waits: waiting, not retrying
  call({"HSET", stats, "mean_run_us", "2500", "finished:ok", "7", "expired:queue", "3", "dead_dropped", "1"});
  const queue_state q = run("look");
  EXPECT_EQ(q.scheduled, 4u) << "the whole delayed set";
  EXPECT_EQ(q.retrying, 1u);
  EXPECT_EQ(q.waiting, 2u);
  EXPECT_TRUE(q.retrying_exact);
  EXPECT_EQ(q.totals, (std::vector<std::pair<std::string, std::uint64_t>>{
                          {"dead_dropped", 1}, {"expired:queue", 3}, {"finished:ok", 7}}))
      << "every counter but the mean, by name";

  std::vector<std::string> many{"ZADD", delayed};
  for (int i = 0; i < 1000; ++i) {
    many.push_back("300");
    many.push_back(new_job_id());
  }
  call(many);
  const queue_state big = run("look");
  EXPECT_EQ(big.scheduled, 1004u);
  EXPECT_FALSE(big.retrying_exact) << "only the first 1,000 due are looked at";
  EXPECT_EQ(big.retrying, 1u);
  EXPECT_EQ(big.waiting, 2u);
}

TEST_F(QueueScript, PauseRecordsSinceWhenOnceAndResumeClearsIt) {
  const queue_state p = run("pause");
  ASSERT_TRUE(p.paused_since_ms);
  EXPECT_NEAR(static_cast<double>(*p.paused_since_ms), static_cast<double>(p.broker_now_us / 1000), 1.0);
  const queue_state again = run("pause");
  EXPECT_EQ(again.paused_since_ms, p.paused_since_ms) << "paused since the first pause";
  EXPECT_FALSE(run("resume").paused_since_ms);
  EXPECT_EQ(call({"EXISTS", paused}).integer, 0);
  const queue_state empty = run("look");
  EXPECT_EQ(empty.length, 0u);
  EXPECT_EQ(empty.oldest_waiting, "");
  EXPECT_TRUE(eval(detail::queue_script, {stream, delayed, dead, slots, stats, paused}, {"drop", group}).is_error());
}

}  // namespace
}  // namespace hourglass::fleet::testing
