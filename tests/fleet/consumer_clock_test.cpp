// The consumer's own time on a manual_clock, against a real redis-server:
// renewals every lease/3 (DELETE's marks and the loss alarm come with
// them), self-fencing after lease - lease/5 without a renewal, reclaims
// every min(lease/3, 1 s), drain's deadline, and taking a name over after a
// renewal period and a quarter. Each happens exactly when the test advances
// the executor's clock to it, and not a nanosecond before.
//
// What stays on real time is the broker's: its TIME (jobs' ages), the lease
// key's PX and the entries' idle times (XAUTOCLAIM's min-idle). A lease of
// 30 s keeps those from running out while a test runs; the daemon's side of
// it (renewals every 10 s, fencing at 24 s, reclaims every 1 s) moves only
// with advance(). The connections' I/O timeout runs on the caller's clock,
// here the manual one: it is set beyond any advance.
#include "hourglass/fleet/consumer.hpp"

#include <gtest/gtest.h>

#include <future>
#include <string>

#include "consumer_fixture.hpp"
#include "job_hash.hpp"

namespace hourglass::fleet::testing {
namespace {

struct ConsumerOnManualClock : Consumer {
  static redis_options patient() {
    redis_options o;
    o.io_timeout = 24h;  // on the manual clock: no advance here reaches it
    return o;
  }
  consumer_options timed(std::string name, std::size_t slots = 2) {
    consumer_options o = named(std::move(name), slots);
    o.lease = 30s;  // renewals every 10 s, fencing at 24 s, reclaims every 1 s, on clk
    return o;
  }
  // The lease key's renewal count: how many renewals the broker applied.
  std::string renewals_of(const std::string& name) {
    const std::string v = raw({"GET", queue.key("lease:" + name)}).str;
    return v.substr(v.rfind(':') + 1);
  }
  // How often the broker ran `command` (INFO commandstats).
  long long calls_of(const std::string& command) {
    const std::string info = raw({"INFO", "commandstats"}).str;
    const std::string key = "cmdstat_" + command + ":calls=";
    const auto at = info.find(key);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + key.size()));
  }

  manual_clock clk;
  redis_connection clocked_commands{io.io, server.endpoint(), patient()};
  redis_connection clocked_reads{io.io, server.endpoint(), patient()};
  job_queue clocked_queue{clocked_commands, {}};
  executor on_clock{executor_options{.workers = 2, .clock = &clk}};
};

TEST_F(ConsumerOnManualClock, ADeleteOnAnotherDaemonStopsTheRunningJobAtTheNextRenewal) {
  const added a = add_job("block", broker_ms());
  const time_point t0 = clk.now();
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
  c.start(context());  // the first renewal, sent at t0
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  ASSERT_TRUE(clk.wait_for_timer_at(t0 + 10s)) << "the renewer sleeps until the next renewal";
  redis_connection elsewhere{io.io, server.endpoint()};  // any daemon of the fleet
  job_queue other(elsewhere, {});
  EXPECT_TRUE(other.cancel(context(), a.id)->cancel_requested);
  clk.advance(10s - 1ns);
  EXPECT_EQ(renewals_of("a"), "1") << "no renewal before lease/3";
  EXPECT_EQ(runner.running.load(), 1);
  clk.advance(1ns);
  ASSERT_TRUE(eventually([&] { return state(a.id) == "cancelled"; })) << state(a.id);
  EXPECT_EQ(renewals_of("a"), "2");
  EXPECT_EQ(field(a.id, "cause"), "requested");
  EXPECT_EQ(runner.running.load(), 0);
  EXPECT_EQ(xlen(), 0);
}

TEST_F(ConsumerOnManualClock, ARunningJobsEntryDeletedFromTheStreamRaisesTheLossAlarmAtTheNextRenewal) {
  const added a = add_job("block", broker_ms());
  const time_point t0 = clk.now();
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  ASSERT_TRUE(clk.wait_for_timer_at(t0 + 10s));
  raw({"XDEL", queue.key("stream"), a.entry});  // what a MAXLEN trim does to pending entries
  clk.advance(10s - 1ns);
  EXPECT_EQ(c.stats().lost_entries, 0u) << "not renewed yet";
  clk.advance(1ns);
  EXPECT_TRUE(eventually([&] { return c.stats().lost_entries == 1; }));
  runner.released = true;
  EXPECT_TRUE(eventually([&] { return state(a.id) == "ok"; })) << "its record survived: " << state(a.id);
}

TEST_F(ConsumerOnManualClock, ADaemonThatCannotRenewItsLeaseStopsItsOwnJobsAtTheFencingPoint) {
  const added a = add_job("block", broker_ms());
  const time_point t0 = clk.now();
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
  c.start(context());  // the last renewal that gets through, sent at t0
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  ASSERT_TRUE(clk.wait_for_timer_at(t0 + 10s));
  server.pause();  // accepts, never answers
  clk.advance(10s);
  // The second renewal is sent; it waits for an answer until the fencing
  // point, lease - lease/5 after the last good one was sent.
  ASSERT_TRUE(clk.wait_for_timer_at(t0 + 24s));
  clk.advance(14s - 1ns);
  EXPECT_EQ(runner.running.load(), 1) << "a nanosecond before the fencing point";
  EXPECT_EQ(c.stats().fenced_jobs, 0u);
  clk.advance(1ns);
  EXPECT_TRUE(eventually([&] { return runner.running.load() == 0; })) << "fenced at t0 + 24 s";
  EXPECT_EQ(c.stats().fenced_jobs, 1u);
  server.resume();
  EXPECT_EQ(state(a.id), "running") << "no outcome from a daemon that may not own the job";
}

TEST_F(ConsumerOnManualClock, ADeadDaemonsEntryIsReclaimedAtTheNextReclaimOnOurClock) {
  const added a = add_job("echo", broker_ms());
  deliver_to("ghost", 1, false);  // its holder is alive for now: idle 0
  raw(job_hash(queue.key("job:" + a.id))
          .state(job_state::running)
          .set(job_field::deliveries, 1)
          .set(job_field::consumer, "ghost"));
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return calls_of("xautoclaim") == 1; })) << "the reclaim at start: nothing idle";
  // The ghost dies: on the broker's clock its entry is idle past the lease.
  raw({"XCLAIM", queue.key("stream"), std::string(job_queue::group), "ghost", "0", a.entry, "IDLE", "100000",
       "JUSTID"});
  clk.advance(1s - 1ns);
  const long long reads = calls_of("xreadgroup");
  ASSERT_TRUE(eventually([&] { return calls_of("xreadgroup") >= reads + 2; })) << "the reader went round";
  EXPECT_EQ(calls_of("xautoclaim"), 1) << "no reclaim before min(lease/3, 1 s)";
  EXPECT_EQ(c.stats().reclaimed, 0u);
  clk.advance(1ns);
  ASSERT_TRUE(eventually([&] { return state(a.id) == "ok"; })) << state(a.id);
  EXPECT_EQ(calls_of("xautoclaim"), 2);
  EXPECT_EQ(c.stats().reclaimed, 1u);
  EXPECT_EQ(runner.find(a.id)->delivery, 2u);
}

TEST_F(ConsumerOnManualClock, DrainHandsRunningJobsBackAtItsDeadlineWithoutCountingADelivery) {
  const long long now = broker_ms();
  const added a = add_job("block", now - 2);
  const added b = add_job("block", now - 1);
  {
    consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
    c.start(context());
    ASSERT_TRUE(eventually([&] { return runner.running.load() == 2; }));
    const time_point deadline = clk.now() + 5s;
    auto drained = std::async(std::launch::async, [&] { c.drain(deadline); });
    ASSERT_TRUE(clk.wait_for_timer_at(deadline)) << "drain waits for its running jobs until its deadline";
    clk.advance(5s - 1ns);
    EXPECT_EQ(drained.wait_for(0s), std::future_status::timeout);
    EXPECT_EQ(runner.running.load(), 2);
    clk.advance(1ns);
    drained.get();
    EXPECT_EQ(c.stats().handed_back, 2u);
  }
  EXPECT_TRUE(eventually([&] { return runner.running.load() == 0; })) << "stopped at the deadline";
  EXPECT_EQ(state(a.id), "queued");
  EXPECT_EQ(field(a.id, "deliveries"), "0") << "a drain is not a failed delivery";
  EXPECT_EQ(raw({"HGET", queue.key("slots"), "a"}).kind, redis_reply::type::nil) << "its slots leave the fleet";
  EXPECT_EQ(raw({"GET", queue.key("lease:a")}).kind, redis_reply::type::nil);

  // Another daemon takes them at its start, without a lease's wait on
  // either clock: the broker's idle time is past any lease, ours never moved.
  runner.released = true;
  const time_point before = clk.now();
  redis_connection reads_b{io.io, server.endpoint(), patient()};
  consumer d(clocked_queue, reads_b, on_clock, runner.get(), timed("b"));
  d.start(context());
  ASSERT_TRUE(eventually([&] { return state(a.id) == "ok" && state(b.id) == "ok"; }));
  EXPECT_EQ(d.stats().reclaimed, 2u);
  EXPECT_EQ(clk.now(), before);
}

TEST_F(ConsumerOnManualClock, DrainReturnsWhenItsLastJobEndsNotAtItsDeadline) {
  const added a = add_job("block", broker_ms());
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
  c.start(context());
  ASSERT_TRUE(eventually([&] { return runner.running.load() == 1; }));
  const time_point deadline = clk.now() + 1h;
  auto drained = std::async(std::launch::async, [&] { c.drain(deadline); });
  ASSERT_TRUE(clk.wait_for_timer_at(deadline));
  runner.released = true;
  drained.get();  // woken by the job's end: the clock never moved
  EXPECT_EQ(state(a.id), "ok");
  EXPECT_EQ(c.stats().handed_back, 0u);
  EXPECT_EQ(c.stats().outcomes_written, 1u);
}

TEST_F(ConsumerOnManualClock, ANameWhoseLeaseIsRenewedWithinARenewalPeriodIsRefused) {
  raw({"SET", queue.key("lease:a"), "other:0", "PX", "60000"});
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a"));
  const time_point t0 = clk.now();
  auto started = std::async(std::launch::async, [&] { c.start(context()); });
  // It read the lease and waits a renewal period and a quarter for a renewal.
  ASSERT_TRUE(clk.wait_for_timer_at(t0 + 12500ms));
  raw({"SET", queue.key("lease:a"), "other:1", "PX", "60000"});  // the holder renews
  clk.advance(12500ms - 1ns);
  EXPECT_EQ(started.wait_for(0s), std::future_status::timeout);
  clk.advance(1ns);
  EXPECT_THROW(started.get(), name_taken);
}

TEST_F(ConsumerOnManualClock, ARestartedDaemonTakesItsNameOverAndRunsItsOwnPendingJobsFirst) {
  const long long now = broker_ms();
  const added mine = add_job("echo", now - 3);
  deliver_to("a", 1, false);  // its earlier life took it, started it and died
  raw(job_hash(queue.key("job:" + mine.id)).state(job_state::running).set(job_field::deliveries, 1));
  const added later = add_job("echo", now - 2);
  raw({"SET", queue.key("lease:a"), "old-life:7", "PX", "60000"});  // not renewed any more
  consumer c(clocked_queue, clocked_reads, on_clock, runner.get(), timed("a", 1));
  const time_point t0 = clk.now();
  auto started = std::async(std::launch::async, [&] { c.start(context()); });
  ASSERT_TRUE(clk.wait_for_timer_at(t0 + 12500ms));
  clk.advance(12500ms);  // no renewal within a renewal period and a quarter: the holder is dead
  started.get();
  ASSERT_TRUE(eventually([&] { return state(mine.id) == "ok" && state(later.id) == "ok"; }));
  EXPECT_EQ(runner.ids(), (std::vector<std::string>{mine.id, later.id}));
  EXPECT_NE(raw({"GET", queue.key("lease:a")}).str.rfind("old-life:", 0), 0u) << "the lease is the new process's";
}

}  // namespace
}  // namespace hourglass::fleet::testing
