// The consumer's start check as group commit: workers that ask at the same
// time share one script call (fleet/lua/start.lua), each job still judged on
// its own, atomically with marking it running. A worker waits for its own
// answer; while one batch is at the broker the next gathers. A reader with
// free workers takes instead: the same script reads new entries and starts
// them in one call.
#include <algorithm>
#include <mutex>

#include "async_calls.hpp"
#include "batch_lane.hpp"
#include "hourglass/cancellation.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "scripts.hpp"

namespace hourglass::fleet {

struct job_queue::start_call : detail::lane_call<start_answer> {
  held_entry entry;
  std::string consumer;
  unsigned max_deliveries = 0;
  std::string token;
};

std::shared_ptr<job_queue::start_lane> job_queue::new_start_lane() {
  return std::make_shared<start_lane>(
      start_lane::limits{.max_calls = 256, .same_batch = [](const start_call& a, const start_call& b) {
                           return a.consumer == b.consumer && a.max_deliveries == b.max_deliveries;
                         }});
}

void job_queue::async_start(const context& ctx, const held_entry& e, std::string_view consumer, unsigned max_deliveries,
                            std::string_view token, answer_fn<start_answer> done) {
  auto call = std::make_shared<start_call>();
  call->ctx = ctx;
  call->entry = e;
  call->consumer = std::string(consumer);
  call->max_deliveries = max_deliveries;
  call->token = std::string(token);
  call->done = std::move(done);
  detail::answer_when_stopped(call);
  if (auto batch = start_lane_->push({std::move(call)})) send_starts(std::move(*batch));
}

void job_queue::send_starts(std::vector<std::shared_ptr<start_call>> batch) {
  std::erase_if(batch, [](const auto& c) { return c->answered.load(); });
  if (batch.empty()) {
    if (auto next = start_lane_->next()) send_starts(std::move(*next));
    return;
  }
  const start_call& first = *batch.front();
  std::vector<detail::start_item> items;
  items.reserve(batch.size());
  for (const auto& c : batch) items.push_back({c->entry.entry, c->entry.job_id, c->token});
  async_eval(context(), detail::encode_start(keys(), options_, first.consumer, first.max_deliveries, items),
             [this, alive = alive_, batch](async_answer<redis_reply> r) {
               // Held while the queue is used: a caller answered early may have destroyed it.
               const std::lock_guard lock(alive->mu);
               std::exception_ptr error = r.error;
               detail::start_batch_reply b;
               if (!error) {
                 try {
                   b = detail::decode_start(r.value, batch.size());
                 } catch (...) {
                   error = std::current_exception();
                 }
               }
               if (!error && !alive->alive) {
                 error = std::make_exception_ptr(redis_unavailable("redis: the queue was destroyed during the call"));
               }
               for (std::size_t i = 0; i < batch.size(); ++i) {
                 batch[i]->finish(error ? detail::failed<start_answer>(detail::own_copy(error))
                                        : detail::answer(std::move(b.jobs[i])));
               }
               if (!alive->alive) return;
               if (auto next = start_lane_->next()) send_starts(std::move(*next));
             });
}

job_queue::taken job_queue::take(const context& ctx, std::string_view consumer, std::size_t count,
                                 unsigned max_deliveries, std::string_view lease_token, bool judge_late) {
  return detail::wait_for<taken>([&](answer_fn<taken> done) {
    async_take(ctx, consumer, count, max_deliveries, lease_token, judge_late, std::move(done));
  });
}

void job_queue::async_take(const context& ctx, std::string_view consumer, std::size_t count, unsigned max_deliveries,
                           std::string_view lease_token, bool judge_late, answer_fn<taken> done) {
  count = std::max<std::size_t>(count, 1);
  async_eval(ctx, detail::encode_take(keys(), options_, consumer, max_deliveries, count, lease_token, judge_late),
             [count, done = std::move(done)](async_answer<redis_reply> r) {
               if (r.error) return done(detail::failed<taken>(r.error));
               taken t;
               try {
                 t = detail::decode_take(r.value, count);
               } catch (...) {  // a reply we cannot read
                 return done(detail::failed<taken>(std::current_exception()));
               }
               done(detail::answer(std::move(t)));
             });
}

job_queue::start_answer job_queue::start(const context& ctx, const held_entry& e, std::string_view consumer,
                                         unsigned max_deliveries, std::string_view token) {
  return detail::wait_for<start_answer>(
      [&](answer_fn<start_answer> done) { async_start(ctx, e, consumer, max_deliveries, token, std::move(done)); });
}

}  // namespace hourglass::fleet
