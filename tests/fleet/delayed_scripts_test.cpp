// The delayed set's scripts on a real redis-server: a delayed job held at
// enqueue, a failed attempt's retry scheduled (or refused) by the finish on
// the broker's clock, due jobs moved to the stream once by promote, and a
// scheduled job cancelled. Times come from the broker's TIME, read here too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "job_hash.hpp"
#include "lua_script_fixture.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;

struct DelayedSet : LuaScript {
  long long broker_ms() {
    const redis_reply t = call({"TIME"});
    return std::stoll(t.elements[0].str) * 1000 + std::stoll(t.elements[1].str) / 1000;
  }
  double score(const std::string& id) {
    const redis_reply r = call({"ZSCORE", delayed, id});
    return r.is_nil() ? -1 : std::stod(r.str);
  }
  // One job's finish: {entry, run_us, kind, [retry args], field_count, fields...}.
  finish_result finish_one(const std::string& id, const std::vector<std::string>& args, const std::string& token = "") {
    std::vector<std::string> a{group, "60000", token};
    a.insert(a.end(), args.begin(), args.end());
    return detail::decode_finish(eval(detail::finish_script, {stream, stats, delayed, job(id)}, a), 1).at(0);
  }
  detail::promote_reply promote(const std::vector<std::string>& ids, const std::string& wait_us = "0") {
    std::vector<std::string> keys{stream, delayed}, args{wait_us, "60000", group};
    for (const std::string& id : ids) {
      keys.push_back(job(id));
      args.push_back(id);
    }
    return detail::decode_promote(eval(detail::promote_script, keys, args));
  }
  std::string entry_field(const std::string& entry, const std::string& name) {
    const redis_reply r = call({"XRANGE", stream, entry, entry});
    if (r.elements.size() != 1) return "<no entry>";
    const auto& f = r.elements[0].elements[1].elements;
    for (std::size_t i = 0; i + 1 < f.size(); i += 2) {
      if (f[i].str == name) return f[i + 1].str;
    }
    return "";
  }
};

TEST_F(DelayedSet, EnqueueHoldsADelayedJobInTheDelayedSetUntilItsDueTimeOnTheBrokersClock) {
  const std::string id = new_job_id();
  const long long before = broker_ms();
  const auto r = enqueue_batch({{.id = id,
                                 .freshness_ms = "100",
                                 .max_attempts = "3",
                                 .retry_base_us = "100000",
                                 .retry_cap_us = "1000000",
                                 .deadline_us = "60000000",
                                 .delay_us = "5000000"}});
  const long long after = broker_ms();
  ASSERT_EQ(r.jobs.at(0).verdict, detail::enqueue_reply::kind::accepted);
  EXPECT_EQ(r.jobs[0].id, "") << "no stream entry yet";
  EXPECT_EQ(call({"XLEN", stream}).integer, 0);
  const double due = score(id);
  EXPECT_GE(due, static_cast<double>(before + 5000));
  EXPECT_LE(due, static_cast<double>(after + 5001));
  EXPECT_EQ(field(job(id), "state"), "scheduled");
  EXPECT_EQ(std::stod(field(job(id), "due_ms")), due);
  EXPECT_EQ(field(job(id), "attempt"), "1");
  EXPECT_EQ(field(job(id), "max_attempts"), "3");
  EXPECT_EQ(field(job(id), "retry_cap_us"), "1000000");
  const long long deadline_ms = std::stoll(field(job(id), "deadline_us")) / 1000;
  EXPECT_GE(deadline_ms, before + 60000);
  EXPECT_LE(deadline_ms, after + 60000);

  const std::string plain = new_job_id();
  enqueue(plain);
  EXPECT_EQ(call({"HEXISTS", job(plain), "max_attempts"}).integer, 0) << "no retry fields without a policy";
}

TEST_F(DelayedSet, FinishSchedulesARetryThatFitsTheDeadlineAndRecordsTheFallbackWhenItDoesNot) {
  const std::string fits = new_job_id(), late = new_job_id();
  // (admission "0": no live slot here, so a deadline would refuse the second)
  enqueue_batch({{.id = fits, .admission = "0", .max_attempts = "3", .deadline_us = "10000000"},
                 {.id = late, .admission = "0", .max_attempts = "3", .deadline_us = "1000000"}});
  const std::string entry = field(job(fits), "entry");
  const std::vector<std::string> fallback{"4", "state", "deadline_exceeded", "stage", "retry"};
  const auto retry = [&](const std::string& e, const std::string& delay_us) {
    std::vector<std::string> a{e,      "2500", "retry", delay_us, "100000", "upstream_down", "the upstream is down",
                               "2.500"};
    a.insert(a.end(), fallback.begin(), fallback.end());
    return a;
  };
  const long long before = broker_ms();
  EXPECT_EQ(finish_one(fits, retry(entry, "1000000")), finish_result::scheduled) << "now + 1 s + 0.1 s < 10 s";
  EXPECT_EQ(field(job(fits), "state"), "scheduled");
  EXPECT_EQ(field(job(fits), "attempt"), "2");
  EXPECT_EQ(field(job(fits), "deliveries"), "0") << "a new attempt: its deliveries count afresh";
  EXPECT_EQ(field(job(fits), "entry"), "");
  EXPECT_GE(score(fits), static_cast<double>(before + 1000));
  EXPECT_NE(field(job(fits), "payload"), "") << "kept for the next attempt";
  // cjson's text: an array of one object, its keys in any order
  const std::string attempts = field(job(fits), "attempts");
  EXPECT_EQ(attempts.front(), '[') << attempts;
  EXPECT_NE(attempts.find(R"("error":"upstream_down")"), std::string::npos) << attempts;
  EXPECT_NE(attempts.find(R"("outcome":"error")"), std::string::npos) << attempts;
  EXPECT_EQ(attempts.find("outcome"), attempts.rfind("outcome")) << "one attempt: " << attempts;
  EXPECT_EQ(call({"XLEN", stream}).integer, 1) << "its entry acknowledged and deleted; the other's left";
  EXPECT_EQ(finish_one(fits, retry(entry, "0")), finish_result::duplicate) << "the same attempt again";

  EXPECT_EQ(finish_one(late, retry("", "2000000")), finish_result::no_budget) << "now + 2 s is past the 1 s";
  EXPECT_EQ(field(job(late), "state"), "deadline_exceeded");
  EXPECT_EQ(field(job(late), "stage"), "retry");
  EXPECT_EQ(score(late), -1) << "never in the delayed set";
  EXPECT_GT(call({"PTTL", job(late)}).integer, 0);
}

TEST_F(DelayedSet, AFinishSentAgainAfterItsReplyWasLostGetsItsFirstAnswer) {
  const std::string done = new_job_id(), retried = new_job_id();
  enqueue(done);
  enqueue_batch({{.id = retried, .max_attempts = "3"}});
  const std::string e1 = field(job(done), "entry"), e2 = field(job(retried), "entry");
  const std::vector<std::string> ok{e1, "100", "final", "2", "state", "ok"};
  EXPECT_EQ(finish_one(done, ok, "life-1"), finish_result::first);
  EXPECT_EQ(finish_one(done, ok, "life-1"), finish_result::first) << "the same finish: answered as before";
  EXPECT_EQ(field(stats, "duplicate_outcomes"), "") << "and not counted a duplicate";
  EXPECT_EQ(finish_one(done, ok, "life-2"), finish_result::duplicate) << "another life's finish is one";
  const std::vector<std::string> retry{e2,      "100", "retry", "1000000",           "0",     "down", "it is down",
                                       "0.100", "4",   "state", "deadline_exceeded", "stage", "retry"};
  EXPECT_EQ(finish_one(retried, retry, "life-1"), finish_result::scheduled);
  EXPECT_EQ(finish_one(retried, retry, "life-1"), finish_result::scheduled);
  EXPECT_EQ(field(job(retried), "attempt"), "2") << "scheduled once";
}

TEST_F(DelayedSet, PromoteMovesEachDueJobOnceAndJudgesItsFreshnessFromItsDueTime) {
  const std::string fresh = new_job_id(), stale = new_job_id(), later = new_job_id();
  enqueue_batch({{.id = fresh, .freshness_ms = "60000", .delay_us = "1000"},
                 {.id = stale, .freshness_ms = "100", .delay_us = "1000"},
                 {.id = later, .delay_us = "600000000"}});
  const long long now = broker_ms();
  call({"ZADD", delayed, "XX", std::to_string(now - 10), fresh});
  call({"ZADD", delayed, "XX", std::to_string(now - 10000), stale});  // due 10 s ago, fresh for 0.1 s
  const detail::promote_reply p = promote({fresh, stale, later});
  ASSERT_FALSE(p.nostream);
  EXPECT_EQ(p.moved, 1u);
  EXPECT_EQ(p.expired_handlers, std::vector<std::string>{"echo"});
  ASSERT_TRUE(p.next_due_ms.has_value());
  EXPECT_EQ(static_cast<double>(*p.next_due_ms), score(later)) << "not due: left where it is";
  EXPECT_GT(p.broker_now_us, 0);

  EXPECT_EQ(field(job(fresh), "state"), "queued");
  const std::string entry = field(job(fresh), "entry");
  EXPECT_EQ(entry_field(entry, "due_ms"), std::to_string(now - 10)) << "its freshness counts from here";
  EXPECT_EQ(field(job(stale), "state"), "deadline_exceeded");
  EXPECT_EQ(field(job(stale), "stage"), "admission");
  EXPECT_EQ(score(fresh), -1);
  EXPECT_EQ(score(stale), -1);

  const detail::promote_reply again = promote({fresh, stale});
  EXPECT_EQ(again.moved, 0u) << "a job is moved once, whoever asks";
  EXPECT_TRUE(again.expired_handlers.empty());
  EXPECT_EQ(call({"XLEN", stream}).integer, 1);

  const std::string unbounded = new_job_id();
  enqueue_batch({{.id = unbounded, .freshness_ms = "60000", .delay_us = "1000"}});
  call({"ZADD", delayed, "XX", std::to_string(now - 10), unbounded});
  EXPECT_EQ(promote({unbounded}, "-1").expired_handlers.size(), 1u) << "no live worker: it cannot start in time";
  const std::string fifo = new_job_id();
  enqueue_batch({{.id = fifo, .freshness_ms = "1", .delay_us = "1000"}});
  call({"ZADD", delayed, "XX", std::to_string(now - 10000), fifo});
  EXPECT_EQ(promote({fifo}, "").moved, 1u) << "--policy fifo: never judged";
}

TEST_F(DelayedSet, ADeleteTakesAScheduledJobOutOfTheDelayedSet) {
  const std::string id = new_job_id();
  enqueue_batch({{.id = id, .delay_us = "600000000"}});
  const redis_reply r = eval(detail::cancel_script, {stream, job(id), delayed}, {group, "60000"});
  EXPECT_EQ(detail::decode_cancel(r), detail::cancel_reply::cancelled);
  EXPECT_EQ(field(job(id), "state"), "cancelled");
  EXPECT_EQ(score(id), -1);
  EXPECT_EQ(promote({id}).moved, 0u);
}

TEST_F(DelayedSet, AFailedAttemptOfAJobADeleteMarkedIsRecordedCancelledNotRetried) {
  const std::string id = new_job_id();
  enqueue_batch({{.id = id, .max_attempts = "3", .deadline_us = "60000000"}});
  const std::string entry = field(job(id), "entry");
  call(job_hash(job(id)).state(job_state::running));  // as start.lua leaves it
  const redis_reply mark = eval(detail::cancel_script, {stream, job(id), delayed}, {group, "60000"});
  EXPECT_EQ(detail::decode_cancel(mark), detail::cancel_reply::marked) << "it is running";
  const std::vector<std::string> retry{
      entry,   "100",  "retry", "1000", "0", "down", "it is down", "0.100", "4", "state", "deadline_exceeded",
      "stage", "retry"};
  EXPECT_EQ(finish_one(id, retry), finish_result::cancelled);
  EXPECT_EQ(field(job(id), "state"), "cancelled");
  EXPECT_EQ(field(job(id), "cause"), "requested");
  EXPECT_EQ(field(job(id), "payload"), "");
  EXPECT_NE(field(job(id), "attempts").find(R"("error":"down")"), std::string::npos) << "its failed attempt listed";
  EXPECT_EQ(score(id), -1) << "never in the delayed set";
  EXPECT_GT(call({"PTTL", job(id)}).integer, 0);
  EXPECT_EQ(call({"XLEN", stream}).integer, 0) << "its entry acknowledged and deleted";
  EXPECT_EQ(finish_one(id, retry), finish_result::duplicate);
}

TEST_F(DelayedSet, EnqueueJudgesAJobByItsDeadlineWhenThatComesBeforeItsFreshness) {
  const std::string runner = new_job_id();
  enqueue(runner);
  call({"HSET", slots, "c1", "1:" + std::to_string(broker_ms() + 60000)});
  call({"HSET", stats, "mean_run_us", "200000"});  // one job waiting, one slot: a 200 ms predicted wait
  const std::string tight = new_job_id(), roomy = new_job_id(), no_freshness = new_job_id();
  const auto r = enqueue_batch({{.id = tight, .freshness_ms = "60000", .min_budget_ms = "10", .deadline_us = "150000"},
                                {.id = roomy, .freshness_ms = "60000", .min_budget_ms = "10", .deadline_us = "5000000"},
                                {.id = no_freshness, .min_budget_ms = "10", .deadline_us = "100000"}});
  EXPECT_EQ(r.jobs.at(0).verdict, detail::enqueue_reply::kind::refused) << "150 ms left cannot cover a 200 ms wait";
  EXPECT_EQ(r.jobs.at(1).verdict, detail::enqueue_reply::kind::accepted);
  EXPECT_EQ(r.jobs.at(2).verdict, detail::enqueue_reply::kind::refused) << "no freshness: its deadline still bounds it";
}

TEST_F(DelayedSet, ABatchSentAgainAfterNostreamIsNotADuplicateOfItself) {
  const std::string id = new_job_id();
  const job_args delayed_job{.id = id, .idempotency_key = "k1", .delay_us = "600000000"};
  ASSERT_EQ(enqueue_batch({delayed_job}).jobs.at(0).verdict, detail::enqueue_reply::kind::accepted);
  const auto again = enqueue_batch({delayed_job});
  EXPECT_EQ(again.jobs.at(0).verdict, detail::enqueue_reply::kind::accepted) << "its own id under its key";
  const auto other = enqueue_batch({{.id = new_job_id(), .idempotency_key = "k1"}});
  EXPECT_EQ(other.jobs.at(0).verdict, detail::enqueue_reply::kind::duplicate);
  EXPECT_EQ(other.jobs.at(0).id, id);
}

TEST_F(DelayedSet, AScheduleSettlesAFireOnlyOnTheRecordItsCallerLookedAt) {
  const std::string key = "hg:{t}:schedule:nightly";
  const redis_reply look = eval(detail::schedule_script, {key, paused}, {"look"});
  ASSERT_TRUE(look.elements.at(0).is_integer());
  const long long settled = look.elements[0].integer;
  const auto settle = [&](long long fire, const std::string& missed, long long looked) {
    return eval(detail::schedule_script, {key}, {"settle", std::to_string(fire), missed, std::to_string(looked)})
        .integer;
  };
  EXPECT_EQ(settle(settled + 1000, "2", settled), 1);
  EXPECT_EQ(settle(settled + 2000, "5", settled), 0) << "another daemon settled since this look: its count is stale";
  EXPECT_EQ(field(key, "missed"), "2");
  EXPECT_EQ(field(key, "settled_ms"), std::to_string(settled + 1000));
  EXPECT_EQ(settle(settled + 2000, "0", settled + 1000), 1) << "a look at the moved record settles the next";
  EXPECT_EQ(settle(settled + 2000, "0", settled + 2000), 0) << "that fire is settled already";
}

// A person's wait: the finish leaves the job waiting with its limit in the
// delayed set; a signal of another name changes nothing; the right one puts
// it back on the stream with its deadline moved on by the wait, once.
TEST_F(DelayedSet, ASignalResumesAJobWaitingForItOnceWithItsDeadlineMovedOnByTheWait) {
  const std::string id = new_job_id();
  ASSERT_EQ(enqueue_batch({{.id = id, .admission = "0", .deadline_us = "60000000"}}).jobs.at(0).verdict,
            detail::enqueue_reply::kind::accepted);
  const std::string first_entry = field(job(id), "entry");
  call(job_hash(job(id)).state(job_state::running));
  const long long deadline_before = std::stoll(field(job(id), "deadline_us"));
  const long long before = broker_ms();
  ASSERT_EQ(finish_one(id, {first_entry, "1000", "wait", "signal:approve", "5000000", "0"}), finish_result::waiting);
  EXPECT_EQ(field(job(id), "state"), "waiting");
  EXPECT_EQ(field(job(id), "wait_rule"), "signal:approve");
  EXPECT_GE(score(id), static_cast<double>(before + 5000)) << "its limit, from the broker's TIME";
  EXPECT_EQ(call({"XLEN", stream}).integer, 0) << "its entry left the stream";

  const auto signal = [&](const std::string& name, const std::string& payload) {
    return eval(detail::signal_script, {stream, job(id), delayed}, {name, payload, "60000"});
  };
  EXPECT_EQ(detail::decode_signal(signal("reject", "no")).verdict, signal_answer::kind::not_waiting);
  EXPECT_EQ(field(job(id), "state"), "waiting") << "another name: nothing changed";
  call({"HINCRBY", job(id), "human_since_us", "-2000000"});  // as if the person took 2 s
  EXPECT_EQ(detail::decode_signal(signal("approve", "yes")).verdict, signal_answer::kind::delivered);
  EXPECT_EQ(field(job(id), "state"), "queued");
  EXPECT_EQ(field(job(id), "woke_by"), "signal");
  EXPECT_EQ(field(job(id), "signal_payload"), "yes");
  EXPECT_GE(std::stoll(field(job(id), "human_waited_us")), 2000000);
  const long long moved = std::stoll(field(job(id), "deadline_us")) - deadline_before;
  EXPECT_GE(moved, 2000000) << "the machine budget stood still for the wait";
  EXPECT_LT(moved, 3000000);
  EXPECT_EQ(score(id), -1) << "its limit left the delayed set";
  const std::string entry = field(job(id), "entry");
  EXPECT_EQ(entry_field(entry, "deadline_us"), field(job(id), "deadline_us"));
  EXPECT_EQ(entry_field(entry, "min_budget_ms"), "0");
  const redis_reply again = signal("approve", "twice");
  EXPECT_EQ(detail::decode_signal(again).verdict, signal_answer::kind::not_waiting) << "delivered once";
  EXPECT_EQ(detail::decode_signal(again).state, "queued");
  EXPECT_EQ(detail::decode_signal(signal("approve", "")).verdict, signal_answer::kind::not_waiting);
  EXPECT_EQ(
      detail::decode_signal(eval(detail::signal_script, {stream, job(new_job_id()), delayed}, {"approve", "", "60000"}))
          .verdict,
      signal_answer::kind::unknown);
}

// At its limit promote ends a person's wait (deadline_exceeded, stage
// human_wait, counted); a parent waiting for its children is resumed at its
// wake time instead, woke_by deadline. (A wait whose wake time has passed
// when it begins resumes in the finish itself.)
TEST_F(DelayedSet, PromoteEndsAPersonsWaitAtItsLimitAndResumesAParentAtItsWakeTime) {
  const std::string person = new_job_id();
  const std::string parent = new_job_id();
  const auto r = enqueue_batch({{.id = person, .admission = "0", .deadline_us = "60000000"},
                                {.id = parent, .admission = "0", .deadline_us = "60000000"}});
  ASSERT_EQ(r.jobs.at(0).verdict, detail::enqueue_reply::kind::accepted);
  ASSERT_EQ(r.jobs.at(1).verdict, detail::enqueue_reply::kind::accepted);
  for (const std::string& id : {person, parent}) call(job_hash(job(id)).state(job_state::running));
  call(job_hash(job(parent)).set(job_field::children, 2));
  ASSERT_EQ(finish_one(person, {field(job(person), "entry"), "1000", "wait", "signal:approve", "0", "0"}),
            finish_result::waiting);
  ASSERT_EQ(finish_one(parent, {field(job(parent), "entry"), "1000", "wait", "all", "1000000", "0"}),
            finish_result::waiting);
  const std::string past = std::to_string(broker_ms() - 1);  // as if its 59 s had gone by
  call(job_hash(job(parent)).set(job_field::wake_ms, past));
  call({"ZADD", delayed, past, parent});
  const detail::promote_reply p = promote({person, parent});
  EXPECT_EQ(p.human_wait_handlers.size(), 1u);
  EXPECT_EQ(p.moved, 1u);
  EXPECT_EQ(field(job(person), "state"), "deadline_exceeded");
  EXPECT_EQ(field(job(person), "stage"), "human_wait");
  EXPECT_EQ(field(stats, "expired:human_wait"), "1");
  EXPECT_EQ(field(job(parent), "state"), "queued");
  EXPECT_EQ(field(job(parent), "woke_by"), "deadline");
  EXPECT_EQ(field(job(parent), "wakes"), "1");

  const std::string late = new_job_id();
  ASSERT_EQ(enqueue_batch({{.id = late, .admission = "0", .deadline_us = "60000000"}}).jobs.at(0).verdict,
            detail::enqueue_reply::kind::accepted);
  call(job_hash(job(late)).state(job_state::running).set(job_field::children, 1));
  // keeps 60 s of its 60 s: its wake time has come already
  EXPECT_EQ(finish_one(late, {field(job(late), "entry"), "1000", "wait", "all", "60000000", "0"}),
            finish_result::resumed);
  EXPECT_EQ(field(job(late), "woke_by"), "deadline");
}

// A child that ends outside finish.lua (here a DELETE while it is queued)
// counts down its waiting parent and puts it due at once; promote resumes
// it when that met its rule (woke_by children), and puts it back at its wake
// time when it did not.
TEST_F(DelayedSet, AChildCancelledOnTheSpotPutsItsWaitingParentDueAndPromoteResumesItWhenItsRuleIsMet) {
  const std::string parent = new_job_id();
  ASSERT_EQ(enqueue_batch({{.id = parent, .admission = "0", .deadline_us = "60000000"}}).jobs.at(0).verdict,
            detail::enqueue_reply::kind::accepted);
  call(job_hash(job(parent)).state(job_state::running));
  std::vector<std::string> children;
  for (int i = 0; i < 3; ++i) {
    children.push_back(new_job_id());
    ASSERT_EQ(enqueue_batch({{.id = children.back(), .admission = "0", .parent = parent}}).jobs.at(0).verdict,
              detail::enqueue_reply::kind::accepted);
  }
  EXPECT_EQ(field(job(parent), "children"), "3");
  ASSERT_EQ(finish_one(parent, {field(job(parent), "entry"), "1000", "wait", "first:2", "100000", "0"}),
            finish_result::waiting);
  const double wake = score(parent);
  const auto cancel = [&](const std::string& id) {
    return detail::decode_cancel(eval(detail::cancel_script, {stream, job(id), delayed}, {group, "60000", ""}));
  };
  ASSERT_EQ(cancel(children[0]), detail::cancel_reply::cancelled);
  EXPECT_EQ(field(job(parent), "children_done"), "1");
  EXPECT_EQ(score(parent), 0) << "put due at once";
  EXPECT_EQ(promote({parent}).moved, 0u) << "one of two: not yet";
  EXPECT_EQ(field(job(parent), "state"), "waiting");
  EXPECT_EQ(score(parent), wake) << "back at its wake time";
  ASSERT_EQ(cancel(children[1]), detail::cancel_reply::cancelled);
  EXPECT_EQ(promote({parent}).moved, 1u);
  EXPECT_EQ(field(job(parent), "state"), "queued");
  EXPECT_EQ(field(job(parent), "woke_by"), "children");
}

// The wait ends at its wake time with children unfinished: promote cancels
// them as it queues the parent (cause parent, and their own children with
// them; a running one marked for its daemon to stop), so none holds a worker
// the resumed run needs. Cancelled here, they are counted here.
TEST_F(DelayedSet, PromoteCancelsTheChildrenStillUnfinishedWhenAParentWakes) {
  const std::string parent = new_job_id();
  ASSERT_EQ(enqueue_batch({{.id = parent, .admission = "0", .deadline_us = "60000000"}}).jobs.at(0).verdict,
            detail::enqueue_reply::kind::accepted);
  call(job_hash(job(parent)).state(job_state::running));
  const auto child_of = [&](const std::string& p) {
    const std::string id = new_job_id();
    EXPECT_EQ(enqueue_batch({{.id = id, .admission = "0", .parent = p}}).jobs.at(0).verdict,
              detail::enqueue_reply::kind::accepted);
    return id;
  };
  const std::string queued = child_of(parent), running = child_of(parent), done = child_of(parent);
  const std::string waiting = child_of(parent);
  call(job_hash(job(waiting)).state(job_state::running));
  const std::string grandchild = child_of(waiting);
  call(job_hash(job(running)).state(job_state::running));
  call(job_hash(job(done)).state(job_state::ok));
  ASSERT_EQ(finish_one(waiting, {field(job(waiting), "entry"), "1000", "wait", "all", "0", "0"}),
            finish_result::waiting);
  ASSERT_EQ(finish_one(parent, {field(job(parent), "entry"), "1000", "wait", "all", "1000000", "0"}),
            finish_result::waiting);
  const std::string past = std::to_string(broker_ms() - 1);  // its wake time has come
  call(job_hash(job(parent)).set(job_field::wake_ms, past));
  call({"ZADD", delayed, past, parent});
  const std::string queued_entry = field(job(queued), "entry");

  const detail::promote_reply p = promote({parent});
  EXPECT_EQ(p.moved, 1u);
  EXPECT_EQ(field(job(parent), "state"), "queued");
  EXPECT_EQ(field(job(parent), "woke_by"), "deadline");
  EXPECT_EQ(score(parent), -1) << "its children's count-downs did not put it back in the delayed set";
  for (const std::string& id : {queued, waiting, grandchild}) {
    EXPECT_EQ(field(job(id), "state"), "cancelled") << id;
    EXPECT_EQ(field(job(id), "cause"), "parent") << id;
    EXPECT_GT(call({"PTTL", job(id)}).integer, 0) << "kept for --result-ttl";
  }
  EXPECT_EQ(score(waiting), -1) << "a waiting child waits no more";
  EXPECT_EQ(call({"XRANGE", stream, queued_entry, queued_entry}).elements.size(), 0u) << "its entry is gone";
  EXPECT_EQ(field(job(running), "state"), "running") << "its daemon ends it";
  EXPECT_EQ(field(job(running), "cancel_requested"), "1");
  EXPECT_EQ(field(job(running), "cancel_cause"), "parent");
  EXPECT_EQ(field(job(done), "state"), "ok") << "a finished child is left as it is";
  EXPECT_EQ(p.cancelled_handlers, (std::vector<std::string>{"echo", "echo", "echo"}));
  EXPECT_EQ(field(stats, "finished:cancelled"), "3") << "the fleet's totals";
  EXPECT_EQ(field(job(parent), "children_done"), "2") << "the two of its own cancelled here";
}

// A child's finish that meets its parent's rule resumes it in the same
// script and cancels the siblings still unfinished, answering their
// handlers after the jobs' answers.
TEST_F(DelayedSet, AFinishThatEndsAWaitCancelsTheSiblingsAndSaysWhich) {
  const std::string parent = new_job_id();
  ASSERT_EQ(enqueue_batch({{.id = parent, .admission = "0", .deadline_us = "60000000"}}).jobs.at(0).verdict,
            detail::enqueue_reply::kind::accepted);
  call(job_hash(job(parent)).state(job_state::running));
  std::vector<std::string> kids;
  for (int i = 0; i < 3; ++i) {
    kids.push_back(new_job_id());
    ASSERT_EQ(enqueue_batch({{.id = kids.back(), .admission = "0", .parent = parent}}).jobs.at(0).verdict,
              detail::enqueue_reply::kind::accepted);
  }
  ASSERT_EQ(finish_one(parent, {field(job(parent), "entry"), "1000", "wait", "first_success", "100000", "0"}),
            finish_result::waiting);
  call(job_hash(job(kids[0])).state(job_state::running));
  call(job_hash(job(kids[1])).state(job_state::running));
  const std::string queued_entry = field(job(kids[2]), "entry");
  const redis_reply r = eval(detail::finish_script, {stream, stats, delayed, job(kids[0])},
                             {group, "60000", "", field(job(kids[0]), "entry"), "1000", "final", "2", "state", "ok"});
  std::vector<std::string> cancelled;
  EXPECT_EQ(detail::decode_finish(r, 1, &cancelled), std::vector<finish_result>{finish_result::first});
  EXPECT_EQ(cancelled, std::vector<std::string>{"echo"}) << "the queued sibling, cancelled here";
  EXPECT_EQ(field(job(parent), "state"), "queued");
  EXPECT_EQ(field(job(parent), "woke_by"), "children");
  EXPECT_EQ(field(job(kids[1]), "state"), "running") << "its daemon stops it";
  EXPECT_EQ(field(job(kids[1]), "cancel_cause"), "parent");
  EXPECT_EQ(field(job(kids[2]), "state"), "cancelled");
  EXPECT_EQ(field(job(kids[2]), "cause"), "parent");
  EXPECT_EQ(call({"XRANGE", stream, queued_entry, queued_entry}).elements.size(), 0u);
  EXPECT_EQ(field(stats, "finished:cancelled"), "1");
  EXPECT_EQ(field(stats, "finished:ok"), "1");
}

// A signal that comes after the wait's limit, before promote has ended the
// job, is not delivered: the job ends there, human_wait, counted once.
TEST_F(DelayedSet, ASignalAfterTheWaitsLimitEndsTheJobInsteadOfResumingIt) {
  const std::string id = new_job_id();
  ASSERT_EQ(enqueue_batch({{.id = id, .admission = "0", .deadline_us = "60000000"}}).jobs.at(0).verdict,
            detail::enqueue_reply::kind::accepted);
  call(job_hash(job(id)).state(job_state::running));
  ASSERT_EQ(finish_one(id, {field(job(id), "entry"), "1000", "wait", "signal:approve", "0", "0"}),
            finish_result::waiting);
  call({"HINCRBY", job(id), "wake_ms", "-1"});  // its limit has passed
  const signal_answer a = detail::decode_signal(
      eval(detail::signal_script, {stream, job(id), delayed}, {"approve", "late", "60000"}));
  EXPECT_EQ(a.verdict, signal_answer::kind::not_waiting);
  EXPECT_TRUE(a.expired_here);
  EXPECT_EQ(field(job(id), "state"), "deadline_exceeded");
  EXPECT_EQ(field(job(id), "stage"), "human_wait");
  EXPECT_EQ(field(stats, "expired:human_wait"), "1");
  EXPECT_EQ(score(id), -1);
  EXPECT_EQ(promote({id}).human_wait_handlers.size(), 0u) << "ended once";
}

}  // namespace
}  // namespace hourglass::fleet::testing
