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
#include "redis_server.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;
using namespace hourglass::fleet::detail;

// ---- replies built by hand ----

redis_reply nil() { return {}; }
redis_reply str(std::string s) {
  redis_reply r;
  r.kind = redis_reply::type::string;
  r.str = std::move(s);
  return r;
}
redis_reply status_reply(std::string s) {
  redis_reply r = str(std::move(s));
  r.kind = redis_reply::type::status;
  return r;
}
redis_reply err(std::string s) {
  redis_reply r = str(std::move(s));
  r.kind = redis_reply::type::error;
  return r;
}
redis_reply num(long long n) {
  redis_reply r;
  r.kind = redis_reply::type::integer;
  r.integer = n;
  return r;
}
redis_reply arr(std::vector<redis_reply> e) {
  redis_reply r;
  r.kind = redis_reply::type::array;
  r.elements = std::move(e);
  return r;
}
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

TEST(ScriptReplies, SnapshotReadsTheCountsAndThePriorJob) {
  struct row {
    const char* what;
    redis_reply reply;
    std::uint64_t backlog;
    std::chrono::microseconds mean_run;
    std::uint64_t live_slots;
    std::string prior_id;
  };
  const std::vector<row> rows{
      {"counts, no prior job", arr({num(3), num(1500), num(2), str("")}), 3, 1500us, 2, ""},
      {"a prior job", arr({num(7), num(10), num(1), str("ab12")}), 7, 10us, 1, "ab12"},
      {"negative counts read as 0", arr({num(-2), num(-5), num(-1), str("")}), 0, 0us, 0, ""},
      {"a count that is not an integer reads as 0", arr({str("3"), num(1), num(1), str("")}), 0, 1us, 1, ""},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.what);
    const snapshot_reply s = decode_snapshot(r.reply);
    EXPECT_EQ(s.backlog, r.backlog);
    EXPECT_EQ(s.mean_run, r.mean_run);
    EXPECT_EQ(s.live_slots, r.live_slots);
    EXPECT_EQ(s.prior_id, r.prior_id);
  }
}

TEST(ScriptReplies, EnqueueReadsItsVerdictAndId) {
  using kind = enqueue_reply::kind;
  struct row {
    const char* what;
    redis_reply reply;
    kind verdict;
    std::string id;
  };
  const std::vector<row> rows{
      {"accepted", ids({"accepted", "1700000000000-0"}), kind::accepted, "1700000000000-0"},
      {"duplicate", ids({"duplicate", "ab12"}), kind::duplicate, "ab12"},
      {"nostream", ids({"nostream", ""}), kind::nostream, ""},
      {"any other verdict reads as accepted", ids({"what", "1-0"}), kind::accepted, "1-0"},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.what);
    const enqueue_reply e = decode_enqueue(r.reply);
    EXPECT_EQ(e.verdict, r.verdict);
    EXPECT_EQ(e.id, r.id);
  }
}

TEST(ScriptReplies, FinishCancelAndReleaseReadTheirStatusAndNeverThrow) {
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
  for (std::size_t i = 0; i < finishes.size(); ++i) {
    SCOPED_TRACE("finish row " + std::to_string(i));
    EXPECT_EQ(decode_finish(finishes[i].reply), finishes[i].result);
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

TEST(ScriptReplies, StartReadsItsVerdictTheBrokersTimeAndTheJob) {
  using verdict = start_reply::verdict;
  struct row {
    const char* what;
    redis_reply reply;
    verdict v;
    unsigned deliveries;
    std::string payload;
  };
  const auto short_reply = [](const char* v, long long n) { return arr({str(v), time_s, time_us, num(n)}); };
  const std::vector<row> rows{
      {"run", arr({str("run"), time_s, time_us, num(2), str("echo"), str("body"), str("text/plain"), str("k")}),
       verdict::run, 2, "body"},
      {"not_owner", short_reply("not_owner", 0), verdict::not_owner, 0, ""},
      {"finished", short_reply("finished", 0), verdict::finished, 0, ""},
      {"cancelled", short_reply("cancelled", 0), verdict::cancelled, 0, ""},
      {"gone", short_reply("gone", 0), verdict::gone, 0, ""},
      {"dead", short_reply("dead", 3), verdict::dead, 3, ""},
      {"an unknown verdict reads as gone", short_reply("what", 0), verdict::gone, 0, ""},
      {"negative deliveries read as 0", short_reply("dead", -1), verdict::dead, 0, ""},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.what);
    const start_reply a = decode_start(r.reply);
    EXPECT_EQ(a.v, r.v);
    EXPECT_EQ(a.broker_now_us, time_as_us);
    EXPECT_EQ(a.deliveries, r.deliveries);
    EXPECT_EQ(a.payload, r.payload);
  }
  const start_reply run = decode_start(rows[0].reply);
  EXPECT_EQ(run.handler, "echo");
  EXPECT_EQ(run.content_type, "text/plain");
  EXPECT_EQ(run.idempotency_key, "k");
}

TEST(ScriptReplies, RenewReadsFencedOrItsEightElements) {
  const renew_reply fenced = decode_renew(arr({str("fenced")}));
  EXPECT_TRUE(fenced.fenced);
  EXPECT_TRUE(fenced.marked.empty() && fenced.lost.empty() && fenced.deleted.empty());

  const renew_reply ok = decode_renew(
      arr({str("ok"), ids({"1-0"}), ids({"2-0", "3-0"}), time_s, time_us, num(5), num(4), ids({"4-0"})}));
  EXPECT_FALSE(ok.fenced);
  EXPECT_EQ(ok.marked, std::vector<std::string>{"1-0"});
  EXPECT_EQ(ok.lost, (std::vector<std::string>{"2-0", "3-0"}));
  EXPECT_EQ(ok.broker_now_us, time_as_us);
  EXPECT_EQ(ok.backlog, 5);
  EXPECT_EQ(ok.pending, 4);
  EXPECT_EQ(ok.deleted, std::vector<std::string>{"4-0"});

  const renew_reply negative = decode_renew(
      arr({str("ok"), ids({}), ids({}), time_s, time_us, num(-1), num(-3), ids({})}));
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
      {"snapshot: nil", [] { decode_snapshot(nil()); }, "redis: admission snapshot" + unexpected},
      {"snapshot: three elements",
       [] {
         decode_snapshot(arr({num(1), num(1), num(1)}));
       },
       "redis: admission snapshot" + unexpected},
      {"snapshot: five elements",
       [] {
         decode_snapshot(arr({num(1), num(1), num(1), str(""), str("")}));
       },
       "redis: admission snapshot" + unexpected},
      {"snapshot: an error reply", [] { decode_snapshot(err("ERR boom")); }, "redis: admission snapshot: ERR boom"},
      {"enqueue: one element", [] { decode_enqueue(ids({"accepted"})); }, "redis: enqueue" + unexpected},
      {"enqueue: a string", [] { decode_enqueue(str("accepted")); }, "redis: enqueue" + unexpected},
      {"enqueue: an error reply", [] { decode_enqueue(err("OOM no")); }, "redis: enqueue: OOM no"},
      {"start: nil", [] { decode_start(nil()); }, "redis: start" + unexpected},
      {"start: three elements",
       [] {
         decode_start(arr({str("gone"), time_s, time_us}));
       },
       "redis: start" + unexpected},
      {"start: run without the job",
       [] {
         decode_start(arr({str("run"), time_s, time_us, num(1)}));
       },
       "redis: start" + unexpected},
      {"start: seconds not a number",
       [] {
         decode_start(arr({str("gone"), str("x"), time_us, num(0)}));
       },
       "redis: TIME is not a time"},
      {"start: a million microseconds",
       [] {
         decode_start(arr({str("gone"), time_s, str("1000000"), num(0)}));
       },
       "redis: TIME is not a time"},
      {"renew: nil", [] { decode_renew(nil()); }, "redis: renew" + unexpected},
      {"renew: empty", [] { decode_renew(arr({})); }, "redis: renew" + unexpected},
      {"renew: seven elements (no deleted entries)",
       [] {
         decode_renew(arr({str("ok"), ids({}), ids({}), time_s, time_us, num(0), num(0)}));
       },
       "redis: renew" + unexpected},
      {"renew: TIME not a time",
       [] {
         decode_renew(arr({str("ok"), ids({}), ids({}), str("-1"), time_us, num(0), num(0), ids({})}));
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

// ---- each script's text through EVAL, on the keys of queue "t" ----

struct LuaScript : ::testing::Test {
  LuaScript() { call({"XGROUP", "CREATE", stream, group, "0", "MKSTREAM"}); }

  redis_reply call(std::vector<std::string> args) { return redis.call(context(), std::move(args)); }
  // What `redis-cli --eval fleet/lua/<name>.lua KEYS... , ARGV...` sends.
  redis_reply eval(std::string_view script, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args) {
    std::vector<std::string> cmd{"EVAL", std::string(script), std::to_string(keys.size())};
    cmd.insert(cmd.end(), keys.begin(), keys.end());
    cmd.insert(cmd.end(), args.begin(), args.end());
    return call(std::move(cmd));
  }
  static std::string job(const std::string& id) { return "hg:{t}:job:" + id; }
  // A job as enqueue adds it (no idempotency key): its stream entry id.
  std::string enqueue(const std::string& id, const std::string& payload = "p") {
    const redis_reply r = eval(enqueue_script, {stream, job(id), "hg:{t}:idem:"},
                               {id, "echo", payload, "text/plain", "-1", "0", "0", "", "60000"});
    return decode_enqueue(r).id;
  }
  // Delivers the next `n` entries to `consumer`.
  void deliver(const std::string& consumer, int n) {
    call({"XREADGROUP", "GROUP", group, consumer, "COUNT", std::to_string(n), "STREAMS", stream, ">"});
  }
  std::string field(const std::string& key, const std::string& name) { return call({"HGET", key, name}).str; }

  const std::string group = "hourglass";
  const std::string stream = "hg:{t}:stream", slots = "hg:{t}:slots", stats = "hg:{t}:stats";
  const std::string dead = "hg:{t}:dead", lease = "hg:{t}:lease:c1";
  redis_server server;
  io_thread io;
  redis_connection redis{io.io, server.endpoint()};
};

TEST_F(LuaScript, SnapshotCountsTheBacklogTheMeanRunTimeAndTheLiveSlots) {
  for (int i = 0; i < 3; ++i) enqueue(new_job_id());
  deliver("c1", 1);
  call({"HSET", stats, "mean_run_us", "1500.75"});
  const long long now_ms = std::stoll(call({"TIME"}).elements[0].str) * 1000;
  call({"HSET", slots, "a", "2:" + std::to_string(now_ms + 600000), "b", "5:" + std::to_string(now_ms - 1000), "c",
        "garbage"});
  call({"SET", "hg:{t}:idem:k", "ab12"});
  const redis_reply r = eval(snapshot_script, {stream, slots, stats, "hg:{t}:idem:k"}, {group, "0"});
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements.size(), 4u);
  EXPECT_TRUE(r.elements[0].is_integer() && r.elements[1].is_integer() && r.elements[2].is_integer());
  EXPECT_TRUE(r.elements[3].is_string());
  const snapshot_reply s = decode_snapshot(r);
  EXPECT_EQ(s.backlog, 2u) << "3 entries, 1 of them delivered";
  EXPECT_EQ(s.mean_run, 1500us) << "floored";
  EXPECT_EQ(s.live_slots, 2u) << "b's lease expired, c's value is not a lease";
  EXPECT_EQ(s.prior_id, "") << "the key is read only when the job has one";
  EXPECT_EQ(decode_snapshot(eval(snapshot_script, {stream, slots, stats, "hg:{t}:idem:k"}, {group, "1"})).prior_id,
            "ab12");
}

TEST_F(LuaScript, EnqueueAddsTheEntryTheJobAndItsKeyOrAnswersTheFirstJob) {
  const std::string id = new_job_id(), idem = "hg:{t}:idem:order-1";
  const std::vector<std::string> args{id, "echo", "body", "text/plain", "-1", "0", "1", "order-1", "60000"};
  const redis_reply r = eval(enqueue_script, {stream, job(id), idem}, args);
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements.size(), 2u);
  const enqueue_reply added = decode_enqueue(r);
  EXPECT_EQ(added.verdict, enqueue_reply::kind::accepted);
  EXPECT_TRUE(parse_stream_id(added.id)) << added.id;
  EXPECT_EQ(field(job(id), "entry"), added.id);
  EXPECT_EQ(field(job(id), "state"), "queued");
  EXPECT_EQ(field(job(id), "deliveries"), "0");
  EXPECT_EQ(call({"GET", idem}).str, id);

  const std::string second = new_job_id();
  std::vector<std::string> again = args;
  again[0] = second;
  const enqueue_reply dup = decode_enqueue(eval(enqueue_script, {stream, job(second), idem}, again));
  EXPECT_EQ(dup.verdict, enqueue_reply::kind::duplicate);
  EXPECT_EQ(dup.id, id);
  EXPECT_EQ(call({"EXISTS", job(second)}).integer, 0);

  call({"DEL", stream});
  again[6] = "0";
  const enqueue_reply none = decode_enqueue(eval(enqueue_script, {stream, job(second), idem}, again));
  EXPECT_EQ(none.verdict, enqueue_reply::kind::nostream);
  EXPECT_EQ(call({"EXISTS", stream}).integer, 0) << "never recreated without its group";
}

TEST_F(LuaScript, FinishRecordsTheFirstOutcomeOnly) {
  const std::string id = new_job_id();
  enqueue(id);
  const std::vector<std::string> keys{stream, job(id), stats};
  const redis_reply first = eval(finish_script, keys, {group, "60000", "2000", "state", "ok", "result", "done"});
  EXPECT_TRUE(first.is_string());
  EXPECT_EQ(decode_finish(first), finish_result::first);
  EXPECT_EQ(field(job(id), "result"), "done");
  EXPECT_EQ(call({"HEXISTS", job(id), "payload"}).integer, 0);
  EXPECT_EQ(call({"XLEN", stream}).integer, 0);
  EXPECT_GT(call({"PTTL", job(id)}).integer, 0);
  EXPECT_EQ(field(stats, "mean_run_us"), "2000");
  EXPECT_EQ(decode_finish(eval(finish_script, keys, {group, "60000", "-1", "state", "error"})),
            finish_result::duplicate);
  EXPECT_EQ(field(stats, "duplicate_outcomes"), "1");
  EXPECT_EQ(field(job(id), "state"), "ok");
  const std::string other = new_job_id();
  EXPECT_EQ(decode_finish(eval(finish_script, {stream, job(other), stats}, {group, "60000", "-1", "state", "ok"})),
            finish_result::unknown);
}

TEST_F(LuaScript, CancelFinishesAQueuedJobAndMarksARunningOne) {
  const std::string queued = new_job_id(), running = new_job_id();
  enqueue(queued);
  enqueue(running);
  call({"HSET", job(running), "state", "running"});
  const auto cancel = [&](const std::string& id) {
    return decode_cancel(eval(cancel_script, {stream, job(id)}, {group, "60000"}));
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
  const std::string id = new_job_id();
  const std::string entry = enqueue(id, "body");
  deliver("c1", 1);
  const std::vector<std::string> keys{stream, job(id), dead};
  const auto args = [&](const std::string& consumer, const std::string& max, const std::string& token) {
    return std::vector<std::string>{group, entry, consumer, max, id, "60000", token};
  };
  const redis_reply run = eval(start_script, keys, args("c1", "2", "life-1/" + entry));
  ASSERT_TRUE(run.is_array());
  ASSERT_EQ(run.elements.size(), 8u);
  EXPECT_TRUE(run.elements[1].is_string() && run.elements[2].is_string() && run.elements[3].is_integer());
  const start_reply a = decode_start(run);
  EXPECT_EQ(a.v, start_reply::verdict::run);
  EXPECT_EQ(a.deliveries, 1u);
  EXPECT_EQ(a.handler, "echo");
  EXPECT_EQ(a.payload, "body");
  EXPECT_EQ(a.content_type, "text/plain");
  EXPECT_GT(a.broker_now_us, 0);
  EXPECT_EQ(field(job(id), "start_token"), "life-1/" + entry);

  const redis_reply not_owner = eval(start_script, keys, args("c2", "2", "life-1/" + entry));
  ASSERT_EQ(not_owner.elements.size(), 4u);
  EXPECT_EQ(decode_start(not_owner).v, start_reply::verdict::not_owner);

  const start_reply dead_lettered = decode_start(eval(start_script, keys, args("c1", "1", "life-2/" + entry)));
  EXPECT_EQ(dead_lettered.v, start_reply::verdict::dead);
  EXPECT_EQ(dead_lettered.deliveries, 1u);
  EXPECT_EQ(field(job(id), "state"), "dead");
  EXPECT_EQ(call({"XLEN", dead}).integer, 1);
}

// The contract the design review found stale: a renewal answers eight elements.
TEST_F(LuaScript, RenewAnswersEightElementsOrFenced) {
  const std::string a = new_job_id(), b = new_job_id(), c = new_job_id(), gone = new_job_id();
  const std::string ea = enqueue(a), eb = enqueue(b);
  enqueue(c);
  deliver("c1", 2);
  call({"HSET", job(b), "cancel_requested", "1"});
  const redis_reply r = eval(renew_script, {lease, slots, stream, job(a), job(b), job(gone)},
                             {group, "c1", "tok", "1", "30000", "4", ea, eb, "0-1"});
  ASSERT_TRUE(r.is_array());
  ASSERT_EQ(r.elements.size(), 8u);
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

  call({"XDEL", stream, ea});  // behind the daemon's back: the loss alarm
  const renew_reply lost_data = decode_renew(
      eval(renew_script, {lease, slots, stream, job(a)}, {group, "c1", "tok", "2", "30000", "4", ea}));
  EXPECT_EQ(lost_data.deleted, std::vector<std::string>{ea});
  EXPECT_EQ(call({"GET", lease}).str, "tok:2");

  const redis_reply fenced = eval(renew_script, {lease, slots, stream}, {group, "c1", "other", "1", "30000", "4"});
  ASSERT_TRUE(fenced.is_array());
  ASSERT_EQ(fenced.elements.size(), 1u);
  EXPECT_TRUE(decode_renew(fenced).fenced);
  EXPECT_EQ(call({"GET", lease}).str, "tok:2") << "nothing written";
}

TEST_F(LuaScript, HandBackUncountsThisLifesStartsAndMakesTheEntriesIdle) {
  const std::string a = new_job_id(), b = new_job_id();
  const std::string ea = enqueue(a), eb = enqueue(b);
  deliver("c1", 2);
  ASSERT_EQ(
      decode_start(eval(start_script, {stream, job(a), dead}, {group, ea, "c1", "5", a, "60000", "life-1/" + ea})).v,
      start_reply::verdict::run);
  const redis_reply r = eval(hand_back_script, {stream, job(a), job(b), job(new_job_id())},
                             {group, "c1", "100000000000", "life-1", ea, eb, "0-1"});
  ASSERT_TRUE(r.is_integer());
  EXPECT_EQ(decode_hand_back(r), 2u) << "0-1 was not held";
  EXPECT_EQ(field(job(a), "state"), "queued");
  EXPECT_EQ(field(job(a), "deliveries"), "0");
  EXPECT_EQ(call({"HEXISTS", job(a), "start_token"}).integer, 0);
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

}  // namespace
}  // namespace hourglass::fleet::testing
