// The fleet's consumer against a real redis-server and a real executor:
// delivery into the executor, freshness on the broker's clock at delivery, at
// dequeue and at start, reclaim of a dead daemon's jobs, dead-lettering,
// cancel across the fleet, drain hand-back, the loss alarm. What depends on
// the daemon's own time (renewals, fencing, reclaim pacing, drain's
// deadline, taking a name over) is in consumer_clock_test.cpp, on a
// manual_clock.
//
// These run on the real clock and wait for nothing of ours: what they time
// is the broker's (a job's age on its TIME, an entry's idle time), exact
// without waiting through explicit stream ids (the broker's time of
// enqueue) and XCLAIM IDLE, so a manual clock would change nothing. Their
// waits are for events, polled.
#include "hourglass/fleet/consumer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "consumer_fixture.hpp"
#include "job_hash.hpp"

namespace hourglass::fleet::testing {
namespace {

TEST_F(Consumer, RunsAnEnqueuedJobAndRecordsItsOneOutcome) {
  job_spec spec;
  spec.handler = "echo";
  spec.payload = "hello";
  spec.idempotency_key = "k-1";
  const enqueued e = queue.enqueue(context(), spec);
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(e.id) == "ok"; })) << state(e.id);
  EXPECT_EQ(field(e.id, "result"), "ran:hello");
  EXPECT_EQ(field(e.id, "content_type"), "text/plain");
  EXPECT_FALSE(field(e.id, "run_ms").empty());
  EXPECT_FALSE(field(e.id, "queued_ms").empty());
  const auto seen = runner.find(e.id);
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->idempotency_key, "k-1");
  EXPECT_EQ(seen->delivery, 1u);
  EXPECT_EQ(xlen(), 0);
  EXPECT_EQ(pending(), 0);
  // The writer counts the outcome once the finish script's reply is back,
  // which may be just after the state reads "ok" on the broker.
  EXPECT_TRUE(eventually([&] { return c.stats().outcomes_written == 1u; })) << c.stats().outcomes_written;
  const consumer_stats s = c.stats();
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.started, 1u);
  EXPECT_EQ(s.outcomes_written, 1u);
  EXPECT_EQ(raw({"HGET", queue.key("slots"), "a"}).str.substr(0, 2), "2:") << "its live slots, for admission";
}

TEST_F(Consumer, PrefetchHoldsEntriesBeyondItsSlotsWhileTheFleetCountsOnlyTheSlots) {
  const long long now = broker_ms();
  std::vector<added> jobs_added;
  for (int i = 0; i < 5; ++i) jobs_added.push_back(add_job("block", now + i));
  executor one{executor_options{.workers = 1}};
  consumer_options o = named("a", 1);
  o.prefetch = 2;
  consumer c(queue, reads, one, runner.get(), o);
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1 && c.stats().delivered == 3; }))
      << c.stats().delivered;
  EXPECT_EQ(c.stats().held, 3u) << "one running, two waiting for the worker";
  EXPECT_EQ(pending(), 3);
  EXPECT_EQ(raw({"HGET", queue.key("slots"), "a"}).str.substr(0, 2), "1:") << "admission counts its one slot";
  // Which of the three the worker took first is the executor's choice; the
  // other two are held, not started.
  int running = 0, queued = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string s = state(jobs_added[static_cast<std::size_t>(i)].id);
    running += s == "running" ? 1 : 0;
    queued += s == "queued" ? 1 : 0;
  }
  EXPECT_EQ(running, 1);
  EXPECT_EQ(queued, 2) << "a prefetched job is started only when a worker takes it";
  runner.released = true;
  for (const added& a : jobs_added) ASSERT_TRUE(eventually([&] { return state(a.id) == "ok"; })) << state(a.id);
  c.stop();
}

TEST_F(Consumer, APrefetchedJobNeverBeginsBeforeOneATakeStartedForItsSlot) {
  // A manual executor: no worker begins anything until run_pending().
  executor manual{executor_options{.manual_mode = true}};
  const long long now = broker_ms();
  std::vector<added> jobs_added;
  for (int i = 0; i < 3; ++i) jobs_added.push_back(add_job("echo", now + i));
  consumer_options o = named("a", 1);
  o.prefetch = 2;
  consumer c(queue, reads, manual, runner.get(), o);
  c.start(context());
  // The take starts the oldest for the free slot: running on the broker,
  // waiting for a worker in ours.
  ASSERT_TRUE(eventually([&] { return state(jobs_added[0].id) == "running"; })) << state(jobs_added[0].id);
  EXPECT_EQ(c.stats().held, 1u) << "nothing prefetched beside it: a worker could begin that first";
  EXPECT_EQ(state(jobs_added[1].id), "queued");
  ASSERT_TRUE(eventually([&] {
    manual.run_pending();
    return state(jobs_added[2].id) == "ok";
  }));
  const std::vector<std::string> ran = runner.ids();
  ASSERT_FALSE(ran.empty());
  EXPECT_EQ(ran.front(), jobs_added[0].id) << "the job started for the slot ran first";
  EXPECT_EQ(ran.size(), 3u);
  c.stop();
}

TEST_F(Consumer, AHandlersFailureIsRecordedAsAnError) {
  const added a = add_job("fail", broker_ms());
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "error"; })) << state(a.id);
  EXPECT_EQ(field(a.id, "message"), "it broke");
  EXPECT_EQ(field(a.id, "http_status"), "500");
  EXPECT_EQ(field(a.id, "idempotency_key"), "");
  EXPECT_EQ(runner.find(a.id)->idempotency_key, a.id) << "without an Idempotency-Key, the job id keys side effects";
}

TEST_F(Consumer, AJobPastItsFreshnessOnTheBrokersClockIsNeverRun) {
  const long long now = broker_ms();
  const added stale = add_job("echo", now - 10000, 5s);  // waited 10 s of 5
  const added fresh = add_job("echo", now - 5000, 60s);  // waited 5 s of 60
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(stale.id) == "deadline_exceeded" && state(fresh.id) == "ok"; }));
  EXPECT_EQ(field(stale.id, "stage"), "queue");
  EXPECT_GE(std::stod(field(stale.id, "queued_ms")), 10000.0);
  EXPECT_FALSE(runner.find(stale.id)) << "expired work is never run";
  EXPECT_EQ(field(stale.id, "deliveries"), "0") << "nor started: the reader's take left it unstarted";
  EXPECT_EQ(field(stale.id, "started_ms"), "") << "no start on its timeline";
  EXPECT_EQ(field(fresh.id, "deliveries"), "1");
  EXPECT_EQ(xlen(), 0) << "and it leaves the stream";
  EXPECT_EQ(c.stats().expired_queue, 1u);
}

TEST_F(Consumer, AJobWhoseFreshnessRunsOutWhileEveryWorkerIsBusyIsNeverRun) {
  manual_clock clk;
  executor one{executor_options{.workers = 1, .clock = &clk}};
  const long long now = broker_ms();
  const added blocker = add_job("block", now - 2000);
  const added waiting = add_job("echo", now - 1000, 1300ms);  // 300 ms left when delivered
  consumer c(queue, reads, one, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1 && c.stats().delivered == 2; }));
  clk.advance(300ms);  // on our clock, the waiting job's start-by passes
  runner.released = true;
  ASSERT_TRUE(eventually([&] { return state(waiting.id) == "deadline_exceeded"; })) << state(waiting.id);
  EXPECT_EQ(field(waiting.id, "stage"), "queue");
  EXPECT_FALSE(runner.find(waiting.id));
  EXPECT_TRUE(eventually([&] { return state(blocker.id) == "ok"; }));
  c.stop();
}

TEST_F(Consumer, ADelayedJobMovesToTheStreamWhenDueEvenWhileEveryWorkerIsBusy) {
  const added blocker = add_job("block", broker_ms());
  executor one{executor_options{.workers = 1}};
  consumer_options o = named("a", 1);
  o.prefetch = 0;  // full once the blocker runs
  consumer c(queue, reads, one, runner.get(), o);
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  job_spec spec;
  spec.handler = "echo";
  spec.delay = 300ms;
  const enqueued later = queue.enqueue(context(), spec);
  ASSERT_TRUE(later.scheduled);
  EXPECT_EQ(state(later.id), "scheduled");
  // Its one slot busy, the daemon reads nothing; the due job is promoted all the same.
  ASSERT_TRUE(eventually([&] { return state(later.id) == "queued"; })) << state(later.id);
  EXPECT_EQ(runner.running.load(), 1) << "the blocker still holds the one worker";
  // (counted once promote's reply is back, which may be just after the state reads "queued")
  EXPECT_TRUE(eventually([&] { return c.stats().promoted == 1u; })) << c.stats().promoted;
  runner.released = true;
  EXPECT_TRUE(eventually([&] { return state(later.id) == "ok" && state(blocker.id) == "ok"; }));
  c.stop();
}

TEST_F(Consumer, ADeadDaemonsJobIsReclaimedAndRunAgain) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1);
  raw(job_hash(queue.key("job:" + a.id))
          .state(job_state::running)
          .set(job_field::deliveries, 1)
          .set(job_field::consumer, "ghost"));
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "ok"; })) << state(a.id);
  EXPECT_EQ(runner.find(a.id)->delivery, 2u) << "the second start of the job";
  EXPECT_EQ(c.stats().reclaimed, 1u);
  EXPECT_EQ(pending(), 0);
}

TEST_F(Consumer, AReclaimedJobPastItsFreshnessEndsStageReclaim) {
  const added a = add_job("echo", broker_ms() - 10000, 5s);
  deliver_to("ghost", 1);
  raw(job_hash(queue.key("job:" + a.id)).state(job_state::running).set(job_field::deliveries, 1));
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "deadline_exceeded"; })) << state(a.id);
  EXPECT_EQ(field(a.id, "stage"), "reclaim");
  EXPECT_FALSE(runner.find(a.id));
  EXPECT_EQ(c.stats().expired_reclaim, 1u);
}

TEST_F(Consumer, AJobWhoseWorkersDiedMaxDeliveriesTimesIsDeadLettered) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1);
  raw(job_hash(queue.key("job:" + a.id)).state(job_state::running).set(job_field::deliveries, 3));
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "dead"; })) << state(a.id);
  EXPECT_FALSE(runner.find(a.id)) << "not run a fourth time";
  EXPECT_EQ(xlen(), 0);
  EXPECT_EQ(pending(), 0);
  const redis_reply dead = raw({"XRANGE", queue.key("dead"), "-", "+"});
  ASSERT_EQ(dead.elements.size(), 1u);
  EXPECT_EQ(dead.elements[0].elements[1].elements[1].str, a.id);
  EXPECT_TRUE(eventually([&] { return c.stats().dead_lettered == 1; }));
}

TEST_F(Consumer, HandingBackAJobItNeverStartedKeepsTheDeadWorkersStart) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1);
  raw(job_hash(queue.key("job:" + a.id)).state(job_state::running).set(job_field::deliveries, 1));
  executor paused{executor_options{.workers = 1, .start_paused = true}};
  {
    consumer c(queue, reads, paused, runner.get(), named("a"));
    c.start(context());
    ASSERT_TRUE(eventually([&] { return c.stats().reclaimed == 1; }));
    c.stop();  // it never started the job: its drain must not uncount the ghost's start
    EXPECT_EQ(c.stats().handed_back, 1u);
  }
  EXPECT_EQ(field(a.id, "deliveries"), "1");
  EXPECT_EQ(state(a.id), "running") << "as the dead worker left it";
  redis_connection reads_b{io.io, server.endpoint()};
  consumer d(queue, reads_b, jobs, runner.get(), named("b"));
  d.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "ok"; })) << state(a.id);
  EXPECT_EQ(runner.find(a.id)->delivery, 2u);
}

// A take in flight as a drain begins: the drain waits for its answer, and
// what it started goes back queued with its delivery uncounted, never run
// here and never lost. CLIENT PAUSE WRITE holds every script (the take, the
// first job's finish) unanswered while the first job ends, the reader sends
// its take for the freed slot, and the drain begins; the reader's reads (the
// delayed set's head, TIME) go on. Real time: all of it well inside the
// pause's 2 s and the first second, before a reclaim (a write) falls due.
TEST_F(Consumer, ATakeAnsweredAfterADrainBeganHandsBackWhatItStartedUncounted) {
  const long long now = broker_ms();
  const added first = add_job("block", now);
  const added second = add_job("echo", now + 1);
  const added third = add_job("echo", now + 2);
  executor one{executor_options{.workers = 1}};
  consumer_options o = named("a", 1);
  o.lease = 30s;  // no renewal falls due while writes are paused: no fence
  consumer c(queue, reads, one, runner.get(), o);
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));

  ASSERT_TRUE(raw({"CLIENT", "PAUSE", "2000", "WRITE"}).is_status("OK"));
  const auto paused_at = std::chrono::steady_clock::now();
  runner.released = true;  // the first job ends: the reader takes for its slot, unanswered
  ASSERT_TRUE(eventually([&] { return c.stats().unwritten == 1; }));
  std::this_thread::sleep_for(100ms);
  c.drain(real_clock().now() + 10s);
  EXPECT_GE(std::chrono::steady_clock::now() - paused_at, 1500ms) << "the drain waited for the take's answer";

  const consumer_stats s = c.stats();
  EXPECT_EQ(s.started, 1u) << "only the first job ran here";
  EXPECT_EQ(s.handed_back, 1u) << "the second, started by the take answered after the drain began";
  EXPECT_EQ(state(first.id), "ok");
  EXPECT_EQ(state(second.id), "queued");
  EXPECT_EQ(field(second.id, "deliveries"), "0") << "a drain is not a failed delivery";
  EXPECT_EQ(state(third.id), "queued");

  redis_connection reads_b{io.io, server.endpoint()};
  consumer d(queue, reads_b, jobs, runner.get(), named("b"));
  d.start(context());
  ASSERT_TRUE(eventually([&] { return state(second.id) == "ok" && state(third.id) == "ok"; }))
      << state(second.id) << " " << state(third.id);
  std::map<std::string, int> runs;
  for (const std::string& id : runner.ids()) ++runs[id];
  EXPECT_EQ(runs[second.id], 1);
  EXPECT_EQ(runs[third.id], 1);
  EXPECT_EQ(runner.find(second.id)->delivery, 1u);
}

TEST_F(Consumer, APendingEntryDeletedFromTheStreamRaisesTheLossAlarm) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1);
  raw({"XDEL", queue.key("stream"), a.entry});  // what a MAXLEN trim does to pending entries
  std::mutex mu;
  std::vector<std::string> lines;
  consumer_options o = named("a");
  o.log = [&](const std::string& l) {
    std::lock_guard lock(mu);
    lines.push_back(l);
  };
  consumer c(queue, reads, jobs, runner.get(), o);
  c.start(context());
  // The alarm is counted, then logged (outside the consumer's lock): wait for both.
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return c.stats().lost_entries == 1 && !lines.empty();
  }));
  std::lock_guard lock(mu);
  EXPECT_NE(lines.front().find("loss alarm"), std::string::npos) << lines.front();
  EXPECT_FALSE(runner.find(a.id));
}

TEST_F(Consumer, DeletingFinishedEntriesNeverRaisesTheLossAlarmWhileAConsumerLags) {
  // A daemon that died holding the oldest entries lags behind everything
  // finished after them: the finish script deletes only its own entry, so
  // the lagging ones are all still there when they are reclaimed.
  const long long t0 = broker_ms();
  std::vector<added> all;
  for (int i = 0; i < 3; ++i) all.push_back(add_job("echo", t0 + i));
  deliver_to("ghost", 3);
  for (int i = 3; i < 30; ++i) all.push_back(add_job("echo", t0 + i));
  consumer c(queue, reads, jobs, runner.get(), named("a", 4));
  c.start(context());
  ASSERT_TRUE(eventually([&] {
    for (const added& a : all) {
      if (state(a.id) != "ok") return false;
    }
    return true;
  }));
  EXPECT_EQ(c.stats().lost_entries, 0u);
  EXPECT_EQ(c.stats().reclaimed, 3u);
  EXPECT_EQ(xlen(), 0);
  EXPECT_EQ(pending(), 0);
}

TEST_F(Consumer, EachRecordedOutcomeIsCountedOnceByStageAndADeadLetterAsAnError) {
  const long long now = broker_ms();
  const added late_reclaim = add_job("echo", now - 10000, 5s);  // its worker died; waited 10 s of 5
  const added dead = add_job("echo", now - 9999);               // its workers died 3 times
  deliver_to("ghost", 2);
  raw(job_hash(queue.key("job:" + late_reclaim.id)).state(job_state::running).set(job_field::deliveries, 1));
  raw(job_hash(queue.key("job:" + dead.id)).state(job_state::running).set(job_field::deliveries, 3));
  const added late_queue = add_job("echo", now - 9998, 5s);  // never delivered; waited 10 s of 5
  const added fine = add_job("echo", now - 1);
  hourglass::metrics m;
  consumer_options o = named("a");
  o.metrics = &m;
  consumer c(queue, reads, jobs, runner.get(), o);
  c.start(context());
  ASSERT_TRUE(eventually([&] {
    const metrics_snapshot now = m.snapshot();
    const handler_snapshot* h = now.find("echo");
    return h != nullptr && h->finished_ok + h->finished_error + h->finished_deadline_exceeded == 4;
  }));
  const handler_snapshot h = *m.snapshot().find("echo");
  EXPECT_EQ(h.finished_ok, 1u) << state(fine.id);
  EXPECT_EQ(h.finished_error, 1u) << "dead-lettered: " << state(dead.id);
  EXPECT_EQ(h.expired_queue, 1u) << state(late_queue.id);
  EXPECT_EQ(h.expired_reclaim, 1u) << state(late_reclaim.id);
  EXPECT_EQ(h.finished_deadline_exceeded, 2u);
  EXPECT_EQ(h.admitted, 0u) << "admitted where the 202 was given, not here";
  EXPECT_EQ(h.rejected_queue_full + h.rejected_shutting_down, 0u);
  EXPECT_EQ(m.run_duration.snapshot().count, 0u) << "the executor timed the run, in its own registry";
}

// A take whose reply is lost has started its entries for this consumer
// with no worker to run them. After the failed read the reader reads its
// own pending list again: such an entry runs at once, its start counted
// once, instead of waiting a lease for a reclaim that would count another.
TEST_F(Consumer, AfterAFailedReadItsOwnStartedEntriesRunAtOnceCountedOnce) {
  consumer_options o = named("a");
  o.lease = 30s;  // no reclaim within the test's wait
  consumer c(queue, reads, jobs, runner.get(), o);
  c.start(context());
  const std::string lease_key = queue.key("lease:a");
  ASSERT_TRUE(eventually([&] { return !raw({"GET", lease_key}).str.empty(); }));
  const std::string lease = raw({"GET", lease_key}).str;
  const std::string token = lease.substr(0, lease.find(':'));
  // What a lost take leaves: the entry delivered to "a" and started under
  // its token. In one transaction, so the consumer's own read cannot take it.
  const std::string id = new_job_id();
  raw({"MULTI"});
  raw({"XADD", queue.key("stream"), "*", "id", id, "handler", "echo", "freshness_ms", "-1", "min_budget_ms", "0"});
  raw({"XREADGROUP", "GROUP", std::string(job_queue::group), "a", "COUNT", "1", "STREAMS", queue.key("stream"), ">"});
  const redis_reply done = raw({"EXEC"});
  ASSERT_TRUE(done.is_array() && done.elements.size() == 2u) << done.str;
  const std::string entry = done.elements[0].str;
  raw(job_hash(queue.key("job:" + id))
          .enqueued(id, "echo", "p", entry)
          .state(job_state::running)
          .set(job_field::deliveries, 1)
          .set(job_field::start_token, token + "/" + entry));
  EXPECT_EQ(pending(), 1);
  // The daemon's connections break until one of its reads fails (a kill
  // between two calls is mended by a reconnect before anyone notices).
  auto next_kill = std::chrono::steady_clock::now();
  ASSERT_TRUE(eventually([&] {
    if (std::chrono::steady_clock::now() >= next_kill) {
      raw({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
      next_kill += 200ms;
    }
    return state(id) == "ok";
  })) << state(id)
      << " (a lease is 30 s)";
  EXPECT_EQ(field(id, "deliveries"), "1") << "the lost start and the run are one delivery";
  ASSERT_TRUE(runner.find(id));
  EXPECT_EQ(runner.find(id)->delivery, 1u);
  c.stop();
}

TEST_F(Consumer, WithFreshnessJudgingOffAJobPastItsFreshnessStillRuns) {
  const added stale = add_job("echo", broker_ms() - 10000, 5s);
  consumer_options o = named("a");
  o.judge_freshness = false;  // --policy fifo
  consumer c(queue, reads, jobs, runner.get(), o);
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(stale.id) == "ok"; })) << state(stale.id);
  EXPECT_TRUE(runner.find(stale.id));
  EXPECT_EQ(c.stats().expired_queue, 0u);
}

// One outcome the broker refuses for good (here: its job's key holds a
// string by the time it is written, so the finish script stops at it with
// WRONGTYPE, every time) was sent again and again, and every later outcome
// of the daemon waited behind it. The writer now finds the one refused,
// records it as error/outcome_refused (dropped when even that is refused,
// as here), and writes the rest.
TEST_F(Consumer, AnOutcomeTheBrokerRefusesHoldsBackNoOther) {
  job_spec spec;
  spec.handler = "block";
  const enqueued poisoned = queue.enqueue(context(), spec);
  const enqueued fine = queue.enqueue(context(), spec);
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 2; }));
  raw({"DEL", queue.key("job:" + poisoned.id)});
  raw({"SET", queue.key("job:" + poisoned.id), "not a hash"});
  runner.released = true;
  ASSERT_TRUE(eventually([&] { return c.stats().outcomes_dropped == 1u; }))
      << c.stats().outcomes_refused << " refused, " << c.stats().broker_errors << " broker errors";
  EXPECT_EQ(c.stats().outcomes_refused, 2u) << "its outcome, then the error that says so";
  EXPECT_TRUE(eventually([&] { return state(fine.id) == "ok"; })) << state(fine.id);
  spec.handler = "echo";
  const enqueued later = queue.enqueue(context(), spec);
  EXPECT_TRUE(eventually([&] { return state(later.id) == "ok"; })) << "the writer goes on";
  EXPECT_TRUE(eventually([&] { return c.stats().outcomes_written == 2u; })) << c.stats().outcomes_written;
}

}  // namespace
}  // namespace hourglass::fleet::testing
