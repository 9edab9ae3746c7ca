// The async job store and the async endpoints' JSON, without a socket: every
// transition on an explicit `now`, and cancellation through a real job_ref of
// an executor turned by hand.
#include <gtest/gtest.h>

#include "async_endpoints.hpp"
#include "async_store.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;

const time_point t0 = time_point{} + 1h;

async_outcome ended(status st) {
  async_outcome o;
  o.st = st;
  o.timings.queue_delay = 2ms;
  return o;
}

TEST(AsyncStore, AJobGoesQueuedRunningFinishedAndExpiresAfterItsTtl) {
  auto store = make_memory_store(10, 200ms);
  const auto id = store->create("echo", t0);
  ASSERT_TRUE(id);
  EXPECT_EQ(id->size(), 32u);
  EXPECT_EQ(store->find(*id, t0)->state, async_state::queued);
  EXPECT_EQ(store->find(*id, t0)->handler, "echo");
  store->submitted(*id, job_ref());
  store->started(*id);
  EXPECT_EQ(store->find(*id, t0)->state, async_state::running);
  store->finish(*id, ended(status::ok()), t0 + 1s);
  const auto r = store->find(*id, t0 + 1s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, async_state::finished);
  EXPECT_EQ(r->st, status::ok());
  EXPECT_EQ(r->timings.queue_delay, 2ms);
  EXPECT_EQ(r->finished_at, t0 + 1s);
  EXPECT_TRUE(store->find(*id, t0 + 1s + 200ms - 1ns)) << "kept for the whole TTL";
  EXPECT_FALSE(store->find(*id, t0 + 1s + 200ms)) << "gone at the TTL";
  EXPECT_EQ(store->size(), 0u);
}

TEST(AsyncStore, OneOutcomeOnly) {
  auto store = make_memory_store(10, 1s);
  const auto id = *store->create("echo", t0);
  store->finish(id, ended(status::ok()), t0);
  store->finish(id, ended(status::cancelled(cancel_cause::requested)), t0 + 1ms);
  EXPECT_EQ(store->find(id, t0 + 1ms)->st, status::ok());
  EXPECT_EQ(store->find(id, t0 + 1ms)->finished_at, t0);
  store->started(id);
  EXPECT_EQ(store->find(id, t0 + 1ms)->state, async_state::finished) << "a finished job does not start";
}

TEST(AsyncStore, TheCountIsBoundedAndTheOldestFinishedJobMakesRoom) {
  auto store = make_memory_store(2, 1h);
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

TEST(AsyncStore, AJobRefusedAtAdmissionIsRemovedWhenSubmitted) {
  auto store = make_memory_store(10, 1h);
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

TEST(AsyncStore, ACancelBeforeSubmitIsAppliedBySubmitted) {
  auto store = make_memory_store(10, 1h);
  const auto id = *store->create("echo", t0);
  const auto r = store->cancel(id, t0);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->cancel_requested);
  EXPECT_EQ(r->state, async_state::queued);
  EXPECT_TRUE(store->submitted(id, job_ref()).cancel_now);
}

TEST(AsyncStore, CancelReachesAQueuedJobThroughItsRef) {
  manual_clock clk;
  executor_options eo;
  eo.manual_mode = true;
  eo.clock = &clk;
  executor ex(eo);
  auto store = make_memory_store(10, 1h);
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
  EXPECT_EQ(r->state, async_state::finished) << "a queued job is cancelled on the spot";
  EXPECT_EQ(r->st, status::cancelled(cancel_cause::requested));
  ex.run_pending();
  EXPECT_FALSE(ran) << "and never runs";
  const auto again = store->cancel(id, clk.now());
  EXPECT_EQ(again->st, status::cancelled(cancel_cause::requested)) << "cancelling a finished job changes nothing";
}

TEST(AsyncStore, TransitionsOfAnUnknownIdDoNothing) {
  auto store = make_memory_store(10, 1h);
  store->started("nope");
  store->finish("nope", ended(status::ok()), t0);
  EXPECT_FALSE(store->submitted("nope", job_ref()).refused);
  EXPECT_FALSE(store->cancel("nope", t0));
  EXPECT_FALSE(store->find("nope", t0));
  EXPECT_EQ(store->size(), 0u);
}

TEST(AsyncJobJson, QueuedRunningAndFinishedJobs) {
  async_record r;
  r.id = "abc";
  r.handler = "echo";
  r.created = t0;
  r.cancel_requested = true;
  const std::string queued = async_job_json(r, t0 + 5ms);
  EXPECT_EQ(support::string_member(queued, "state"), "queued");
  EXPECT_EQ(support::number_member(queued, "age_ms"), 5.0);
  EXPECT_NE(queued.find("\"cancel_requested\": true"), std::string::npos) << queued;

  r.state = async_state::finished;
  r.st = status::expired(expiry_stage::queue);
  r.timings.queue_delay = 7ms;
  const std::string expired = async_job_json(r, t0 + 9ms);
  EXPECT_EQ(support::string_member(expired, "state"), "deadline_exceeded");
  EXPECT_EQ(support::string_member(expired, "stage"), "queue");
  EXPECT_EQ(support::number_member(expired, "queued_ms"), 7.0);
  EXPECT_FALSE(support::number_member(expired, "run_ms")) << "it never ran";

  r.st = status::ok();
  r.timings.ran = true;
  r.timings.run_time = 3ms;
  r.result = handler_result{std::string("\xff\x00", 2), "application/octet-stream"};
  const std::string ok = async_job_json(r, t0 + 9ms);
  EXPECT_EQ(support::string_member(ok, "state"), "ok");
  EXPECT_EQ(support::number_member(ok, "run_ms"), 3.0);
  EXPECT_EQ(support::string_member(ok, "result_base64"), "/wA=") << "bytes that are not UTF-8 are sent in base64";
  EXPECT_FALSE(support::string_member(ok, "result"));
}

}  // namespace
}  // namespace hourglass::server::detail
