// The dead letter's scripts on a real redis-server: start.lua keeps a
// dead-lettered job whole and bounds the dead list; dead.lua replays a dead
// job only when admission says it can start in time, deletes one, and
// purges the oldest.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "job_hash.hpp"
#include "lua_script_fixture.hpp"

namespace hourglass::fleet::testing {
namespace {

struct DeadLetter : LuaScript {
  // Delivers and starts `id` (entry `e`) with max_deliveries 1, twice: the second start dead-letters it.
  redis_reply start_twice(const std::string& id, const std::string& e, const std::string& dead_max = "100") {
    const std::vector<std::string> args{group, "c1", "1", "60000", "600000", dead_max, e, id, "life-1/" + e};
    eval(detail::start_script, {stream, dead, stats, job(id)}, args);
    std::vector<std::string> again = args;
    again.back() = "life-2/" + e;  // another life: a new delivery
    return eval(detail::start_script, {stream, dead, stats, job(id)}, again);
  }
  std::string make_dead(const std::string& id, const std::string& dead_max = "100") {
    const std::string e = enqueue(id, "the payload");
    deliver("c1", 1);
    start_twice(id, e, dead_max);
    return field(job(id), "state");
  }
  dead_answer run(const std::string& id, const std::vector<std::string>& args) {
    return detail::decode_dead(eval(detail::dead_script, {stream, slots, stats, dead, job(id)}, args));
  }
};

TEST_F(DeadLetter, StartKeepsADeadJobWholeAndTheListBounded) {
  const std::string a = new_job_id(), b = new_job_id();
  ASSERT_EQ(make_dead(a, "1"), "dead");
  EXPECT_EQ(field(job(a), "payload"), "the payload") << "kept for a replay";
  EXPECT_GT(call({"PTTL", job(a)}).integer, 60000) << "the dead TTL, not the result TTL";
  EXPECT_FALSE(field(job(a), "dead_entry").empty());
  ASSERT_EQ(make_dead(b, "1"), "dead");
  EXPECT_EQ(call({"XLEN", dead}).integer, 1) << "the oldest dropped beyond the bound";
  EXPECT_EQ(field(stats, "dead_dropped"), "1");
  // The daemon whose start dead-letters a job is told what that dropped: its /metrics counts it.
  const std::string c = new_job_id();
  const std::string e = enqueue(c, "p");
  deliver("c1", 1);
  const std::vector<std::string> first{group, "c1", "1", "60000", "600000", "1", e, c, "life-1/" + e};
  (void)eval(detail::start_script, {stream, dead, stats, job(c)}, first);
  std::vector<std::string> second = first;
  second.back() = "life-2/" + e;
  const detail::start_batch_reply r = detail::decode_start(
      eval(detail::start_script, {stream, dead, stats, job(c)}, second), 1);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].v, job_queue::start_answer::verdict::dead);
  EXPECT_EQ(r.jobs[0].dead_dropped, 1u) << "one entry pushed past --dead-max 1";
  EXPECT_EQ(field(stats, "dead_dropped"), "2");
}

// A dead child counts down its parent; replayed, it may end again (here:
// dead again): the parent's counts must not see it twice.
TEST_F(DeadLetter, AReplayedDeadChildCountsDownItsParentOnce) {
  const std::string parent = new_job_id(), child = new_job_id();
  call(job_hash(job(parent)).set(job_field::id, parent).state(job_state::running));
  const std::string e = enqueue(child, "p");
  call(job_hash(job(child)).set(job_field::parent, parent));
  deliver("c1", 1);
  (void)start_twice(child, e);
  ASSERT_EQ(field(job(child), "state"), "dead");
  EXPECT_EQ(field(job(parent), "children_done"), "1");
  ASSERT_EQ(run(child, {"replay", group, "-1", "0", "0"}).verdict, dead_answer::kind::done);
  ASSERT_EQ(field(job(child), "state"), "queued");
  deliver("c1", 1);
  (void)start_twice(child, field(job(child), "entry"));
  ASSERT_EQ(field(job(child), "state"), "dead") << "dead again";
  EXPECT_EQ(field(job(parent), "children_done"), "1") << "counted once";
}

TEST_F(DeadLetter, AReplayIsAdmittedOnlyWhenItCanStartInTimeAndQueuesTheJobAgain) {
  const std::string id = new_job_id();
  ASSERT_EQ(make_dead(id), "dead");
  const std::string dead_entry = field(job(id), "dead_entry");
  enqueue(new_job_id());  // a backlog, and no live slot to serve it
  const dead_answer refused = run(id, {"replay", group, "5000", "10", "1"});
  EXPECT_EQ(refused.verdict, dead_answer::kind::refused);
  EXPECT_FALSE(refused.predicted_wait) << "unbounded";
  EXPECT_EQ(field(job(id), "state"), "dead") << "nothing changed";

  call({"HSET", slots, "c9", "4:99999999999999"});
  call({"HSET", stats, "mean_run_us", "1000"});
  const dead_answer ok = run(id, {"replay", group, "5000", "10", "1"});
  ASSERT_EQ(ok.verdict, dead_answer::kind::done);
  EXPECT_EQ(ok.predicted_wait, std::chrono::microseconds(375))
      << "one job ahead (and half a slot's run), 1 ms each, 4 slots";
  EXPECT_EQ(field(job(id), "state"), "queued");
  EXPECT_EQ(field(job(id), "deliveries"), "0");
  EXPECT_EQ(field(job(id), "freshness_ms"), "5000");
  EXPECT_EQ(field(job(id), "payload"), "the payload");
  EXPECT_EQ(field(job(id), "dead_entry"), "");
  EXPECT_EQ(call({"PTTL", job(id)}).integer, -1) << "held until it finishes, as any queued job";
  EXPECT_TRUE(call({"XRANGE", dead, dead_entry, dead_entry}).elements.empty());
  const std::string entry = field(job(id), "entry");
  EXPECT_EQ(call({"XRANGE", stream, entry, entry}).elements.size(), 1u) << "a new entry in the stream";
  EXPECT_EQ(run(id, {"replay", group, "5000", "10", "1"}).verdict, dead_answer::kind::not_dead);
  EXPECT_EQ(run(new_job_id(), {"replay", group, "5000", "10", "1"}).verdict, dead_answer::kind::unknown);
}

TEST_F(DeadLetter, DeleteAndPurgeRemoveDeadJobsAndTheirEntries) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(new_job_id());
    ASSERT_EQ(make_dead(ids.back()), "dead");
  }
  EXPECT_EQ(run(ids[0], {"delete", group}).verdict, dead_answer::kind::done);
  EXPECT_EQ(call({"EXISTS", job(ids[0])}).integer, 0);
  EXPECT_EQ(call({"XLEN", dead}).integer, 3);
  const redis_reply purged = eval(detail::dead_script, {stream, slots, stats, dead, "hg:{t}:job:"},
                                  {"purge", group, "2", "hg:{t}:job:"});
  ASSERT_TRUE(purged.is_array());
  EXPECT_EQ(purged.elements.at(0).integer, 2);
  EXPECT_EQ(purged.elements.at(1).integer, 2);
  EXPECT_EQ(purged.elements.at(2).integer, 1) << "one left";
  EXPECT_EQ(call({"EXISTS", job(ids[1])}).integer, 0) << "the oldest first";
  EXPECT_EQ(call({"EXISTS", job(ids[3])}).integer, 1);
  const std::string live = new_job_id();
  enqueue(live);
  EXPECT_EQ(run(live, {"delete", group}).verdict, dead_answer::kind::not_dead) << "a queued job is not deleted";
}

}  // namespace
}  // namespace hourglass::fleet::testing
