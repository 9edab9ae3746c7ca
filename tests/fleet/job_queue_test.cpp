// The producer side of the fleet's queue against a real redis-server: the
// layout it writes, idempotency, admission by the fleet's predicted wait,
// first-outcome-wins finish, cancel, listing by state, the asynchronous forms
// (answered on the connection's strand, never blocking), and a broker that
// forgot its scripts, lost its stream or is down.
#include "hourglass/fleet/job_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <set>

#include "hourglass/fleet/freshness.hpp"
#include "job_hash.hpp"
#include "redis_server.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;

struct JobQueue : ::testing::Test {
  JobQueue() { queue.ensure_group(context()); }

  redis_reply raw(std::vector<std::string> args) { return inspect.call(context(), std::move(args)); }
  long long xlen() { return raw({"XLEN", queue.key("stream")}).integer; }
  // Script calls the broker has run so far (INFO commandstats).
  long long evalsha_calls() {
    const std::string info = raw({"INFO", "commandstats"}).str;
    const auto at = info.find("cmdstat_evalsha:calls=");
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + 22));
  }
  // A live daemon with `slots` worker slots (its lease far in the broker's future).
  void live_consumer(const std::string& name, int slots, bool expired = false) {
    const redis_reply t = raw({"TIME"});
    const long long now_ms = std::stoll(t.elements[0].str) * 1000;
    raw({"HSET", queue.key("slots"), name,
         std::to_string(slots) + ":" + std::to_string(now_ms + (expired ? -1000 : 600000))});
  }

  redis_server server;
  io_thread io;
  redis_connection redis{io.io, server.endpoint()};
  redis_connection inspect{io.io, server.endpoint()};
  manual_clock clk;  // an enqueue's round trips take no time: freshness is stored exactly
  job_queue queue{redis, {.clock = &clk}};
};

job_spec echo(std::string payload = "x") {
  job_spec j;
  j.handler = "echo";
  j.payload = std::move(payload);
  return j;
}

TEST_F(JobQueue, EnqueueWritesAStreamEntryAndAJobRecordInOneHashSlot) {
  const enqueued e = queue.enqueue(context(), echo("hello"));
  ASSERT_EQ(e.verdict, enqueued::kind::accepted);
  EXPECT_EQ(e.id.size(), 32u);
  EXPECT_EQ(xlen(), 1);
  const auto job = queue.find(context(), e.id);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, "queued");
  EXPECT_EQ(job->handler, "echo");
  EXPECT_EQ(job->payload, "hello");
  EXPECT_EQ(job->freshness_ms, -1.0);
  EXPECT_TRUE(parse_stream_id(job->entry)) << job->entry;
  EXPECT_EQ(queue.key("stream"), "hg:{default}:stream");
  // Redis Cluster hashes only what is inside the first {...}: one queue, one slot.
  EXPECT_EQ(queue.key("job:" + e.id), "hg:{default}:job:" + e.id);
  EXPECT_THROW(job_queue(redis, {.name = "a}b"}), std::invalid_argument);
}

TEST_F(JobQueue, AnIdempotencyKeyAnswersTheFirstJobAndEnqueuesNothing) {
  job_spec j = echo();
  j.idempotency_key = "order-17";
  const enqueued first = queue.enqueue(context(), j);
  const enqueued again = queue.enqueue(context(), j);
  ASSERT_EQ(first.verdict, enqueued::kind::accepted);
  EXPECT_EQ(again.verdict, enqueued::kind::duplicate);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(xlen(), 1);
  EXPECT_EQ(queue.find(context(), first.id)->idempotency_key, "order-17");
  const long long ttl = raw({"PTTL", queue.key("idem:order-17")}).integer;
  EXPECT_GT(ttl, 23 * 3600 * 1000LL) << "kept for --idempotency-ttl (24 h)";
}

TEST_F(JobQueue, AdmissionRefusesWhatTheFleetsBacklogCannotStartInTime) {
  live_consumer("a", 2);
  live_consumer("gone", 50, true);  // an expired lease: its slots do not count
  raw({"HSET", queue.key("stats"), "mean_run_us", "100000"});
  for (int i = 0; i < 10; ++i) ASSERT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted);
  // (backlog 10 + 1/2 for the first busy slot to free up) x 100 ms / 2 live slots = 525 ms
  job_spec tight = echo();
  tight.freshness = 400ms;
  const enqueued refused = queue.enqueue(context(), tight);
  EXPECT_EQ(refused.verdict, enqueued::kind::refused);
  EXPECT_EQ(refused.predicted_wait, 525ms);
  EXPECT_EQ(xlen(), 10) << "a refused job never enters the stream";
  job_spec enough = echo();
  enough.freshness = 625ms;
  enough.min_budget = 100ms;
  EXPECT_EQ(queue.enqueue(context(), enough).verdict, enqueued::kind::accepted) << "525 + 100 <= 625";
  enough.min_budget = 101ms;
  EXPECT_EQ(queue.enqueue(context(), enough).verdict, enqueued::kind::refused);
}

TEST_F(JobQueue, WithABacklogAndNoLiveWorkerAFreshJobIsRefused) {
  ASSERT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted) << "empty backlog: nothing to wait for";
  job_spec fresh = echo();
  fresh.freshness = 1h;
  EXPECT_EQ(queue.enqueue(context(), fresh).verdict, enqueued::kind::refused);
  EXPECT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted) << "no freshness: always admitted";
}

TEST_F(JobQueue, TheFirstOutcomeWinsAndItsEntryLeavesTheStream) {
  const enqueued e = queue.enqueue(context(), echo());
  EXPECT_EQ(queue.finish(context(), e.id, 10ms, {{"state", "ok"}, {"result", "done"}}), finish_result::first);
  EXPECT_EQ(xlen(), 0) << "finished entries are deleted: the stream holds live work only";
  auto job = queue.find(context(), e.id);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, "ok");
  EXPECT_EQ(job->result, "done");
  EXPECT_EQ(job->payload, "") << "the payload is dropped once finished";
  EXPECT_GT(raw({"PTTL", queue.key("job:" + e.id)}).integer, 0) << "kept for --result-ttl";
  EXPECT_EQ(queue.finish(context(), e.id, 10ms, {{"state", "error"}}), finish_result::duplicate);
  EXPECT_EQ(queue.find(context(), e.id)->state, "ok") << "a second completion is counted, not stored";
  EXPECT_EQ(raw({"HGET", queue.key("stats"), "duplicate_outcomes"}).str, "1");
  EXPECT_EQ(raw({"HGET", queue.key("stats"), "mean_run_us"}).str, "10000");
  EXPECT_EQ(queue.finish(context(), new_job_id(), std::nullopt, {{"state", "ok"}}), finish_result::unknown);
  EXPECT_THROW(queue.finish(context(), e.id, std::nullopt, {{"state", "running"}}), std::invalid_argument);
  EXPECT_THROW(queue.finish(context(), e.id, std::nullopt, {{"result", "x"}}), std::invalid_argument);
}

TEST_F(JobQueue, CancelFinishesAQueuedJobAtOnceAndMarksARunningOne) {
  const enqueued queued = queue.enqueue(context(), echo());
  bool cancelled_here = false;
  const auto c = queue.cancel(context(), queued.id, &cancelled_here);
  ASSERT_TRUE(c);
  EXPECT_TRUE(cancelled_here) << "this call recorded its outcome";
  queue.cancel(context(), queued.id, &cancelled_here);
  EXPECT_FALSE(cancelled_here) << "a second cancel finds it finished";
  EXPECT_EQ(c->state, "cancelled");
  EXPECT_EQ(c->cause, "requested");
  EXPECT_EQ(xlen(), 0);
  EXPECT_EQ(queue.finish(context(), queued.id, 1ms, {{"state", "ok"}}), finish_result::duplicate)
      << "a worker that took it meanwhile does not overwrite the cancel";

  const enqueued running = queue.enqueue(context(), echo());
  raw(job_hash(queue.key("job:" + running.id)).state(job_state::running));
  const auto m = queue.cancel(context(), running.id, &cancelled_here);
  ASSERT_TRUE(m);
  EXPECT_FALSE(cancelled_here) << "its worker records the outcome when it stops";
  EXPECT_EQ(m->state, "running");
  EXPECT_TRUE(m->cancel_requested);
  EXPECT_EQ(xlen(), 1) << "its worker acknowledges it when it stops";
}

// A child names its parent and joins its children set; the parent's GET
// lists them. Cancelling the parent cancels its queued child at once and
// marks its running one, each with cause parent, and reaches a grandchild.
TEST_F(JobQueue, AChildNamesItsParentAndTheParentsCancelReachesEveryDescendant) {
  const enqueued parent = queue.enqueue(context(), echo("parent"));
  raw(job_hash(queue.key("job:" + parent.id)).state(job_state::running));
  job_spec child = echo("queued child");
  child.parent = parent.id;
  const enqueued queued_child = queue.enqueue(context(), child);
  child.payload = "running child";
  const enqueued running_child = queue.enqueue(context(), child);
  raw(job_hash(queue.key("job:" + running_child.id)).state(job_state::running));
  job_spec grandchild = echo("grandchild");
  grandchild.parent = running_child.id;
  const enqueued grand = queue.enqueue(context(), grandchild);
  const job_spec orphan = echo("no parent");
  const enqueued other = queue.enqueue(context(), orphan);

  const auto p = queue.find(context(), parent.id);
  ASSERT_TRUE(p);
  const std::vector<std::string> in_order_sent{queued_child.id, running_child.id};
  EXPECT_EQ(p->children, in_order_sent);
  EXPECT_EQ(queue.find(context(), queued_child.id)->parent, parent.id);
  EXPECT_TRUE(queue.find(context(), other.id)->parent.empty());
  EXPECT_TRUE(queue.find(context(), other.id)->children.empty());

  bool cancelled_here = true;
  const auto c = queue.cancel(context(), parent.id, &cancelled_here);
  ASSERT_TRUE(c);
  EXPECT_FALSE(cancelled_here) << "the parent runs: marked";
  const auto qc = queue.find(context(), queued_child.id);
  EXPECT_EQ(qc->state, "cancelled");
  EXPECT_EQ(qc->cause, "parent");
  const auto rc = queue.find(context(), running_child.id);
  EXPECT_EQ(rc->state, "running") << "its worker stops it";
  EXPECT_TRUE(rc->cancel_requested);
  EXPECT_EQ(raw({"HGET", queue.key("job:" + rc->id), "cancel_cause"}).str, "parent");
  EXPECT_EQ(queue.find(context(), grand.id)->cause, "parent") << "a grandchild too";
  EXPECT_EQ(queue.find(context(), other.id)->state, "queued") << "no other job";

  // The running child's worker records its stop: the cause is its parent's cancel.
  EXPECT_EQ(queue.finish(context(), running_child.id, 1ms, {{"state", "cancelled"}, {"cause", "requested"}}),
            finish_result::first);
  EXPECT_EQ(queue.find(context(), running_child.id)->cause, "parent");
}

// A cancel walks through the jobs it cancels or marks: a finished child's
// own children are not its parent's to stop (as in the memory store).
TEST_F(JobQueue, AParentsCancelDoesNotReachTheChildrenOfAFinishedChild) {
  const enqueued parent = queue.enqueue(context(), echo("parent"));
  raw(job_hash(queue.key("job:" + parent.id)).state(job_state::running));
  job_spec child = echo("child");
  child.parent = parent.id;
  const enqueued finished_child = queue.enqueue(context(), child);
  job_spec grandchild = echo("grandchild");
  grandchild.parent = finished_child.id;
  const enqueued grand = queue.enqueue(context(), grandchild);
  ASSERT_EQ(queue.finish(context(), finished_child.id, 1ms, {{"state", "ok"}}), finish_result::first);

  ASSERT_TRUE(queue.cancel(context(), parent.id));
  EXPECT_TRUE(queue.find(context(), parent.id)->cancel_requested);
  EXPECT_EQ(queue.find(context(), finished_child.id)->state, "ok");
  const auto g = queue.find(context(), grand.id);
  EXPECT_EQ(g->state, "queued") << "its parent finished: not reached";
  EXPECT_FALSE(g->cancel_requested);
}

// A parent's run that ends waiting (first success of two) frees its entry
// and waits in the delayed set at its deadline less its keep; a failed
// child only counts, the child that succeeds puts it back on the stream,
// woke_by children, in the same script as its own outcome.
TEST_F(JobQueue, AWaitingParentIsResumedByTheFinishOfTheChildThatMeetsItsRule) {
  live_consumer("w", 4);  // jobs with a deadline are admitted against the fleet's slots
  job_spec p = echo("parent");
  p.deadline = std::chrono::seconds(30);
  const enqueued parent = queue.enqueue(context(), p);
  const std::string first_entry = queue.find(context(), parent.id)->entry;
  raw(job_hash(queue.key("job:" + parent.id)).state(job_state::running));
  job_spec child = echo("child");
  child.parent = parent.id;
  const enqueued failing = queue.enqueue(context(), child);
  const enqueued winning = queue.enqueue(context(), child);
  ASSERT_EQ(failing.verdict, enqueued::kind::accepted);
  ASSERT_EQ(winning.verdict, enqueued::kind::accepted);

  job_queue::outcome wait;
  wait.job_id = parent.id;
  wait.run_time = 1ms;
  wait.entry = first_entry;
  wait.wait = wait_request{"first_success", 100ms};
  const finish_result waited = queue.finish_batch(context(), {wait}).front();
  const auto waiting = queue.find(context(), parent.id);
  ASSERT_EQ(waited, finish_result::waiting);
  EXPECT_EQ(waiting->state, "waiting");
  EXPECT_EQ(waiting->wait_rule, "first_success");
  EXPECT_EQ(waiting->entry, "");
  const std::int64_t deadline_ms = static_cast<std::int64_t>(*waiting->deadline_us) / 1000;
  const std::int64_t wake_ms = static_cast<std::int64_t>(*waiting->wake_ms);
  EXPECT_GE(wake_ms, deadline_ms - 100) << "its deadline less its keep (rounded up: never early)";
  EXPECT_LE(wake_ms, deadline_ms - 99);
  EXPECT_EQ(std::stod(raw({"ZSCORE", queue.key("delayed"), parent.id}).str), *waiting->wake_ms);
  EXPECT_EQ(xlen(), 2) << "its entry left the stream; its two children wait there";

  EXPECT_EQ(queue.finish(context(), failing.id, 1ms, {{"state", "error"}, {"error", "x"}}), finish_result::first);
  EXPECT_EQ(queue.find(context(), parent.id)->state, "waiting") << "a failure is not a success";
  EXPECT_EQ(raw({"HGET", queue.key("job:" + parent.id), "children_done"}).str, "1");
  EXPECT_EQ(queue.finish(context(), winning.id, 1ms, {{"state", "ok"}, {"result", "r"}}), finish_result::first);
  const auto resumed = queue.find(context(), parent.id);
  EXPECT_EQ(resumed->state, "queued");
  EXPECT_EQ(resumed->woke_by, "children");
  EXPECT_EQ(resumed->wakes, 1);
  EXPECT_EQ(raw({"HGET", queue.key("job:" + resumed->id), "children_ok"}).str, "1");
  EXPECT_NE(resumed->entry, first_entry) << "a new entry on the stream";
  EXPECT_TRUE(raw({"ZSCORE", queue.key("delayed"), parent.id}).is_nil()) << "no wake time left";
  EXPECT_EQ(xlen(), 1) << "the parent's new entry only";
}

TEST_F(JobQueue, AParentsOutcomeKeepsItsChildrenListedForItsOwnTimeAndAChildlessJobWritesNoList) {
  job_queue short_lived{redis, {.result_ttl = 1h, .idempotency_ttl = 24h, .clock = &clk}};
  const enqueued parent = short_lived.enqueue(context(), echo("parent"));
  job_spec child = echo("child");
  child.parent = parent.id;
  ASSERT_EQ(short_lived.enqueue(context(), child).verdict, enqueued::kind::accepted);
  const std::string children = queue.key("children:" + parent.id);
  ASSERT_EQ(raw({"ZCARD", children}).integer, 1);
  EXPECT_GT(raw({"PTTL", children}).integer, 23 * 3600 * 1000LL) << "listed for the idempotency TTL while it lives";

  EXPECT_EQ(short_lived.finish(context(), parent.id, 1ms, {{"state", "ok"}}), finish_result::first);
  const long long list_ttl = raw({"PTTL", children}).integer;
  EXPECT_GT(list_ttl, 3590 * 1000LL) << "its children listed as long as its outcome is kept";
  EXPECT_LE(list_ttl, 3600 * 1000LL);

  const enqueued alone = short_lived.enqueue(context(), echo("alone"));
  EXPECT_EQ(short_lived.finish(context(), alone.id, 1ms, {{"state", "ok"}}), finish_result::first);
  EXPECT_EQ(raw({"EXISTS", queue.key("children:" + alone.id)}).integer, 0) << "nothing written for a job without any";

  // A parent that waited before (its set made permanent) and is cancelled as
  // its next wait begins: its children's list expires with its outcome too.
  const enqueued waiter = short_lived.enqueue(context(), echo("waiter"));
  ASSERT_EQ(short_lived
                .enqueue(context(),
                         [&] {
                           job_spec c = echo("c");
                           c.parent = waiter.id;
                           return c;
                         }())
                .verdict,
            enqueued::kind::accepted);
  const std::string waiter_children = queue.key("children:" + waiter.id);
  raw({"PERSIST", waiter_children});
  raw(job_hash(queue.key("job:" + waiter.id)).state(job_state::running).set(job_field::cancel_requested, 1));
  job_queue::outcome wait;
  wait.job_id = waiter.id;
  wait.run_time = 1ms;
  wait.wait = wait_request{"all", 100ms};
  EXPECT_EQ(short_lived.finish_batch(context(), {wait}).front(), finish_result::cancelled);
  const long long waiter_ttl = raw({"PTTL", waiter_children}).integer;
  EXPECT_GT(waiter_ttl, 3590 * 1000LL) << "no longer permanent";
  EXPECT_LE(waiter_ttl, 3600 * 1000LL);
}

TEST_F(JobQueue, AStartCalledAgainWithItsTokenAfterALostReplyCountsOneDelivery) {
  const enqueued e = queue.enqueue(context(), echo("p"));
  const std::string entry(queue.find(context(), e.id)->entry);
  raw({"XREADGROUP", "GROUP", std::string(job_queue::group), "c1", "COUNT", "1", "STREAMS", queue.key("stream"), ">"});
  using verdict = job_queue::start_answer::verdict;
  const job_queue::start_answer first = queue.start(context(), {entry, e.id}, "c1", 1, "life-1/" + entry);
  ASSERT_EQ(first.v, verdict::run);
  EXPECT_EQ(first.deliveries, 1u);
  EXPECT_EQ(first.payload, "p");
  // Its reply was lost: the same start again runs, and is not a second delivery
  // (with max_deliveries 1 it would otherwise be dead-lettered).
  const job_queue::start_answer again = queue.start(context(), {entry, e.id}, "c1", 1, "life-1/" + entry);
  ASSERT_EQ(again.v, verdict::run);
  EXPECT_EQ(again.deliveries, 1u);
  EXPECT_EQ(again.payload, "p");
  EXPECT_EQ(queue.find(context(), e.id)->deliveries, 1u);
  // Another life of the consumer (its worker died): a delivery of its own.
  EXPECT_EQ(queue.start(context(), {entry, e.id}, "c1", 3, "life-2/" + entry).deliveries, 2u);
  EXPECT_EQ(queue.start(context(), {entry, e.id}, "c1", 2, "life-3/" + entry).v, verdict::dead);
}

// A drain that cuts off a start's reply does not know the start ran: the
// broker's start token decides, so that delivery is uncounted all the same.
TEST_F(JobQueue, AHandBackUncountsTheStartsOfThisLifeOnlyWhetherOrNotTheirRepliesArrived) {
  const enqueued ours = queue.enqueue(context(), echo("ours"));
  const enqueued earlier = queue.enqueue(context(), echo("earlier"));
  const enqueued unstarted = queue.enqueue(context(), echo("unstarted"));
  const std::string e_ours(queue.find(context(), ours.id)->entry);
  const std::string e_earlier(queue.find(context(), earlier.id)->entry);
  const std::string e_unstarted(queue.find(context(), unstarted.id)->entry);
  raw({"XREADGROUP", "GROUP", std::string(job_queue::group), "c1", "COUNT", "3", "STREAMS", queue.key("stream"), ">"});
  ASSERT_EQ(queue.start(context(), {e_ours, ours.id}, "c1", 5, "life-2/" + e_ours).deliveries, 1u);
  ASSERT_EQ(queue.start(context(), {e_earlier, earlier.id}, "c1", 5, "life-1/" + e_earlier).deliveries, 1u);
  const std::size_t n = queue.hand_back(context(), "c1", "life-2",
                                        {{e_ours, ours.id}, {e_earlier, earlier.id}, {e_unstarted, unstarted.id}});
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(queue.find(context(), ours.id)->deliveries, 0u);
  EXPECT_EQ(queue.find(context(), ours.id)->state, "queued");
  EXPECT_EQ(queue.find(context(), earlier.id)->deliveries, 1u) << "a start of a life that died counts";
  EXPECT_EQ(queue.find(context(), earlier.id)->state, "running");
  EXPECT_EQ(queue.find(context(), unstarted.id)->state, "queued");
  // Handed back once: the same hand-back again uncounts nothing more.
  queue.hand_back(context(), "c1", "life-2", {{e_ours, ours.id}});
  EXPECT_EQ(queue.find(context(), ours.id)->deliveries, 0u);
  // The next start of the job is its first delivery.
  EXPECT_EQ(queue.start(context(), {e_ours, ours.id}, "c2-not-owner", 5, "life-9/" + e_ours).v,
            job_queue::start_answer::verdict::not_owner);
  EXPECT_EQ(queue.start(context(), {e_ours, ours.id}, "c1", 5, "life-3/" + e_ours).deliveries, 1u);
}
TEST_F(JobQueue, UnknownAndMalformedIdsAreNotFound) {
  EXPECT_FALSE(queue.find(context(), new_job_id()));
  EXPECT_FALSE(queue.find(context(), "nope"));
  EXPECT_FALSE(queue.find(context(), "../../etc"));
  EXPECT_FALSE(queue.cancel(context(), new_job_id()));
}

TEST_F(JobQueue, ABrokerThatForgotOurScriptsGetsThemAgain) {
  ASSERT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted);
  raw({"SCRIPT", "FLUSH"});
  EXPECT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted);
  EXPECT_EQ(xlen(), 2);
}

// SCRIPT LOAD calls the broker has answered (INFO commandstats).
long long script_loads(redis_connection& r) {
  const std::string info = r.call(context(), {"INFO", "commandstats"}).str;
  const std::string tag = "cmdstat_script|load:calls=";
  const auto at = info.find(tag);
  return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
}

TEST_F(JobQueue, AQueueMadeForOneCallLoadsNoScriptTheProcessAlreadyLoaded) {
  ASSERT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted);
  const long long loads = script_loads(inspect);
  for (int i = 0; i < 5; ++i) {
    job_queue once(redis, {.clock = &clk});
    ASSERT_EQ(once.enqueue(context(), echo()).verdict, enqueued::kind::accepted);
  }
  EXPECT_EQ(script_loads(inspect), loads) << "each script's SHA is the process's, not one queue's";
  EXPECT_EQ(xlen(), 6);
}

TEST_F(JobQueue, ABrokerThatIsDownAcceptsNothing) {
  server.kill9();
  EXPECT_THROW(queue.enqueue(context(), echo()), redis_unavailable);
  server.restart();
}

TEST_F(JobQueue, ABrokerThatLostItsStreamGetsStreamAndGroupAgain) {
  ASSERT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted);
  raw({"FLUSHALL"});
  const enqueued e = queue.enqueue(context(), echo());
  EXPECT_EQ(e.verdict, enqueued::kind::accepted);
  EXPECT_EQ(xlen(), 1);
  const redis_reply groups = raw({"XINFO", "GROUPS", queue.key("stream")});
  ASSERT_TRUE(groups.is_array());
  EXPECT_EQ(groups.elements.size(), 1u) << "the consumers' group is back too";
}

TEST_F(JobQueue, ListingWalksJobsByStateWithACursor) {
  std::set<std::string> queued, done;
  for (int i = 0; i < 30; ++i) {
    const std::string id = queue.enqueue(context(), echo()).id;
    if (i % 3 == 0) {
      ASSERT_EQ(queue.finish(context(), id, std::nullopt, {{"state", "ok"}}), finish_result::first);
      done.insert(id);
    } else {
      queued.insert(id);
    }
  }
  const auto walk = [&](std::string state) {
    std::set<std::string> seen;
    list_query q{.state = std::move(state), .count = 4};
    for (int pages = 0; pages < 1000; ++pages) {
      const job_list page = queue.list(context(), q);
      for (const fleet_job& j : page.jobs) seen.insert(j.id);
      if (page.next_cursor.empty()) break;
      q.cursor = page.next_cursor;
    }
    return seen;
  };
  EXPECT_EQ(walk("queued"), queued);
  EXPECT_EQ(walk("finished"), done);
  EXPECT_EQ(walk("ok"), done);
  EXPECT_EQ(walk("").size(), 30u);
  EXPECT_TRUE(walk("dead").empty());
  const job_list one = queue.list(context(), {.state = "ok", .count = 1000});
  ASSERT_FALSE(one.jobs.empty());
  EXPECT_EQ(one.jobs.front().handler, "echo") << "a listed job carries its fields";
}

TEST_F(JobQueue, TheAsynchronousFormsAnswerOnTheConnectionWithoutBlocking) {
  // Many enqueues in flight at once on one connection, none waited for in turn.
  constexpr int n = 200;
  std::vector<std::promise<async_answer<enqueued>>> answers(n);
  for (int i = 0; i < n; ++i) {
    queue.async_enqueue(context(), echo(std::to_string(i)),
                        [p = &answers[i]](async_answer<enqueued> a) { p->set_value(std::move(a)); });
  }
  std::set<std::string> ids;
  for (auto& a : answers) {
    async_answer<enqueued> got = a.get_future().get();
    ASSERT_FALSE(got.error);
    EXPECT_EQ(got.value.verdict, enqueued::kind::accepted);
    ids.insert(got.value.id);
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(n));
  EXPECT_EQ(xlen(), n);
  EXPECT_LT(evalsha_calls(), n) << "the enqueues that waited for a batch at the broker went together";

  std::promise<async_answer<cancelled_job>> c;
  queue.async_cancel(context(), *ids.begin(), [&](async_answer<cancelled_job> a) { c.set_value(std::move(a)); });
  const async_answer<cancelled_job> cancelled = c.get_future().get();
  ASSERT_FALSE(cancelled.error);
  EXPECT_TRUE(cancelled.value.cancelled_here) << "it was queued: this call recorded its outcome";
  ASSERT_TRUE(cancelled.value.job);
  EXPECT_EQ(cancelled.value.job->state, "cancelled");

  server.kill9();
  std::promise<async_answer<std::optional<fleet_job>>> f;
  queue.async_find(context(), *ids.begin(), [&](auto a) { f.set_value(std::move(a)); });
  const auto down = f.get_future().get();
  ASSERT_TRUE(down.error) << "a broker that is down is an error, not an unknown job";
  EXPECT_THROW(std::rethrow_exception(down.error), redis_unavailable);
  server.restart();
}

TEST_F(JobQueue, ABulkEnqueueAnswersEachJobOnItsOwnInOneScriptCall) {
  live_consumer("a", 1);
  raw({"HSET", queue.key("stats"), "mean_run_us", "100000"});
  job_spec keyed = echo("k");
  keyed.idempotency_key = "order-9";
  const enqueued first = queue.enqueue(context(), keyed);
  ASSERT_EQ(first.verdict, enqueued::kind::accepted);
  const long long calls = evalsha_calls();
  job_spec tight = echo();
  tight.freshness = 350ms;  // after the first two: a backlog of (2 + 1/2) x 100 ms, plus 100 ms of budget
  tight.min_budget = 100ms;
  const std::vector<async_answer<enqueued>> got = queue.enqueue_bulk(context(), {echo("a"), keyed, tight, tight});
  EXPECT_EQ(evalsha_calls(), calls + 1) << "one script call for the whole bulk";
  ASSERT_EQ(got.size(), 4u);
  for (const auto& a : got) ASSERT_FALSE(a.error);
  EXPECT_EQ(got[0].value.verdict, enqueued::kind::accepted);
  EXPECT_EQ(got[1].value.verdict, enqueued::kind::duplicate);
  EXPECT_EQ(got[1].value.id, first.id);
  EXPECT_EQ(got[2].value.verdict, enqueued::kind::accepted) << "2.5 x 100 ms / 1 slot + 100 <= 350";
  EXPECT_EQ(got[3].value.verdict, enqueued::kind::refused);
  EXPECT_EQ(got[3].value.predicted_wait, 350ms) << "the job before it in the same bulk counts";
  EXPECT_EQ(xlen(), 3);
  EXPECT_TRUE(queue.enqueue_bulk(context(), {}).empty());
}

TEST_F(JobQueue, AnEnqueueWhoseContextStoppedIsAnsweredStoppedAndNeverSent) {
  context_source stopped(clk);
  stopped.cancel();
  EXPECT_THROW(queue.enqueue(stopped.get(), echo()), stopped_error);
  EXPECT_EQ(xlen(), 0) << "a stopped enqueue is not sent";
  EXPECT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted) << "and the lane goes on";
}

TEST_F(JobQueue, AQueueMayGoOnceItsCallersAreAnsweredEvenWithABatchAtTheBroker) {
  // A caller whose context stopped is answered at once, while its batch may
  // still be at the broker; it may then destroy the queue. The batch's
  // completion must not touch it (ASan and TSan watch this test).
  for (int round = 0; round < 20; ++round) {
    auto q = std::make_unique<job_queue>(redis, queue_options{.clock = &clk});
    context_source stop(clk);
    std::promise<async_answer<enqueued>> first;
    q->async_enqueue(stop.get(), echo(), [&](async_answer<enqueued> a) { first.set_value(std::move(a)); });
    stop.cancel();
    const async_answer<enqueued> a = first.get_future().get();
    q.reset();
    if (a.error) {
      EXPECT_THROW(std::rethrow_exception(a.error), stopped_error);
    }
  }
  EXPECT_LE(xlen(), 20) << "a stopped enqueue may or may not have landed, never twice";
  EXPECT_EQ(queue.enqueue(context(), echo()).verdict, enqueued::kind::accepted) << "the connection goes on";
}

}  // namespace
}  // namespace hourglass::fleet::testing
