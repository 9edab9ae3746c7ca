// start.lua taken instead of given: a reader with free workers reads new
// entries and starts them in one script call, on a real redis-server
// (lua_script_fixture.hpp). Its decoder's refusals of wrong shapes are in
// scripts_test.cpp with the others.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "job_hash.hpp"
#include "lua_script_fixture.hpp"
#include "scripts.hpp"

namespace hourglass::fleet::testing {
namespace {

using verdict = job_queue::start_answer::verdict;

struct TakeScript : LuaScript {
  // start.lua taken, for consumer c1 under lease token life-1.
  redis_reply take_raw(int count, const std::string& judge = "1", const std::string& max_deliveries = "5") {
    return eval(
        detail::start_script, {stream, dead, stats},
        {group, "c1", max_deliveries, "60000", "600000", "100", "take", std::to_string(count), "life-1", judge});
  }
  job_queue::taken take(int count, const std::string& judge = "1") {
    return detail::decode_take(take_raw(count, judge), static_cast<std::size_t>(count));
  }
  long long pending_of(const std::string& consumer) {
    return static_cast<long long>(call({"XPENDING", stream, group, "-", "+", "100", consumer}).elements.size());
  }
  static std::string field_of(const job_queue::taken_entry& e, const std::string& name) {
    for (const auto& [k, v] : e.fields) {
      if (k == name) return v;
    }
    return "<missing>";
  }
};

TEST_F(TakeScript, ReadsOnlyNewEntriesAndStartsEachInTheSameStep) {
  const std::string theirs = new_job_id(), a = new_job_id(), b = new_job_id(), c = new_job_id();
  enqueue(theirs);
  deliver("c2", 1);
  const std::string ea = enqueue(a, "body-a"), eb = enqueue(b), ec = enqueue(c);

  const redis_reply raw = take_raw(2);
  ASSERT_TRUE(raw.is_array());
  ASSERT_EQ(raw.elements.size(), 4u) << "TIME, then one element an entry";
  EXPECT_TRUE(raw.elements[0].is_string() && raw.elements[1].is_string());
  ASSERT_EQ(raw.elements[2].elements.size(), 3u) << "{entry id, fields, start answer}";
  const job_queue::taken t = detail::decode_take(raw, 2);
  EXPECT_GT(t.broker_now_us, 0);
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.entries[0].id, ea) << "the oldest new entry first; not the one c2 holds";
  EXPECT_EQ(t.entries[1].id, eb);
  EXPECT_EQ(field_of(t.entries[0], "id"), a);
  EXPECT_EQ(field_of(t.entries[0], "handler"), "echo");
  EXPECT_EQ(field_of(t.entries[0], "freshness_ms"), "-1");
  ASSERT_TRUE(t.entries[0].started.has_value());
  const job_queue::start_answer& run = *t.entries[0].started;
  EXPECT_EQ(run.v, verdict::run);
  EXPECT_EQ(run.deliveries, 1u);
  EXPECT_EQ(run.payload, "body-a");
  EXPECT_EQ(run.content_type, "text/plain");
  EXPECT_EQ(run.broker_now_us, t.broker_now_us);
  EXPECT_EQ(field(job(a), "state"), "running");
  EXPECT_EQ(field(job(a), "start_token"), "life-1/" + ea) << "the token a worker's start of it would use";
  EXPECT_EQ(field(job(a), "consumer"), "c1");
  EXPECT_FALSE(field(job(a), "started_ms").empty()) << "on its timeline";
  EXPECT_EQ(pending_of("c1"), 2);
  EXPECT_EQ(field(job(c), "state"), "queued") << "beyond the count: not read, not started";

  // The same start again from a worker (the token of the take) is counted once.
  const detail::start_batch_reply again = detail::decode_start(
      eval(detail::start_script, {stream, dead, stats, job(a)},
           {group, "c1", "5", "60000", "600000", "100", ea, a, "life-1/" + ea}),
      1);
  EXPECT_EQ(again.jobs[0].v, verdict::run);
  EXPECT_EQ(again.jobs[0].deliveries, 1u);

  const job_queue::taken rest = take(5);
  ASSERT_EQ(rest.entries.size(), 1u) << "what is left, fewer than asked";
  EXPECT_EQ(rest.entries[0].id, ec);
  const job_queue::taken none = take(5);
  EXPECT_TRUE(none.entries.empty()) << "nothing new: only the TIME";
  EXPECT_GT(none.broker_now_us, 0);
  EXPECT_EQ(pending_of("c2"), 1) << "another's entry untouched";
}

TEST_F(TakeScript, AnEntryTooLateToStartIsReadButNotStarted) {
  const std::string stale = new_job_id(), short_budget = new_job_id(), past_deadline = new_job_id(),
                    fresh = new_job_id();
  const enqueue_batch_reply r = enqueue_batch(
      {{.id = stale, .freshness_ms = "0", .admission = "0"},
       {.id = short_budget, .freshness_ms = "1000", .min_budget_ms = "60000", .admission = "0"},
       {.id = past_deadline, .freshness_ms = "60000", .admission = "0", .deadline_us = "0"},
       {.id = fresh, .freshness_ms = "60000", .min_budget_ms = "10", .admission = "0"}});
  ASSERT_EQ(r.jobs.size(), 4u);
  // (Admitted without judging, as a job that waited would be by now.) Each
  // is judged as the consumer judges one at delivery.
  const job_queue::taken t = take(10);
  ASSERT_EQ(t.entries.size(), 4u);
  EXPECT_FALSE(t.entries[0].started.has_value()) << "freshness 0: none left";
  EXPECT_FALSE(t.entries[1].started.has_value()) << "1 s left, 60 s needed";
  EXPECT_FALSE(t.entries[2].started.has_value()) << "its deadline is now";
  ASSERT_TRUE(t.entries[3].started.has_value());
  EXPECT_EQ(t.entries[3].started->v, verdict::run);
  for (const std::string& id : {stale, short_budget, past_deadline}) {
    EXPECT_EQ(field(job(id), "state"), "queued") << "not started: the caller records its expiry";
    EXPECT_EQ(field(job(id), "deliveries"), "0");
  }
  EXPECT_EQ(pending_of("c1"), 4) << "every one read is ours to finish";
}

TEST_F(TakeScript, WithoutJudgingEveryEntryStarts) {
  const std::string stale = new_job_id();
  enqueue_batch({{.id = stale, .freshness_ms = "0", .admission = "0"}});
  const job_queue::taken t = take(1, "0");
  ASSERT_EQ(t.entries.size(), 1u);
  ASSERT_TRUE(t.entries[0].started.has_value()) << "--policy fifo judges nothing";
  EXPECT_EQ(t.entries[0].started->v, verdict::run);
}

TEST_F(TakeScript, ACancelledOrOverDeliveredJobIsAnsweredAsAStartAnswersIt) {
  const std::string cancelled = new_job_id(), tired = new_job_id();
  enqueue(cancelled);
  enqueue(tired);
  call(job_hash(job(cancelled)).set(job_field::cancel_requested, 1));
  call(job_hash(job(tired)).set(job_field::deliveries, 5));
  const job_queue::taken t = take(2);
  ASSERT_EQ(t.entries.size(), 2u);
  EXPECT_EQ(t.entries[0].started->v, verdict::cancelled);
  EXPECT_EQ(t.entries[1].started->v, verdict::dead);
  EXPECT_EQ(field(job(tired), "state"), "dead");
  EXPECT_EQ(pending_of("c1"), 0) << "both acknowledged in the same step";
}

}  // namespace
}  // namespace hourglass::fleet::testing
