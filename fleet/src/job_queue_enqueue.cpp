// Enqueue as group commit: a call joins the lane; when no batch is at the
// broker it goes at once, otherwise with every call that arrived meanwhile,
// in the next one. One script call per batch (fleet/lua/enqueue.lua) adds
// and admits each job on its own, against the fleet's counts read in the
// same atomic step: one round trip per job at low rates, one per batch at
// high ones, and one fsync per batch under appendfsync always.
//
// A caller's context bounds its own wait: when it stops first the caller is
// answered stopped_error at once (unconfirmed, as with any broken call), and
// the batch's answer for its job, if it was sent, is dropped.
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "async_calls.hpp"
#include "batch_lane.hpp"
#include "hourglass/cancellation.hpp"
#include "hourglass/fleet/freshness.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "scripts.hpp"

namespace hourglass::fleet {

namespace {

using detail::answer;
using detail::failed;
using detail::own_copy;

}  // namespace

struct job_queue::enqueue_call : detail::lane_call<enqueued> {
  job_spec job;
  time_point began{};
  std::string id;
};

std::shared_ptr<job_queue::enqueue_lane> job_queue::new_enqueue_lane() {
  // Redis runs a script alone: a batch holds it for about 10 us a job. And a
  // payload-heavy batch is one large write. A second batch of at least 64
  // jobs goes while one is at the broker: it is built and answered here
  // while Redis runs the other (with one at a time, a daemon's HTTP bulk
  // enqueue ran at 0.6x the rate).
  return std::make_shared<enqueue_lane>(
      enqueue_lane::limits{.max_calls = 256,
                           .max_in_flight = 2,
                           .overlap_at = 64,
                           .max_bytes = 4 * 1024 * 1024,
                           .bytes = [](const enqueue_call& c) { return c.job.payload.size(); }});
}

void job_queue::async_enqueue(const context& ctx, job_spec job, answer_fn<enqueued> done) {
  auto call = std::make_shared<enqueue_call>();
  call->ctx = ctx;
  call->job = std::move(job);
  call->done = std::move(done);
  submit_enqueues({std::move(call)});
}

void job_queue::async_enqueue_bulk(const context& ctx, std::vector<job_spec> jobs,
                                   std::function<void(std::vector<async_answer<enqueued>>)> done) {
  struct gather {
    std::mutex mu;
    std::vector<async_answer<enqueued>> answers;
    std::size_t left = 0;
    std::function<void(std::vector<async_answer<enqueued>>)> done;
  };
  if (jobs.empty()) return done({});
  auto g = std::make_shared<gather>();
  g->answers.resize(jobs.size());
  g->left = jobs.size();
  g->done = std::move(done);
  std::vector<std::shared_ptr<enqueue_call>> calls;
  calls.reserve(jobs.size());
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    auto call = std::make_shared<enqueue_call>();
    call->ctx = ctx;
    call->job = std::move(jobs[i]);
    call->done = [g, i](async_answer<enqueued> a) {
      std::unique_lock lock(g->mu);
      g->answers[i] = std::move(a);
      if (--g->left != 0) return;
      lock.unlock();
      g->done(std::move(g->answers));
    };
    calls.push_back(std::move(call));
  }
  submit_enqueues(std::move(calls));
}

void job_queue::submit_enqueues(std::vector<std::shared_ptr<enqueue_call>> calls) {
  hourglass::clock& clk = options_.clock != nullptr ? *options_.clock : real_clock();
  for (auto& call : calls) {
    call->began = clk.now();
    call->id = new_job_id();
    // The id names its shard, its last two hex digits: a queue of one shard
    // writes 00 too, so its jobs are still found (in shard 0, whose keys do
    // not change) once --queue-shards grows.
    static constexpr char hex[] = "0123456789abcdef";
    call->id[30] = hex[options_.shard >> 4];
    call->id[31] = hex[options_.shard & 0xf];
    detail::answer_when_stopped(call);
  }
  if (auto batch = enqueue_lane_->push(std::move(calls))) send_enqueues(std::move(*batch), false);
}

void job_queue::next_enqueues() {
  if (auto batch = enqueue_lane_->next()) send_enqueues(std::move(*batch), false);
}

void job_queue::send_enqueues(std::vector<std::shared_ptr<enqueue_call>> batch, bool group_ensured) {
  // Calls stopped while they waited are answered already: not sent.
  std::erase_if(batch, [](const auto& c) { return c->answered.load(); });
  if (batch.empty()) return next_enqueues();
  hourglass::clock& clk = options_.clock != nullptr ? *options_.clock : real_clock();
  const time_point now = clk.now();
  // Sent again after `nostream`, part of the batch may be written already
  // (delayed jobs): a pause meanwhile must not refuse what will run.
  const bool refuse_paused = options_.refuse_while_paused && !group_ensured;
  std::vector<detail::enqueue_item> items;
  items.reserve(batch.size());
  for (const auto& c : batch) {
    // Its wait for this batch, counted twice: once spent, once for the trip ahead.
    const duration waited = elapsed(c->began, now);
    items.push_back(
        {c->id, &c->job, freshness_at_entry(c->job.freshness, waited), freshness_at_entry(c->job.deadline, waited)});
  }
  // A completion holds the queue's liveness lock: a caller answered early
  // may have destroyed the queue, and then its calls are only answered.
  const auto fail_all = [this, batch](const std::exception_ptr& e) {
    for (const auto& c : batch) c->finish(failed<enqueued>(own_copy(e)));
    next_enqueues();
  };
  async_eval(
      context(), detail::encode_enqueue(keys(), options_, refuse_paused, items),
      [this, alive = alive_, batch, group_ensured, fail_all](async_answer<redis_reply> r) {
        const std::lock_guard lock(alive->mu);
        if (!alive->alive) {
          const std::exception_ptr gone =
              r.error ? r.error
                      : std::make_exception_ptr(redis_unavailable("redis: the queue was destroyed during the call"));
          for (const auto& c : batch) c->finish(failed<enqueued>(own_copy(gone)));
          return;
        }
        if (r.error) return fail_all(r.error);
        detail::enqueue_batch_reply b;
        try {
          b = detail::decode_enqueue(r.value, batch.size());
          if (b.nostream && group_ensured) detail::broker_error("enqueue", r.value);
        } catch (...) {
          return fail_all(std::current_exception());
        }
        if (b.nostream) {
          // The stream was deleted (FLUSHALL, a new broker): both again, once.
          return async_ensure_group(context(), [this, alive, batch, fail_all](async_answer<bool> made) {
            const std::lock_guard again(alive->mu);
            if (!alive->alive) {
              for (const auto& c : batch) c->finish(failed<enqueued>(own_copy(made.error)));
              return;
            }
            if (made.error) return fail_all(made.error);
            send_enqueues(batch, true);
          });
        }
        if (b.paused) {
          for (const auto& c : batch) c->finish(answer(enqueued{enqueued::kind::paused, {}, {}, false}));
          return next_enqueues();
        }
        using added = detail::enqueue_reply::kind;
        for (std::size_t i = 0; i < batch.size(); ++i) {
          detail::enqueue_reply& j = b.jobs[i];
          enqueued out;
          out.verdict = j.verdict == added::duplicate           ? enqueued::kind::duplicate
                        : j.verdict == added::refused           ? enqueued::kind::refused
                        : j.verdict == added::no_parent         ? enqueued::kind::no_parent
                        : j.verdict == added::parent_finished   ? enqueued::kind::parent_finished
                        : j.verdict == added::too_deep          ? enqueued::kind::too_deep
                        : j.verdict == added::too_many_children ? enqueued::kind::too_many_children
                                                                : enqueued::kind::accepted;
          out.id = j.verdict == added::duplicate  ? std::move(j.id)
                   : j.verdict == added::accepted ? batch[i]->id
                                                  : std::string();
          out.predicted_wait = j.predicted_wait;
          out.scheduled = j.verdict == added::accepted && j.id.empty();  // no stream entry yet
          batch[i]->finish(answer(std::move(out)));
        }
        next_enqueues();
      },
      /*replicated=*/true);
}

enqueued job_queue::enqueue(const context& ctx, const job_spec& job) {
  return detail::wait_for<enqueued>([&](answer_fn<enqueued> done) { async_enqueue(ctx, job, std::move(done)); });
}

std::vector<async_answer<enqueued>> job_queue::enqueue_bulk(const context& ctx, std::vector<job_spec> jobs) {
  // Never an error of its own: each job's answer carries its own.
  using answers = std::vector<async_answer<enqueued>>;
  return detail::wait_for<answers>([&](answer_fn<answers> done) {
    async_enqueue_bulk(ctx, std::move(jobs), [done = std::move(done)](answers a) { done(answer(std::move(a))); });
  });
}

}  // namespace hourglass::fleet
