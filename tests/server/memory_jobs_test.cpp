// The memory job store's table and the job object, without a socket: every
// transition on an explicit `now`, cancellation through a real job_ref of an
// executor turned by hand, listing by state with a cursor, and the one
// renderer of the job object and its answers.
#include "stores/memory_jobs.hpp"
#include "http/job_endpoints.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/job_view.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

const time_point t0 = time_point{} + 1h;

std::string job_json_at(const async_record& r, time_point now) { return job_json(view_of(r, now)); }

async_outcome ended(status st) {
  async_outcome o;
  o.st = st;
  o.timings.queue_delay = 2ms;
  return o;
}

TEST(MemoryJobs, AJobGoesQueuedRunningFinishedAndExpiresAfterItsTtl) {
  auto store = std::make_unique<memory_jobs>(10, 200ms);
  const auto id = store->create("echo", t0);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->size(), 32u);
  EXPECT_EQ(store->find(*id, t0)->state, jobs::job_state::queued);
  EXPECT_EQ(store->find(*id, t0)->handler, "echo");
  store->submitted(*id, job_ref());
  store->started(*id, t0 + 5ms);
  EXPECT_EQ(store->find(*id, t0)->state, jobs::job_state::running);
  store->finish(*id, ended(status::ok()), t0 + 1s);
  const auto r = store->find(*id, t0 + 1s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, jobs::job_state::ok);
  EXPECT_EQ(r->st, status::ok());
  EXPECT_EQ(r->timings.queue_delay, 2ms);
  EXPECT_EQ(r->finished_at, t0 + 1s);
  EXPECT_EQ(r->started, t0 + 5ms) << "its timeline's start";
  EXPECT_TRUE(store->find(*id, t0 + 1s + 200ms - 1ns)) << "kept for the whole TTL";
  EXPECT_FALSE(store->find(*id, t0 + 1s + 200ms)) << "gone at the TTL";
  EXPECT_EQ(store->size(), 0u);
}

// A cancel that reached the run before its failed attempt asked for a
// retry: no retry, and the cause for the outcome the store then records
// (cancelled, as the fleet's finish records it; lifecycle.hpp).
TEST(MemoryJobs, ARetryOfAJobACancelReachedIsRefusedWithItsCause) {
  auto store = std::make_unique<memory_jobs>(10, 1s);
  const auto id = *store->create("flaky", t0, 3);
  store->submitted(id, job_ref());
  store->started(id, t0);
  ASSERT_TRUE(store->cancel(id, t0, cancel_cause::parent));
  std::optional<cancel_cause> cancelled;
  EXPECT_FALSE(store->retry_scheduled(id, {status::error(), "upstream_down", "", 1ms}, t0 + 1s, &cancelled));
  EXPECT_EQ(cancelled, cancel_cause::parent);
  EXPECT_EQ(store->find(id, t0)->state, jobs::job_state::running) << "nothing changed: the caller records the outcome";

  const auto other = *store->create("flaky", t0, 3);
  store->submitted(other, job_ref());
  store->started(other, t0);
  std::optional<cancel_cause> none;
  EXPECT_TRUE(store->retry_scheduled(other, {status::error(), "upstream_down", "", 1ms}, t0 + 1s, &none));
  EXPECT_FALSE(none);
}

TEST(MemoryJobs, OneOutcomeOnly) {
  auto store = std::make_unique<memory_jobs>(10, 1s);
  const auto id = *store->create("echo", t0);
  store->finish(id, ended(status::ok()), t0);
  store->finish(id, ended(status::cancelled(cancel_cause::requested)), t0 + 1ms);
  EXPECT_EQ(store->find(id, t0 + 1ms)->st, status::ok());
  EXPECT_EQ(store->find(id, t0 + 1ms)->finished_at, t0);
  store->started(id, t0 + 1ms);
  EXPECT_EQ(store->find(id, t0 + 1ms)->state, jobs::job_state::ok) << "a finished job does not start";
}

TEST(MemoryJobs, AnIdempotencyKeyNamesItsJobForItsTtlOrWhileTheJobIsHeld) {
  memory_jobs store(10, 1s, {.idempotency_ttl = 5s});
  const auto create = [&](std::string_view key, time_point now, bool& dup) {
    dup = false;
    return store.create("echo", now, 1, std::nullopt, duration::max(), time_point::max(), {}, nullptr, key, &dup);
  };
  bool dup = false;
  const auto first = create("k", t0, dup);
  ASSERT_TRUE(first);
  EXPECT_FALSE(dup);
  EXPECT_EQ(create("k", t0 + 1s, dup), first);
  EXPECT_TRUE(dup) << "a repeat names the first job";
  EXPECT_EQ(store.size(), 1u);
  EXPECT_NE(create("other", t0 + 1s, dup), first);
  EXPECT_FALSE(dup);
  const auto later = create("k", t0 + 5s, dup);
  EXPECT_FALSE(dup) << "past its TTL the key names a new job";
  EXPECT_NE(later, first);
  // A key goes with its job: expired (its TTL after its outcome), the key names nothing.
  store.finish(*later, {.st = status::ok()}, t0 + 6s);
  EXPECT_FALSE(store.find(*later, t0 + 7s));
  EXPECT_NE(create("k", t0 + 7s, dup), later);
  EXPECT_FALSE(dup);
}

TEST(MemoryJobs, TheCountIsBoundedAndTheOldestFinishedJobMakesRoom) {
  auto store = std::make_unique<memory_jobs>(2, 1h);
  const auto a = *store->create("echo", t0);
  const auto b = *store->create("echo", t0);
  EXPECT_FALSE(store->create("echo", t0)) << "full, and nothing finished to evict";
  store->finish(b, ended(status::ok()), t0 + 1ms);
  store->finish(a, ended(status::ok()), t0 + 2ms);
  const auto c = store->create("echo", t0 + 3ms);
  ASSERT_TRUE(c);
  EXPECT_FALSE(store->find(b, t0 + 3ms)) << "the first to finish is evicted";
  EXPECT_TRUE(store->find(a, t0 + 3ms));
  EXPECT_EQ(store->size(), 2u);
}

TEST(MemoryJobs, AJobRefusedAtAdmissionIsRemovedWhenSubmitted) {
  auto store = std::make_unique<memory_jobs>(10, 1h);
  const auto full = *store->create("echo", t0);
  store->finish(full, ended(status::rejected(reject_reason::queue_full)), t0);
  const after_submit r = store->submitted(full, job_ref());
  ASSERT_TRUE(r.refused);
  EXPECT_EQ(*r.refused, status::rejected(reject_reason::queue_full));
  EXPECT_FALSE(store->find(full, t0));

  const auto late = *store->create("echo", t0);
  store->finish(late, ended(status::expired(expiry_stage::admission)), t0);
  EXPECT_TRUE(store->submitted(late, job_ref()).refused);

  const auto ran = *store->create("echo", t0);  // finished before submit() returned, but it ran
  store->finish(ran, ended(status::expired(expiry_stage::run)), t0);
  EXPECT_FALSE(store->submitted(ran, job_ref()).refused);
  EXPECT_TRUE(store->find(ran, t0));
}

TEST(MemoryJobs, ACancelBeforeSubmitIsAppliedBySubmitted) {
  auto store = std::make_unique<memory_jobs>(10, 1h);
  const auto id = *store->create("echo", t0);
  const auto r = store->cancel(id, t0);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->cancel_requested);
  EXPECT_EQ(r->state, jobs::job_state::queued);
  EXPECT_TRUE(store->submitted(id, job_ref()).cancel_now);
}

TEST(MemoryJobs, CancelReachesAQueuedJobThroughItsRef) {
  manual_clock clk;
  executor_options eo;
  eo.manual_mode = true;
  eo.clock = &clk;
  executor ex(eo);
  auto store = std::make_unique<memory_jobs>(10, 1h);
  const auto id = *store->create("echo", clk.now());
  bool ran = false;
  job_ref ref = ex.submit(
      job_options{},
      [&ran](const context&) {
        ran = true;
        return 1;
      },
      [&, id](job_result<int>&& r) noexcept { store->finish(id, ended(r.st), clk.now()); });
  EXPECT_FALSE(store->submitted(id, ref).cancel_now);
  const auto r = store->cancel(id, clk.now());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, jobs::job_state::cancelled) << "a queued job is cancelled on the spot";
  EXPECT_EQ(r->st, status::cancelled(cancel_cause::requested));
  ex.run_pending();
  EXPECT_FALSE(ran) << "and never runs";
  const auto again = store->cancel(id, clk.now());
  EXPECT_EQ(again->st, status::cancelled(cancel_cause::requested)) << "cancelling a finished job changes nothing";
}

TEST(MemoryJobs, TransitionsOfAnUnknownIdDoNothing) {
  auto store = std::make_unique<memory_jobs>(10, 1h);
  store->started("nope", t0);
  store->finish("nope", ended(status::ok()), t0);
  EXPECT_FALSE(store->submitted("nope", job_ref()).refused);
  EXPECT_FALSE(store->cancel("nope", t0));
  EXPECT_FALSE(store->find("nope", t0));
  EXPECT_EQ(store->size(), 0u);
}

TEST(JobView, QueuedRunningAndFinishedJobs) {
  async_record r;
  r.id = "abc";
  r.handler = "echo";
  r.created = t0;
  r.cancel_requested = true;
  const std::string queued = job_json_at(r, t0 + 5ms);
  EXPECT_EQ(support::string_member(queued, "state"), "queued");
  EXPECT_EQ(support::number_member(queued, "age_ms"), 5.0);
  EXPECT_NE(queued.find("\"cancel_requested\": true"), std::string::npos) << queued;

  r.state = jobs::job_state::deadline_exceeded;
  r.st = status::expired(expiry_stage::queue);
  r.timings.queue_delay = 7ms;
  const std::string expired = job_json_at(r, t0 + 9ms);
  EXPECT_EQ(support::string_member(expired, "state"), "deadline_exceeded");
  EXPECT_EQ(support::string_member(expired, "stage"), "queue");
  EXPECT_EQ(support::number_member(expired, "queued_ms"), 7.0);
  EXPECT_FALSE(support::number_member(expired, "run_ms")) << "it never ran";

  r.state = jobs::job_state::ok;
  r.st = status::ok();
  r.timings.ran = true;
  r.timings.run_time = 3ms;
  r.result = handler_result{std::string("\xff\x00", 2), "application/octet-stream"};
  const std::string ok = job_json_at(r, t0 + 9ms);
  EXPECT_EQ(support::string_member(ok, "state"), "ok");
  EXPECT_EQ(support::number_member(ok, "run_ms"), 3.0);
  EXPECT_EQ(support::string_member(ok, "result_base64"), "/wA=") << "bytes that are not UTF-8 are sent in base64";
  EXPECT_FALSE(support::string_member(ok, "result"));
}

TEST(MemoryJobs, ListingWalksEveryJobOnceByStateAcrossPages) {
  auto store = std::make_unique<memory_jobs>(100, 1h);
  std::set<std::string> queued, finished;
  for (int i = 0; i < 25; ++i) {
    const std::string id = *store->create("echo", t0);
    store->submitted(id, job_ref());
    if (i % 3 == 0) {
      store->finish(id, ended(status::ok()), t0);
      finished.insert(id);
    } else {
      queued.insert(id);
    }
  }
  const auto walk = [&](std::string_view state, std::size_t page_size) {
    std::vector<std::string> seen;
    std::string after;
    for (int pages = 0; pages < 100; ++pages) {
      const std::vector<async_record> page = store->list(state, after, page_size, t0);
      EXPECT_LE(page.size(), page_size);
      for (const async_record& r : page) seen.push_back(r.id);
      if (page.size() < page_size) break;
      after = page.back().id;
    }
    return seen;
  };
  const std::vector<std::string> q = walk("queued", 4);
  EXPECT_EQ(std::set<std::string>(q.begin(), q.end()), queued);
  EXPECT_EQ(q.size(), queued.size()) << "nobody twice";
  EXPECT_TRUE(std::is_sorted(q.begin(), q.end())) << "in id order, so the cursor is stable";
  const std::vector<std::string> f = walk("finished", 3);
  EXPECT_EQ(std::set<std::string>(f.begin(), f.end()), finished);
  EXPECT_EQ(walk("ok", 100).size(), finished.size()) << "an outcome's name filters too";
  EXPECT_EQ(walk("", 7).size(), 25u);
  EXPECT_TRUE(walk("running", 5).empty());
}

TEST(MemoryJobs, AJobCreatedOrFinishedMidWalkNeitherRepeatsNorHidesTheOthers) {
  auto store = std::make_unique<memory_jobs>(100, 1h);
  std::set<std::string> before;
  for (int i = 0; i < 10; ++i) before.insert(*store->create("echo", t0));
  std::vector<async_record> first = store->list("", "", 5, t0);
  ASSERT_EQ(first.size(), 5u);
  for (int i = 0; i < 10; ++i) store->create("echo", t0);    // arrivals mid-walk
  store->finish(*before.rbegin(), ended(status::ok()), t0);  // a move mid-walk
  std::vector<async_record> rest = store->list("", first.back().id, 100, t0);
  std::set<std::string> seen;
  for (const auto& r : first) EXPECT_TRUE(seen.insert(r.id).second);
  for (const auto& r : rest) EXPECT_TRUE(seen.insert(r.id).second) << "listed twice: " << r.id;
  for (const auto& id : before) EXPECT_EQ(seen.count(id), 1u) << "held throughout, so listed: " << id;
}

TEST(MemoryJobs, ExpiredJobsAreNotListed) {
  auto store = std::make_unique<memory_jobs>(10, 100ms);
  const std::string id = *store->create("echo", t0);
  store->finish(id, ended(status::ok()), t0);
  EXPECT_EQ(store->list("", "", 10, t0 + 99ms).size(), 1u);
  EXPECT_TRUE(store->list("", "", 10, t0 + 100ms).empty());
}

TEST(JobView, FleetFieldsAndTheDeadState) {
  job_view j;
  j.id = "0123";
  j.handler = "resize";
  j.state = "running";
  j.deliveries = 2;
  j.consumer = "host:8080";
  j.cancel_requested = true;
  const std::string running = job_json(j);
  EXPECT_EQ(support::number_member(running, "deliveries"), 2.0);
  EXPECT_EQ(support::string_member(running, "consumer"), "host:8080");
  EXPECT_NE(running.find("\"cancel_requested\": true"), std::string::npos) << running;
  EXPECT_FALSE(support::number_member(running, "age_ms")) << "the broker keeps no age";

  j.state = "dead";
  j.cause = "worker_died";
  j.queued_ms = 12.5;
  const std::string dead = job_json(j);
  EXPECT_EQ(support::string_member(dead, "cause"), "worker_died");
  EXPECT_EQ(support::number_member(dead, "queued_ms"), 12.5);
  EXPECT_EQ(dead.find("cancel_requested"), std::string::npos) << "a finished job answers with its outcome";
  EXPECT_EQ(dead.find("stage"), std::string::npos) << "a stage only for deadline_exceeded";
}

// A payload is shown bounded, as text when it is UTF-8 (a character the
// bound cuts left out whole), as base64 when not, and in a listing only by size.
TEST(JobView, APayloadIsShownBoundedAsTextOrBase64) {
  const std::string euro = "\xe2\x82\xac";  // three bytes
  struct row {
    const char* what;
    std::string payload;
    std::size_t shown;
  };
  const std::vector<row> rows{
      {"short text", "{\"ms\": 8000}", 12},
      {"empty", "", 0},
      {"long text", std::string(5000, 'a'), payload_shown_bytes},
      {"a character across the bound", std::string(payload_shown_bytes - 1, 'a') + euro, payload_shown_bytes - 1},
      {"a character ending on the bound", std::string(payload_shown_bytes - 3, 'a') + euro + "b", payload_shown_bytes},
      {"not UTF-8", std::string("\xff\xfe") + std::string(6000, 'x'), payload_shown_bytes},
      {"an invalid byte past the bound", std::string(5000, 'a') + "\xff", payload_shown_bytes},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.what);
    const payload_view p = shown_payload(r.payload, "application/json");
    EXPECT_EQ(p.bytes, r.payload.size());
    EXPECT_EQ(p.content_type, "application/json");
    EXPECT_EQ(p.shown, r.payload.substr(0, r.shown));
  }

  job_view j;
  j.id = "0123";
  j.handler = "resize";
  j.state = "dead";
  j.cause = "max_deliveries";
  j.payload = shown_payload("<img src=x onerror=alert(1)>\u2028\"", "text/html");
  const auto doc = support::parse_json(job_json(j));
  ASSERT_TRUE(doc.has_value());
  const boost::json::object& shown = doc->at("payload").as_object();
  EXPECT_EQ(shown.at("text").as_string(), "<img src=x onerror=alert(1)>\u2028\"") << "the JSON carries it exactly";
  EXPECT_EQ(shown.at("bytes").to_number<int>(), 32);
  EXPECT_EQ(shown.at("content_type").as_string(), "text/html");
  EXPECT_FALSE(shown.contains("truncated"));
  EXPECT_FALSE(doc->as_object().contains("payload_bytes"));

  j.payload = shown_payload(std::string("\x00\xff", 2) + std::string(5000, 'z'), "application/octet-stream");
  const auto binary = support::parse_json(job_json(j));
  ASSERT_TRUE(binary.has_value());
  const boost::json::object& b = binary->at("payload").as_object();
  EXPECT_FALSE(b.contains("text"));
  EXPECT_EQ(b.at("base64").as_string().size(), (payload_shown_bytes + 2) / 3 * 4) << "the bytes shown, encoded";
  EXPECT_EQ(b.at("truncated").as_bool(), true);
  const auto listed = support::parse_json(job_json(j, job_detail::listed));
  ASSERT_TRUE(listed.has_value());
  EXPECT_FALSE(listed->as_object().contains("payload")) << "a page of jobs carries no payloads";
  EXPECT_EQ(listed->at("payload_bytes").to_number<int>(), 5002);
}

TEST(JobView, AnswersCarryStatusServerTimingAndNoStore) {
  job_view j;
  j.id = "abc";
  j.handler = "echo";
  j.state = "queued";
  EXPECT_EQ(job_view_response(j, false).result_int(), 200);
  EXPECT_EQ(job_view_response(j, true).result_int(), 202) << "a DELETE asked a job still unfinished to stop";
  EXPECT_EQ(job_view_response(j, false)["Server-Timing"], "") << "nothing recorded yet";
  EXPECT_EQ(job_view_response(j, false)["Cache-Control"], "no-store");

  j.state = "ok";
  j.queued_ms = 1.5;
  j.run_ms = 2.25;
  const response done = job_view_response(j, true);
  EXPECT_EQ(done.result_int(), 200) << "DELETE of a finished job changes nothing";
  EXPECT_EQ(done["Server-Timing"], server_timing(j.timings()));
  EXPECT_EQ(j.timings().queue_delay, 1500us);
  EXPECT_EQ(j.timings().run_time, 2250us);

  job_view fresh;
  fresh.id = "0f";
  fresh.state = "queued";
  const response accepted = accepted_response(fresh, false);
  EXPECT_EQ(accepted.result_int(), 202);
  EXPECT_EQ(accepted["Location"], "/v1/jobs/0f");
  EXPECT_EQ(support::string_member(accepted.body(), "location"), "/v1/jobs/0f");
  EXPECT_EQ(accepted.body().find("duplicate"), std::string::npos);
  fresh.state = "ok";
  const response repeat = accepted_response(fresh, true);
  EXPECT_NE(repeat.body().find("\"duplicate\": true"), std::string::npos) << repeat.body();
  EXPECT_EQ(support::string_member(repeat.body(), "state"), "ok") << "a repeat says what the first job is now";
}

TEST(JobView, ExactMemoryTimingsSurviveMilliseconds) {
  async_record r;
  r.id = "x";
  r.state = jobs::job_state::ok;
  r.st = status::ok();
  r.timings.queue_delay = 1234567ns;
  r.timings.ran = true;
  r.timings.run_time = 7654321ns;
  const job_view v = view_of(r, t0);
  EXPECT_EQ(v.timings().queue_delay, 1234567ns);
  EXPECT_EQ(v.timings().run_time, 7654321ns);
}

}  // namespace
}  // namespace hourglass::server::detail
