// The fleet's Lua scripts (fleet/lua/*.lua) and their reply decoders: the
// decoders on replies built by hand, no broker; then each script's text, as
// `redis-cli --eval` would send it, through EVAL on a real redis-server, its
// reply checked for the shape its comment promises and read by its decoder.
#include "scripts.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "hourglass/fleet/freshness.hpp"
#include "job_hash.hpp"
#include "lua_script_fixture.hpp"
#include "reply_builders.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;
using namespace hourglass::fleet::detail;

// ---- replies built by hand ----

redis_reply ids(std::vector<std::string> v) {
  std::vector<redis_reply> e;
  for (std::string& s : v) e.push_back(str(std::move(s)));
  return arr(std::move(e));
}

// The message of the redis_unavailable `f` throws; "" when it throws none.
std::string thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const redis_unavailable& e) {
    return e.what();
  }
  return "";
}

// The broker's TIME 1700000000.123456 s, as scripts return it.
const redis_reply time_s = str("1700000000");
const redis_reply time_us = str("123456");
constexpr std::int64_t time_as_us = 1'700'000'000'123'456;

TEST(ScriptReplies, EnqueueReadsEachJobsVerdictIdAndPredictedWait) {
  using kind = enqueue_reply::kind;
  const redis_reply r = arr({arr({str("accepted"), str("1700000000000-0"), num(2500)}),
                             arr({str("duplicate"), str("ab12"), num(0)}), arr({str("refused"), str(""), num(-1)}),
                             arr({str("what"), str("1-0"), num(7)})});
  const enqueue_batch_reply b = decode_enqueue(r, 4);
  EXPECT_FALSE(b.nostream);
  ASSERT_EQ(b.jobs.size(), 4u);
  EXPECT_EQ(b.jobs[0].verdict, kind::accepted);
  EXPECT_EQ(b.jobs[0].id, "1700000000000-0");
  EXPECT_EQ(b.jobs[0].predicted_wait, 2500us);
  EXPECT_EQ(b.jobs[1].verdict, kind::duplicate);
  EXPECT_EQ(b.jobs[1].id, "ab12");
  EXPECT_EQ(b.jobs[2].verdict, kind::refused);
  EXPECT_EQ(b.jobs[2].predicted_wait, duration::max()) << "-1: no live slot, an unbounded wait";
  EXPECT_EQ(b.jobs[3].verdict, kind::accepted) << "any other verdict reads as accepted";
  EXPECT_TRUE(decode_enqueue(ids({"nostream"}), 3).nostream) << "whatever the batch's size";
}

TEST(ScriptReplies, FinishCancelAndReleaseReadTheirStatus) {
  struct finish_row {
    redis_reply reply;
    finish_result result;
  };
  const std::vector<finish_row> finishes{
      {str("first"), finish_result::first},
      {status_reply("first"), finish_result::first},
      {str("duplicate"), finish_result::duplicate},
      {str("unknown"), finish_result::unknown},
      {str("what"), finish_result::unknown},
      {num(1), finish_result::unknown},
      {nil(), finish_result::unknown},
  };
  std::vector<redis_reply> batch;
  for (const finish_row& f : finishes) batch.push_back(f.reply);
  const std::vector<finish_result> got = decode_finish(arr(batch), batch.size());
  ASSERT_EQ(got.size(), finishes.size());
  for (std::size_t i = 0; i < finishes.size(); ++i) {
    SCOPED_TRACE("finish row " + std::to_string(i));
    EXPECT_EQ(got[i], finishes[i].result);
  }

  struct cancel_row {
    redis_reply reply;
    cancel_reply result;
  };
  const std::vector<cancel_row> cancels{
      {str("cancelled"), cancel_reply::cancelled},
      {str("marked"), cancel_reply::marked},
      {str("finished"), cancel_reply::finished},
      {str("unknown"), cancel_reply::unknown},
      {str("what"), cancel_reply::finished},  // anything else: the job is read back, as for finished
      {nil(), cancel_reply::finished},
  };
  for (std::size_t i = 0; i < cancels.size(); ++i) {
    SCOPED_TRACE("cancel row " + std::to_string(i));
    EXPECT_EQ(decode_cancel(cancels[i].reply), cancels[i].result);
  }

  struct release_row {
    redis_reply reply;
    bool released;
  };
  const std::vector<release_row> releases{{num(1), true}, {num(0), false}, {str("1"), false}, {nil(), false}};
  for (std::size_t i = 0; i < releases.size(); ++i) {
    SCOPED_TRACE("release row " + std::to_string(i));
    EXPECT_EQ(decode_release(releases[i].reply), releases[i].released);
  }
}

TEST(ScriptReplies, StartReadsTheBrokersTimeAndEachJobsVerdict) {
  using verdict = job_queue::start_answer::verdict;
  struct row {
    const char* what;
    redis_reply reply;
    verdict v;
    unsigned deliveries;
    std::string payload;
  };
  const auto short_answer = [](const char* v, long long n) { return arr({str(v), num(n)}); };
  const std::vector<row> rows{
      {"run",
       arr({str("run"), num(2), str("echo"), str("body"), str("text/plain"), str("k"), str("3"), str("5"),
            str("1000000"), str("60000000"), str("1700000009000000"), str("signal"), str("signal:approve"), str("yes"),
            str("none")}),
       verdict::run, 2, "body"},
      {"run without a retry policy",
       arr({str("run"), num(1), str("echo"), str(""), str(""), str(""), str(""), str(""), str(""), str(""), str(""),
            str(""), str(""), str(""), str("")}),
       verdict::run, 1, ""},
      {"not_owner", short_answer("not_owner", 0), verdict::not_owner, 0, ""},
      {"finished", short_answer("finished", 0), verdict::finished, 0, ""},
      {"cancelled", short_answer("cancelled", 0), verdict::cancelled, 0, ""},
      {"gone", short_answer("gone", 0), verdict::gone, 0, ""},
      {"dead", short_answer("dead", 3), verdict::dead, 3, ""},
      {"an unknown verdict reads as gone", short_answer("what", 0), verdict::gone, 0, ""},
      {"late (taken only) reads as gone in a given batch", short_answer("late", 0), verdict::gone, 0, ""},
      {"negative deliveries read as 0", short_answer("dead", -1), verdict::dead, 0, ""},
  };
  std::vector<redis_reply> reply{time_s, time_us};
  for (const row& r : rows) reply.push_back(r.reply);
  const start_batch_reply b = decode_start(arr(reply), rows.size());
  EXPECT_EQ(b.broker_now_us, time_as_us);
  ASSERT_EQ(b.jobs.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(rows[i].what);
    EXPECT_EQ(b.jobs[i].v, rows[i].v);
    EXPECT_EQ(b.jobs[i].broker_now_us, time_as_us) << "each answer carries the batch's TIME";
    EXPECT_EQ(b.jobs[i].deliveries, rows[i].deliveries);
    EXPECT_EQ(b.jobs[i].payload, rows[i].payload);
  }
  EXPECT_EQ(b.jobs[0].handler, "echo");
  EXPECT_EQ(b.jobs[0].content_type, "text/plain");
  EXPECT_EQ(b.jobs[0].idempotency_key, "k");
  EXPECT_EQ(b.jobs[0].attempt, 3);
  EXPECT_EQ(b.jobs[0].retry.max_attempts, 5);
  EXPECT_EQ(b.jobs[0].retry.base, 1s);
  EXPECT_EQ(b.jobs[0].retry.cap, 60s);
  EXPECT_FALSE(b.jobs[0].retry.jitter) << "'none' turns the jitter off";
  EXPECT_TRUE(b.jobs[1].retry.jitter) << "a job enqueued before the field existed keeps full jitter";
  EXPECT_EQ(b.jobs[0].deadline_us, std::optional<std::int64_t>(1'700'000'009'000'000));
  EXPECT_EQ(b.jobs[1].attempt, 1) << "no policy: attempt 1 of 1, no deadline";
  EXPECT_EQ(b.jobs[1].retry.max_attempts, 1);
  EXPECT_FALSE(b.jobs[1].deadline_us.has_value());
  EXPECT_EQ(b.jobs[0].woke_by, "signal") << "resumed after a person's wait";
  EXPECT_EQ(b.jobs[0].wait_rule, "signal:approve");
  EXPECT_EQ(b.jobs[0].signal_payload, "yes");
  EXPECT_TRUE(b.jobs[1].woke_by.empty());
}

TEST(ScriptReplies, RenewReadsFencedOrItsTwelveElements) {
  const renew_reply fenced = decode_renew(arr({str("fenced")}));
  EXPECT_TRUE(fenced.fenced);
  EXPECT_TRUE(fenced.marked.empty() && fenced.lost.empty() && fenced.deleted.empty());

  const renew_reply ok = decode_renew(arr({str("ok"), ids({"1-0"}), ids({"2-0", "3-0"}), time_s, time_us, num(5),
                                           num(4), ids({"4-0"}), num(2500), num(8), num(3), str("")}));
  EXPECT_FALSE(ok.fenced);
  EXPECT_EQ(ok.marked, std::vector<std::string>{"1-0"});
  EXPECT_EQ(ok.lost, (std::vector<std::string>{"2-0", "3-0"}));
  EXPECT_EQ(ok.broker_now_us, time_as_us);
  EXPECT_EQ(ok.backlog, 5);
  EXPECT_EQ(ok.pending, 4);
  EXPECT_EQ(ok.deleted, std::vector<std::string>{"4-0"});
  EXPECT_EQ(ok.mean_run, 2500us);
  EXPECT_EQ(ok.live_slots, 8);
  EXPECT_EQ(ok.scheduled, 3);
  EXPECT_FALSE(ok.paused);
  EXPECT_TRUE(decode_renew(arr({str("ok"), ids({}), ids({}), time_s, time_us, num(0), num(0), ids({}), num(0), num(0),
                                num(0), str("1733400000123")}))
                  .paused);

  const renew_reply negative = decode_renew(arr(
      {str("ok"), ids({}), ids({}), time_s, time_us, num(-1), num(-3), ids({}), num(-1), num(-1), num(-1), str("")}));
  EXPECT_EQ(negative.backlog, 0) << "negative counts read as 0";
  EXPECT_EQ(negative.pending, 0);
}

TEST(ScriptReplies, HandBackReadsHowManyWereStillHeld) {
  EXPECT_EQ(decode_hand_back(num(3)), 3u);
  EXPECT_EQ(decode_hand_back(num(0)), 0u);
  EXPECT_EQ(decode_hand_back(num(-1)), 0u) << "negative reads as 0";
}

// What job_queue has always thrown for these: the daemon counts them as broker errors.
TEST(ScriptReplies, AReplyOfTheWrongShapeIsABrokerError) {
  const std::string unexpected = ": unexpected reply";
  struct row {
    const char* what;
    std::function<void()> decode;
    std::string error;
  };
  const std::vector<row> rows{
      {"enqueue: fewer answers than jobs", [] { decode_enqueue(arr({}), 1); }, "redis: enqueue" + unexpected},
      {"enqueue: an answer of two elements",
       [] {
         decode_enqueue(arr({ids({"accepted", "1-0"})}), 1);
       },
       "redis: enqueue" + unexpected},
      {"enqueue: a string", [] { decode_enqueue(str("accepted"), 1); }, "redis: enqueue" + unexpected},
      {"enqueue: an error reply", [] { decode_enqueue(err("OOM no"), 1); }, "redis: enqueue: OOM no"},
      {"start: nil", [] { decode_start(nil(), 1); }, "redis: start" + unexpected},
      {"start: fewer answers than jobs",
       [] {
         decode_start(arr({time_s, time_us, arr({str("gone"), num(0)})}), 2);
       },
       "redis: start" + unexpected},
      {"start: an answer of one element",
       [] {
         decode_start(arr({time_s, time_us, arr({str("gone")})}), 1);
       },
       "redis: start" + unexpected},
      {"start: run without the job",
       [] {
         decode_start(arr({time_s, time_us, arr({str("run"), num(1)})}), 1);
       },
       "redis: start" + unexpected},
      {"start: seconds not a number",
       [] {
         decode_start(arr({str("x"), time_us, arr({str("gone"), num(0)})}), 1);
       },
       "redis: TIME is not a time"},
      {"start: a million microseconds",
       [] {
         decode_start(arr({time_s, str("1000000"), arr({str("gone"), num(0)})}), 1);
       },
       "redis: TIME is not a time"},
      {"take: more entries than asked",
       [] {
         const redis_reply e = arr({str("1-0"), ids({"id", "x"}), arr({str("gone"), num(0)})});
         decode_take(arr({time_s, time_us, e, e}), 1);
       },
       "redis: take" + unexpected},
      {"take: an entry without its fields",
       [] {
         decode_take(arr({time_s, time_us, arr({str("1-0"), arr({str("gone"), num(0)})})}), 1);
       },
       "redis: take" + unexpected},
      {"take: a field without its value",
       [] {
         decode_take(arr({time_s, time_us, arr({str("1-0"), ids({"id"}), arr({str("gone"), num(0)})})}), 1);
       },
       "redis: take" + unexpected},
      {"take: no TIME", [] { decode_take(arr({time_s}), 1); }, "redis: take" + unexpected},
      {"take: run without the job",
       [] {
         decode_take(arr({time_s, time_us, arr({str("1-0"), ids({}), arr({str("run"), num(1)})})}), 1);
       },
       "redis: start" + unexpected},
      {"finish: fewer answers than jobs", [] { decode_finish(arr({str("first")}), 2); }, "redis: finish" + unexpected},
      {"finish: an error reply", [] { decode_finish(err("ERR boom"), 1); }, "redis: finish: ERR boom"},
      {"renew: nil", [] { decode_renew(nil()); }, "redis: renew" + unexpected},
      {"renew: empty", [] { decode_renew(arr({})); }, "redis: renew" + unexpected},
      {"renew: eight elements (no counts)",
       [] {
         decode_renew(arr({str("ok"), ids({}), ids({}), time_s, time_us, num(0), num(0), ids({})}));
       },
       "redis: renew" + unexpected},
      {"renew: TIME not a time",
       [] {
         decode_renew(arr({str("ok"), ids({}), ids({}), str("-1"), time_us, num(0), num(0), ids({}), num(0), num(0),
                           num(0), str("")}));
       },
       "redis: TIME is not a time"},
      {"hand back: a string", [] { decode_hand_back(str("3")); }, "redis: hand back" + unexpected},
      {"hand back: an error reply", [] { decode_hand_back(err("ERR boom")); }, "redis: hand back: ERR boom"},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.what);
    EXPECT_EQ(thrown_by(r.decode), r.error);
  }
}

// ---- each script's text through EVAL (lua_script_fixture.hpp) ----

TEST_F(LuaScript, EnqueueRefusesTheWholeBatchWhilePausedOnlyWhenAsked) {
  call({"SET", paused, "1"});
  refuse_paused = "1";
  const std::string refused = new_job_id();
  EXPECT_TRUE(enqueue_batch({{refused}, {new_job_id()}}).paused);
  EXPECT_EQ(call({"EXISTS", job(refused)}).integer, 0) << "nothing written";
  EXPECT_EQ(call({"XLEN", stream}).integer, 0);
  refuse_paused = "0";
  const enqueue_batch_reply taken = enqueue_batch({{new_job_id()}});
  EXPECT_FALSE(taken.paused);
  EXPECT_EQ(taken.jobs.at(0).verdict, enqueue_reply::kind::accepted) << "paused, and queued to wait for the resume";
  call({"DEL", paused});
  refuse_paused = "1";
  EXPECT_EQ(enqueue_batch({{new_job_id()}}).jobs.at(0).verdict, enqueue_reply::kind::accepted) << "running again";
}

TEST_F(LuaScript, EnqueueAdmitsEachJobAgainstTheCountsAndTheJobsBeforeIt) {
  for (int i = 0; i < 3; ++i) enqueue(new_job_id());
  deliver("c1", 1);
  call({"HSET", stats, "mean_run_us", "100000.75"});
  const long long now_ms = std::stoll(call({"TIME"}).elements[0].str) * 1000;
  call({"HSET", slots, "a", "2:" + std::to_string(now_ms + 600000), "b", "5:" + std::to_string(now_ms - 1000), "c",
        "garbage"});
  // (backlog 2 (3 entries, 1 delivered) + 1/2) x 100 ms (floored) / 2 live slots (b expired, c not a
  // lease) = 125 ms
  const std::string a = new_job_id(), b = new_job_id(), c = new_job_id(), d = new_job_id(), e = new_job_id();
  const enqueue_batch_reply r = enqueue_batch({{.id = a, .freshness_ms = "175", .min_budget_ms = "50"},
                                               {.id = b, .freshness_ms = "175", .min_budget_ms = "50"},
                                               {.id = c, .freshness_ms = "225", .min_budget_ms = "50"},
                                               {.id = d, .freshness_ms = "1", .admission = "0"},
                                               {.id = e}});
  ASSERT_FALSE(r.nostream);
  using kind = enqueue_reply::kind;
  EXPECT_EQ(r.jobs[0].verdict, kind::accepted) << "125 + 50 <= 175";
  EXPECT_EQ(r.jobs[0].predicted_wait, 125ms);
  EXPECT_EQ(r.jobs[1].verdict, kind::refused) << "a's place in the backlog counts: 175 + 50 > 175";
  EXPECT_EQ(r.jobs[1].predicted_wait, 175ms);
  EXPECT_EQ(r.jobs[2].verdict, kind::accepted) << "175 + 50 <= 225";
  EXPECT_EQ(r.jobs[3].verdict, kind::accepted) << "admission off: never refused";
  EXPECT_EQ(r.jobs[4].verdict, kind::accepted) << "no freshness: always admitted";
  EXPECT_EQ(call({"EXISTS", job(b)}).integer, 0) << "a refused job writes nothing";
  EXPECT_EQ(call({"XLEN", stream}).integer, 3 + 4);
  EXPECT_EQ(field(job(d), "freshness_ms"), "1") << "kept as given";

  call({"HDEL", slots, "a"});
  EXPECT_EQ(enqueue_batch({{.id = new_job_id(), .freshness_ms = "3600000"}}).jobs[0].predicted_wait, duration::max())
      << "a backlog and no live slot: an unbounded wait";
}

TEST_F(LuaScript, FinishRecordsTheFirstOutcomeOfEachJobInTheBatch) {
  const std::string id = new_job_id(), second = new_job_id(), other = new_job_id();
  enqueue(id);
  enqueue(second);
  const auto finish = [&](const std::vector<std::string>& ids, const std::vector<std::vector<std::string>>& jobs) {
    std::vector<std::string> keys{stream, stats, delayed}, args{group, "60000", ""};
    for (const std::string& j : ids) keys.push_back(job(j));
    for (const auto& j : jobs) args.insert(args.end(), j.begin(), j.end());
    return eval(finish_script, keys, args);
  };
  const redis_reply first = finish({id, second, other}, {{"", "2000", "final", "4", "state", "ok", "result", "done"},
                                                         {"", "-1", "final", "2", "state", "error"},
                                                         {"", "-1", "final", "2", "state", "ok"}});
  ASSERT_TRUE(first.is_array());
  const std::vector<finish_result> got = decode_finish(first, 3);
  EXPECT_EQ(got, (std::vector<finish_result>{finish_result::first, finish_result::first, finish_result::unknown}));
  EXPECT_EQ(field(job(id), "result"), "done");
  EXPECT_EQ(field(job(second), "state"), "error");
  EXPECT_EQ(field(job(id), "payload"), "") << "emptied: its memory goes";
  EXPECT_EQ(call({"XLEN", stream}).integer, 0) << "both entries acknowledged and deleted";
  EXPECT_EQ(call({"EXISTS", job(other)}).integer, 0) << "an unknown job is not created";
  EXPECT_GT(call({"PTTL", job(id)}).integer, 0);
  EXPECT_EQ(field(stats, "mean_run_us"), "2000") << "only the job that ran moves the mean";

  const std::vector<finish_result> again = decode_finish(
      finish({id, id}, {{"", "-1", "final", "2", "state", "error"}, {"", "-1", "final", "2", "state", "error"}}), 2);
  EXPECT_EQ(again, (std::vector<finish_result>{finish_result::duplicate, finish_result::duplicate}));
  EXPECT_EQ(field(stats, "duplicate_outcomes"), "2");
  EXPECT_EQ(field(job(id), "state"), "ok");

  const std::string third = new_job_id();
  enqueue(third);
  decode_finish(finish({third}, {{"", "3600", "final", "2", "state", "ok"}}), 1);
  EXPECT_EQ(field(stats, "mean_run_us"), "2100") << "1/16 of the way from 2000 to 3600";
  EXPECT_EQ(field(stats, "finished:ok"), "2") << "the fleet's totals: each first outcome once";
  EXPECT_EQ(field(stats, "finished:error"), "1") << "duplicates not among them";

  const std::string late = new_job_id();
  enqueue(late);
  decode_finish(finish({late}, {{"", "-1", "final", "4", "state", "deadline_exceeded", "stage", "queue"}}), 1);
  EXPECT_EQ(field(stats, "expired:queue"), "1") << "an expiry by its stage";
  EXPECT_EQ(field(stats, "mean_run_us"), "2100") << "it did not run";
}

TEST_F(LuaScript, CancelFinishesAQueuedJobAndMarksARunningOne) {
  const std::string queued = new_job_id(), running = new_job_id();
  enqueue(queued);
  enqueue(running);
  call(job_hash(job(running)).state(job_state::running));
  const auto cancel = [&](const std::string& id) {
    return decode_cancel(eval(cancel_script, {stream, job(id), delayed}, {group, "60000"}));
  };
  EXPECT_EQ(cancel(queued), cancel_reply::cancelled);
  EXPECT_EQ(field(job(queued), "state"), "cancelled");
  EXPECT_EQ(cancel(queued), cancel_reply::finished);
  EXPECT_EQ(cancel(running), cancel_reply::marked);
  EXPECT_EQ(field(job(running), "cancel_requested"), "1");
  EXPECT_EQ(call({"XLEN", stream}).integer, 1);
  EXPECT_EQ(cancel(new_job_id()), cancel_reply::unknown);
}

TEST_F(LuaScript, StartRunsAHeldJobOnceAndDeadLettersOneStartedTooOften) {
  const std::string id = new_job_id(), mine = new_job_id(), theirs = new_job_id();
  const std::string entry = enqueue(id, "body");
  const std::string mine_entry = enqueue(mine);
  deliver("c1", 2);
  const std::string theirs_entry = enqueue(theirs);
  deliver("c2", 1);
  // {entry, job id, token} per job, for consumer c1.
  const auto start = [&](const std::string& max, const std::vector<std::vector<std::string>>& jobs) {
    std::vector<std::string> keys{stream, dead, stats}, args{group, "c1", max, "60000", "600000", "100"};
    for (const auto& j : jobs) {
      keys.push_back(job(j[1]));
      args.insert(args.end(), j.begin(), j.end());
    }
    return eval(start_script, keys, args);
  };
  const redis_reply run = start("2", {{entry, id, "life-1/" + entry},
                                      {theirs_entry, theirs, "life-1/" + theirs_entry},
                                      {mine_entry, mine, "life-1/" + mine_entry}});
  ASSERT_TRUE(run.is_array());
  ASSERT_EQ(run.elements.size(), 5u);
  EXPECT_TRUE(run.elements[0].is_string() && run.elements[1].is_string());
  ASSERT_EQ(run.elements[2].elements.size(), 15u);
  EXPECT_TRUE(run.elements[2].elements[1].is_integer());
  const start_batch_reply b = decode_start(run, 3);
  EXPECT_GT(b.broker_now_us, 0);
  const job_queue::start_answer& a = b.jobs[0];
  EXPECT_EQ(a.v, job_queue::start_answer::verdict::run);
  EXPECT_EQ(a.deliveries, 1u);
  EXPECT_EQ(a.handler, "echo");
  EXPECT_EQ(a.payload, "body");
  EXPECT_EQ(a.content_type, "text/plain");
  EXPECT_EQ(field(job(id), "start_token"), "life-1/" + entry);
  EXPECT_EQ(b.jobs[1].v, job_queue::start_answer::verdict::not_owner) << "delivered to c2";
  EXPECT_EQ(field(job(theirs), "state"), "queued") << "not ours: untouched";
  EXPECT_EQ(b.jobs[2].v, job_queue::start_answer::verdict::run) << "judged on its own, whatever the one before";

  const start_batch_reply dead_lettered = decode_start(start("1", {{entry, id, "life-2/" + entry}}), 1);
  EXPECT_EQ(dead_lettered.jobs[0].v, job_queue::start_answer::verdict::dead);
  EXPECT_EQ(dead_lettered.jobs[0].deliveries, 1u);
  EXPECT_EQ(field(job(id), "state"), "dead");
  EXPECT_EQ(call({"XLEN", dead}).integer, 1);
  EXPECT_EQ(field(stats, "finished:dead"), "1") << "in the fleet's totals";
}

// The contract the design review found stale: a renewal answers eleven elements.
TEST_F(LuaScript, RenewAnswersTwelveElementsOrFenced) {
  const std::string a = new_job_id(), b = new_job_id(), c = new_job_id(), gone = new_job_id();
  const std::string ea = enqueue(a), eb = enqueue(b);
  enqueue(c);
  deliver("c1", 2);
  call(job_hash(job(b)).set(job_field::cancel_requested, 1));
  call({"HSET", stats, "mean_run_us", "1500.5"});
  call({"ZADD", delayed, "1", new_job_id()});
  const redis_reply r = eval(renew_script, {lease, slots, stream, stats, delayed, paused, job(a), job(b), job(gone)},
                             {group, "c1", "tok", "1", "30000", "4", ea, eb, "0-1"});
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements.size(), 12u);
  EXPECT_TRUE(r.elements[8].is_integer() && r.elements[9].is_integer() && r.elements[10].is_integer());
  EXPECT_EQ(r.elements[0].str, "ok");
  EXPECT_TRUE(r.elements[1].is_array() && r.elements[2].is_array() && r.elements[7].is_array());
  EXPECT_TRUE(r.elements[3].is_string() && r.elements[4].is_string());
  EXPECT_TRUE(r.elements[5].is_integer() && r.elements[6].is_integer());
  const renew_reply ok = decode_renew(r);
  EXPECT_FALSE(ok.fenced);
  EXPECT_EQ(ok.marked, std::vector<std::string>{eb});
  EXPECT_EQ(ok.lost, std::vector<std::string>{"0-1"});
  EXPECT_TRUE(ok.deleted.empty());
  EXPECT_EQ(ok.backlog, 1);
  EXPECT_EQ(ok.pending, 2);
  EXPECT_GT(ok.broker_now_us, 0);
  EXPECT_EQ(call({"GET", lease}).str, "tok:1");
  EXPECT_EQ(field(slots, "c1").rfind("4:", 0), 0u) << field(slots, "c1");
  EXPECT_EQ(ok.mean_run, 1500us) << "floored";
  EXPECT_EQ(ok.live_slots, 4) << "its own, just renewed";
  EXPECT_EQ(ok.scheduled, 1);
  EXPECT_FALSE(ok.paused);

  call({"XDEL", stream, ea});  // behind the daemon's back: the loss alarm
  const renew_reply lost_data = decode_renew(eval(renew_script, {lease, slots, stream, stats, delayed, paused, job(a)},
                                                  {group, "c1", "tok", "2", "30000", "4", ea}));
  EXPECT_EQ(lost_data.deleted, std::vector<std::string>{ea});
  EXPECT_EQ(call({"GET", lease}).str, "tok:2");
  call({"SET", paused, "1733400000123"});
  EXPECT_TRUE(decode_renew(eval(renew_script, {lease, slots, stream, stats, delayed, paused},
                                {group, "c1", "tok", "3", "30000", "4"}))
                  .paused)
      << "a paused queue: its consumers stop reading";
  call({"DEL", paused});

  const redis_reply fenced = eval(renew_script, {lease, slots, stream, stats, delayed, paused},
                                  {group, "c1", "other", "1", "30000", "4"});
  ASSERT_TRUE(fenced.is_array());
  ASSERT_EQ(fenced.elements.size(), 1u);
  EXPECT_TRUE(decode_renew(fenced).fenced);
  EXPECT_EQ(call({"GET", lease}).str, "tok:3") << "nothing written";
}

TEST_F(LuaScript, AJobsRetryPolicyReachesTheConsumerWholeJitterIncluded) {
  const std::string fixed = new_job_id(), jittered = new_job_id();
  const enqueue_batch_reply r = enqueue_batch(
      {{.id = fixed,
        .max_attempts = "4",
        .retry_base_us = "2000000",
        .retry_cap_us = "2000000",
        .retry_jitter = "none"},
       {.id = jittered, .max_attempts = "2", .retry_base_us = "100000", .retry_cap_us = "800000"}});
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(field(job(fixed), "retry_jitter"), "none");
  deliver("c1", 2);
  const auto start = [&](const std::string& id, const std::string& entry) {
    return decode_start(eval(start_script, {stream, dead, stats, job(id)},
                             {group, "c1", "5", "60000", "600000", "100", entry, id, "life-1/" + entry}),
                        1)
        .jobs.at(0);
  };
  const job_queue::start_answer a = start(fixed, r.jobs[0].id), b = start(jittered, r.jobs[1].id);
  ASSERT_EQ(a.v, job_queue::start_answer::verdict::run);
  EXPECT_EQ(a.retry.max_attempts, 4);
  EXPECT_EQ(a.retry.base, 2s);
  EXPECT_EQ(a.retry.cap, 2s);
  EXPECT_FALSE(a.retry.jitter) << "a fixed backoff stays fixed on the consumer that settles it";
  ASSERT_EQ(b.v, job_queue::start_answer::verdict::run);
  EXPECT_EQ(b.retry.cap, 800ms);
  EXPECT_TRUE(b.retry.jitter);
}

TEST_F(LuaScript, HandBackUncountsThisLifesStartsAndMakesTheEntriesIdle) {
  const std::string a = new_job_id(), b = new_job_id();
  const std::string ea = enqueue(a), eb = enqueue(b);
  deliver("c1", 2);
  call(job_hash(job(a)).set(job_field::starts, "1700000000000 c0\n"));  // a start of an earlier delivery
  ASSERT_EQ(decode_start(eval(start_script, {stream, dead, stats, job(a)},
                              {group, "c1", "5", "60000", "600000", "100", ea, a, "life-1/" + ea}),
                         1)
                .jobs[0]
                .v,
            job_queue::start_answer::verdict::run);
  const redis_reply r = eval(hand_back_script, {stream, job(a), job(b), job(new_job_id())},
                             {group, "c1", "100000000000", "life-1", ea, eb, "0-1"});
  ASSERT_TRUE(r.is_integer());
  EXPECT_EQ(decode_hand_back(r), 2u) << "0-1 was not held";
  EXPECT_EQ(field(job(a), "state"), "queued");
  EXPECT_EQ(field(job(a), "deliveries"), "0");
  EXPECT_EQ(call({"HEXISTS", job(a), "start_token"}).integer, 0);
  EXPECT_EQ(field(job(a), "starts"), "1700000000000 c0\n") << "its own start off the timeline, the earlier kept";
  EXPECT_EQ(call({"HEXISTS", job(a), "started_ms"}).integer, 0);
  const redis_reply pending = call({"XPENDING", stream, group, "-", "+", "10", "c1"});
  ASSERT_EQ(pending.elements.size(), 2u);
  for (const redis_reply& p : pending.elements) EXPECT_GE(p.elements[2].integer, 100000000000LL);
}

TEST_F(LuaScript, ReleaseDropsTheLeaseAndSlotsOnlyWithItsToken) {
  call({"SET", lease, "tok:3"});
  call({"HSET", slots, "c1", "4:1"});
  const redis_reply other = eval(release_script, {lease, slots}, {"c1", "other"});
  ASSERT_TRUE(other.is_integer());
  EXPECT_FALSE(decode_release(other));
  EXPECT_EQ(call({"GET", lease}).str, "tok:3");
  EXPECT_TRUE(decode_release(eval(release_script, {lease, slots}, {"c1", "tok"})));
  EXPECT_EQ(call({"EXISTS", lease}).integer, 0);
  EXPECT_EQ(call({"HEXISTS", slots, "c1"}).integer, 0);
}

// Which error replies the outcome writer may give up on for one outcome:
// not the broker's passing states, which refuse every write alike.
TEST(RefusalIsLasting, AScriptsOwnErrorsButNotTheBrokersPassingStates) {
  for (const char* lasting : {"WRONGTYPE Operation against a key holding the wrong kind of value script: 1a2b",
                              "ERR user_script:12: Script attempted to access a non local key",
                              "ERR Error running script (call to f_1a2b): @user_script:3: bad argument"}) {
    EXPECT_TRUE(refusal_is_lasting(lasting)) << lasting;
  }
  for (const char* passing :
       {"OOM command not allowed when used memory > 'maxmemory'.",
        "ERR Error running script: @user_script:9: OOM command not allowed when used memory",
        "BUSY Redis is busy running a script.", "LOADING Redis is loading the dataset in memory",
        "READONLY You can't write against a read only replica.", "MASTERDOWN Link with MASTER is down",
        "NOREPLICAS Not enough good replicas to write.", "TRYAGAIN Multiple keys request during rehashing",
        "CLUSTERDOWN The cluster is down", "MOVED 3999 127.0.0.1:6381", "NOSCRIPT No matching script."}) {
    EXPECT_FALSE(refusal_is_lasting(passing)) << passing;
  }
}

}  // namespace
}  // namespace hourglass::fleet::testing
