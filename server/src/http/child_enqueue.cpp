#include "http/child_enqueue.hpp"

#include <future>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/child_jobs.hpp"
#include "core/core.hpp"
#include "core/job_input.hpp"
#include "core/job_store.hpp"
#include "http/job_endpoints.hpp"

namespace hourglass::server::detail {

namespace {

// The child as a request of its own would bring it.
std::shared_ptr<job_input> child_input(const handler_entry& e, const child_job& job, std::string_view parent) {
  auto in = std::make_shared<job_input>();
  in->content_type = job.content_type;
  if (!job.idempotency_key.empty()) in->idempotency_key = job.idempotency_key;
  in->body = job.body;
  in->entry = &e;
  in->async = true;
  in->budget = e.run_limit;
  in->idle_limit = e.idle_limit;
  in->remote = parent.empty() ? "child" : "child of " + std::string(parent);
  return in;
}

child_answer refused(status st, std::string message) {
  child_answer a;
  a.verdict = child_answer::kind::refused;
  a.refusal = st;
  a.message = std::move(message);
  return a;
}

std::string ms_text(duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

child_answer enqueue_child(core& c, const context& ctx, const request_view& parent, child_job job) {
  const handler_entry* e = c.find_handler(job.handler);
  if (e == nullptr) return refused(status::invalid(), "no handler '" + job.handler + "'");
  if (c.draining.load()) return refused(status::rejected(reject_reason::shutting_down), "the daemon is draining");
  const duration remaining = ctx.done() ? duration::zero() : ctx.remaining();
  const child_terms t = cut_to_parent(job, remaining, c.opts.call_reserve, e->min_budget);
  if (!t.fits) {
    const status st = status::expired(expiry_stage::admission);
    child_answer a = refused(st, fmt::format("the parent has {} left after its reserve, not more than {}'s minimum "
                                             "budget {}",
                                             ms_text(t.left), e->name, ms_text(e->min_budget)));
    c.book_refusal({*e, "async", st, t.left, a.message}, 504);
    return a;
  }
  new_job child;
  child.in = child_input(*e, job, parent.job_id);
  child.headers_at = c.clk.now();
  child.freshness = t.freshness;
  child.deadline = t.deadline == duration::max() ? never : saturating_add(child.headers_at, t.deadline);
  child.retry = e->retry;
  child.parent = std::string(parent.job_id);
  std::promise<created> answer;
  c.store->create(child, [&answer](created r) { answer.set_value(std::move(r)); });
  const created r = answer.get_future().get();
  child_answer a;
  switch (r.verdict) {
    case created::kind::accepted:
    case created::kind::duplicate:
      a.verdict = r.verdict == created::kind::accepted ? child_answer::kind::accepted : child_answer::kind::duplicate;
      a.id = r.job.id;
      a.deadline = t.deadline;
      a.freshness = t.freshness;
      return a;
    case created::kind::invalid: return refused(status::invalid(), r.message);
    case created::kind::refused: break;
  }
  (void)response_of(c, child, r);  // booked as any refused async job: counted and logged
  return refused(r.refusal, r.note.empty() ? std::string(to_string(r.refusal.code)) : r.note);
}

}  // namespace hourglass::server::detail
