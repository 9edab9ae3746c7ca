// The fleet's consumer against a real redis-server and a real executor:
// delivery into the executor, freshness on the broker's clock at delivery, at
// dequeue and at start, reclaim of a dead daemon's jobs, dead-lettering,
// a restarted daemon's own pending entries first, cancel across the fleet,
// drain hand-back, and self-fencing when the broker stops answering.
//
// Jobs are written with explicit stream ids (the broker's time of enqueue),
// so their ages are exact without waiting; waits are for events, polled.
#include "hourglass/fleet/consumer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <vector>

#include "common/eventually.hpp"
#include "redis_server.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;
using test_common::eventually;

// Records what ran; "block" jobs wait for release() or their context.
struct recording_runner {
  std::mutex mu;
  std::vector<delivered_job> seen;
  std::atomic<bool> released{false};
  std::atomic<int> running{0};

  job_runner get() {
    return {.run = [this](const context& ctx, const delivered_job& j) {
      {
        std::lock_guard lock(mu);
        seen.push_back(j);
      }
      if (j.handler == "block" || j.handler == "stubborn") {
        ++running;
        while (!released.load() && (j.handler == "stubborn" || !ctx.done())) std::this_thread::sleep_for(1ms);
        --running;
        ctx.check();
      }
      if (j.handler == "fail") throw std::runtime_error("it broke");
      return job_output{"ran:" + j.payload, "text/plain"};
    }};
  }
  std::vector<std::string> ids() {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const auto& j : seen) out.push_back(j.id);
    return out;
  }
  std::optional<delivered_job> find(const std::string& id) {
    std::lock_guard lock(mu);
    for (const auto& j : seen) {
      if (j.id == id) return j;
    }
    return std::nullopt;
  }
};

struct Consumer : ::testing::Test {
  Consumer() { queue.ensure_group(context()); }

  redis_reply raw(std::vector<std::string> args) { return inspect.call(context(), std::move(args)); }
  long long broker_ms() {
    const redis_reply t = raw({"TIME"});
    return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
  }
  // A job as enqueue writes it, added at broker time `added_ms` (its entry
  // id), so its age is exact. Entry ids must grow: pass growing times.
  struct added {
    std::string id;
    std::string entry;
  };
  added add_job(const std::string& handler, long long added_ms, std::optional<duration> freshness = std::nullopt,
                const std::string& payload = "p") {
    added a{new_job_id(), std::to_string(added_ms) + "-0"};
    const std::string f =
        freshness ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(*freshness).count()) : "-1";
    const redis_reply r = raw({"XADD", queue.key("stream"), a.entry, "id", a.id, "handler", handler, "freshness_ms", f,
                               "min_budget_ms", "0"});
    EXPECT_EQ(r.str, a.entry) << r.str;
    raw({"HSET",
         queue.key("job:" + a.id),
         "id",
         a.id,
         "handler",
         handler,
         "payload",
         payload,
         "content_type",
         "text/plain",
         "freshness_ms",
         f,
         "min_budget_ms",
         "0",
         "entry",
         a.entry,
         "state",
         "queued",
         "deliveries",
         "0",
         "idempotency_key",
         ""});
    return a;
  }
  // Delivers the next entries to `name` (a daemon that then dies holding them), idle for long.
  void deliver_to(const std::string& name, int count, bool idle_long = true) {
    const redis_reply r = raw({"XREADGROUP", "GROUP", std::string(job_queue::group), name, "COUNT",
                               std::to_string(count), "STREAMS", queue.key("stream"), ">"});
    ASSERT_TRUE(r.is_array()) << r.str;
    if (!idle_long) return;
    for (const auto& e : r.elements[0].elements[1].elements) {
      raw({"XCLAIM", queue.key("stream"), std::string(job_queue::group), name, "0", e.elements[0].str, "IDLE", "100000",
           "JUSTID"});
    }
  }
  std::string state(const std::string& id) {
    const auto j = queue.find(context(), id);
    return j ? std::string(j->state()) : "";
  }
  std::string field(const std::string& id, const std::string& f) {
    const auto j = queue.find(context(), id);
    return j ? std::string(j->field(f)) : "";
  }
  long long xlen() { return raw({"XLEN", queue.key("stream")}).integer; }
  long long pending() {
    return raw({"XPENDING", queue.key("stream"), std::string(job_queue::group)}).elements[0].integer;
  }

  consumer_options named(std::string name, std::size_t slots = 2) {
    consumer_options o;
    o.name = std::move(name);
    o.slots = slots;
    o.lease = 600ms;  // renewals every 200 ms
    o.read_block = 50ms;
    return o;
  }

  redis_server server;
  io_thread io;
  redis_connection commands{io.io, server.endpoint()};
  redis_connection reads{io.io, server.endpoint()};
  redis_connection inspect{io.io, server.endpoint()};
  job_queue queue{commands, {}};
  recording_runner runner;
  executor jobs{executor_options{.workers = 2}};
};

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
  const consumer_stats s = c.stats();
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.started, 1u);
  EXPECT_EQ(s.outcomes_written, 1u);
  EXPECT_EQ(raw({"HGET", queue.key("slots"), "a"}).str.substr(0, 2), "2:") << "its live slots, for admission";
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

TEST_F(Consumer, ADeadDaemonsJobIsReclaimedAndRunAgain) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1);
  raw({"HSET", queue.key("job:" + a.id), "state", "running", "deliveries", "1", "consumer", "ghost"});
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
  raw({"HSET", queue.key("job:" + a.id), "state", "running", "deliveries", "1"});
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
  raw({"HSET", queue.key("job:" + a.id), "state", "running", "deliveries", "3"});
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

TEST_F(Consumer, ARestartedDaemonTakesItsNameOverAndRunsItsOwnPendingJobsFirst) {
  const long long now = broker_ms();
  const added mine = add_job("echo", now - 3);
  deliver_to("a", 1, false);  // its earlier life took it, started it and died
  raw({"HSET", queue.key("job:" + mine.id), "state", "running", "deliveries", "1"});
  const added later = add_job("echo", now - 2);
  raw({"SET", queue.key("lease:a"), "old-life:7", "PX", "60000"});  // not renewed any more
  consumer c(queue, reads, jobs, runner.get(), named("a", 1));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return state(mine.id) == "ok" && state(later.id) == "ok"; }));
  EXPECT_EQ(runner.ids(), (std::vector<std::string>{mine.id, later.id}));
  EXPECT_NE(raw({"GET", queue.key("lease:a")}).str.rfind("old-life:", 0), 0u) << "the lease is the new process's";
}

TEST_F(Consumer, ANameWhoseLeaseIsStillRenewedIsRefused) {
  std::atomic<bool> done{false};
  std::thread holder([&] {
    redis_connection own{io.io, server.endpoint()};
    for (int n = 0; !done; ++n) {
      own.call(context(), {"SET", queue.key("lease:a"), "other:" + std::to_string(n), "PX", "600"});
      std::this_thread::sleep_for(20ms);
    }
  });
  // The holder's first renewal is in before we start (its thread may not have run yet).
  ASSERT_TRUE(eventually([&] { return !raw({"GET", queue.key("lease:a")}).is_nil(); }));
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  EXPECT_THROW(c.start(context()), name_taken);
  done = true;
  holder.join();
}

TEST_F(Consumer, ADeleteOnAnotherDaemonStopsTheRunningJobWithinARenewal) {
  const added a = add_job("block", broker_ms());
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  // Any daemon of the fleet: the same keys through another connection.
  redis_connection elsewhere{io.io, server.endpoint()};
  job_queue other(elsewhere, {});
  EXPECT_EQ(other.cancel(context(), a.id)->field("cancel_requested"), "1");
  ASSERT_TRUE(eventually([&] { return state(a.id) == "cancelled"; }, 3s)) << state(a.id);
  EXPECT_EQ(field(a.id, "cause"), "requested");
  EXPECT_EQ(runner.running.load(), 0);
  EXPECT_EQ(xlen(), 0);
}

TEST_F(Consumer, DrainHandsRunningJobsBackForImmediateReclaimWithoutCountingADelivery) {
  const long long now = broker_ms();
  const added a = add_job("block", now - 2);
  const added b = add_job("block", now - 1);
  {
    consumer c(queue, reads, jobs, runner.get(), named("a"));
    c.start(context());
    ASSERT_TRUE(eventually([&] { return runner.running.load() == 2; }));
    c.drain(jobs.get_clock().now() + 20ms);
    EXPECT_EQ(c.stats().handed_back, 2u);
  }
  EXPECT_TRUE(eventually([&] { return runner.running.load() == 0; }));
  EXPECT_EQ(state(a.id), "queued");
  EXPECT_EQ(field(a.id, "deliveries"), "0") << "a drain is not a failed delivery";
  EXPECT_EQ(raw({"HGET", queue.key("slots"), "a"}).kind, redis_reply::type::nil) << "its slots leave the fleet";
  EXPECT_EQ(raw({"GET", queue.key("lease:a")}).kind, redis_reply::type::nil);

  runner.released = true;
  redis_connection reads_b{io.io, server.endpoint()};
  consumer d(queue, reads_b, jobs, runner.get(), named("b"));
  const auto t0 = std::chrono::steady_clock::now();
  d.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "ok" && state(b.id) == "ok"; }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s) << "taken at once, not after a lease";
  EXPECT_EQ(d.stats().reclaimed, 2u);
}

TEST_F(Consumer, HandingBackAJobItNeverStartedKeepsTheDeadWorkersStart) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1);
  raw({"HSET", queue.key("job:" + a.id), "state", "running", "deliveries", "1"});
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

TEST_F(Consumer, ARunningJobsEntryDeletedFromTheStreamRaisesTheLossAlarmAtTheNextRenewal) {
  const added a = add_job("block", broker_ms());
  consumer c(queue, reads, jobs, runner.get(), named("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  raw({"XDEL", queue.key("stream"), a.entry});  // what a MAXLEN trim does to pending entries
  EXPECT_TRUE(eventually([&] { return c.stats().lost_entries == 1; })) << "renewals every 200 ms";
  runner.released = true;
  EXPECT_TRUE(eventually([&] { return state(a.id) == "ok"; })) << "its record survived: " << state(a.id);
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
  raw({"HSET", queue.key("job:" + late_reclaim.id), "state", "running", "deliveries", "1"});
  raw({"HSET", queue.key("job:" + dead.id), "state", "running", "deliveries", "3"});
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

TEST_F(Consumer, ADaemonThatCannotRenewItsLeaseStopsItsOwnJobs) {
  const added a = add_job("block", broker_ms());
  consumer_options o = named("a");
  consumer c(queue, reads, jobs, runner.get(), o);
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  server.pause();  // accepts, never answers: renewals time out
  EXPECT_TRUE(eventually([&] { return runner.running.load() == 0; }, 10s)) << "fenced after most of a lease";
  // Fenced 480 ms (lease - margin) after the last renewal that got through,
  // which was at most one renewal period (200 ms) before the pause.
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  EXPECT_EQ(c.stats().fenced_jobs, 1u);
  server.resume();
  EXPECT_EQ(state(a.id), "running") << "no outcome from a daemon that may not own the job";
}

}  // namespace
}  // namespace hourglass::fleet::testing
