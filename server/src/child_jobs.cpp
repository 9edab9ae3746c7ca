#include "child_jobs.hpp"

#include <algorithm>
#include <charconv>
#include <future>

#include <fmt/format.h>

#include "core.hpp"
#include "job_endpoints.hpp"
#include "job_input.hpp"
#include "job_store.hpp"

namespace hourglass::server::detail {

child_terms cut_to_parent(const child_job& asked, duration parent_remaining, duration reserve,
                          duration min_budget) noexcept {
  child_terms t;
  t.freshness = asked.freshness;
  t.deadline = asked.deadline;
  if (parent_remaining == duration::max()) return t;  // no deadline above it
  t.left = parent_remaining > reserve ? parent_remaining - reserve : duration::zero();
  t.freshness = std::min(t.freshness, t.left);
  t.deadline = std::min(t.deadline, t.left);
  t.fits = t.left > min_budget;
  return t;
}

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
    (void)c.refuse({*e, "async", st, t.left, a.message}, error_response(504, "deadline_exceeded", a.message));
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

std::optional<parent_problem> family_bound(std::size_t parent_depth, std::size_t children,
                                           const family_limits& limits) noexcept {
  if (parent_depth >= limits.max_depth) return parent_problem::too_deep;
  if (children >= limits.max_children) return parent_problem::too_many_children;
  return std::nullopt;
}

bool fan_in_satisfied(const fan_in& f, std::size_t total, std::size_t done, std::size_t ok) noexcept {
  switch (f.until) {
    case fan_in::rule::all: return done >= total;
    case fan_in::rule::first_n: return done >= std::min(f.n, total);
    case fan_in::rule::first_success: return ok >= 1 || done >= total;
  }
  return true;
}

duration wake_keep(const fan_in& f, duration min_budget) noexcept {
  return f.keep > duration::zero() ? f.keep : min_budget;
}

time_point wake_time(time_point deadline, const fan_in& f, duration min_budget) noexcept {
  if (deadline == time_point::max()) return deadline;
  return saturating_sub(deadline, wake_keep(f, min_budget));
}

std::string fan_in_text(const fan_in& f) {
  switch (f.until) {
    case fan_in::rule::all: return "all";
    case fan_in::rule::first_n: return "first:" + std::to_string(f.n);
    case fan_in::rule::first_success: return "first_success";
  }
  return "all";
}

std::optional<fan_in> parse_fan_in(std::string_view text) {
  if (text == "all") return fan_in::all();
  if (text == "first_success") return fan_in::first_success();
  constexpr std::string_view first = "first:";
  if (!text.starts_with(first)) return std::nullopt;
  std::size_t n = 0;
  const std::string_view digits = text.substr(first.size());
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc{} || end != digits.data() + digits.size() || digits.empty()) return std::nullopt;
  return fan_in::first(n);
}

namespace {

// The store's answer, waited for (a blocking read, from a worker thread).
found found_now(core& c, const std::string& id, bool cancel) {
  std::promise<found> answer;
  auto put = [&answer](found f) { answer.set_value(std::move(f)); };
  if (cancel) {
    c.store->cancel(id, cancel_cause::parent, put);
  } else {
    c.store->find(id, put);
  }
  return answer.get_future().get();
}

}  // namespace

std::vector<child_outcome> children_at_wake(core& c, const std::string& parent) {
  std::vector<child_outcome> out;
  const found p = found_now(c, parent, false);
  if (p.verdict != found::kind::found) return out;
  for (const std::string& id : p.job.children) {
    const found f = found_now(c, id, false);
    if (f.verdict != found::kind::found) {
      out.push_back({id, "", f.verdict == found::kind::not_found ? "gone" : "unknown"});
      continue;
    }
    out.push_back(outcome_of_child(f.job));  // as found now: a child marked at the wake may have stopped already
    if (!f.job.finished()) (void)found_now(c, id, true);
  }
  return out;
}

child_outcome outcome_of_child(const job_view& j) {
  child_outcome c;
  c.id = j.id;
  c.handler = j.handler;
  c.state = j.state;
  if (!j.stage.empty()) c.detail = j.stage;
  if (!j.cause.empty()) c.detail = j.cause;
  if (!j.reason.empty()) c.detail = j.reason;
  if (!j.error.empty()) c.detail = j.error;
  c.http_status = j.http_status.value_or(0);
  if (j.state == "ok") {
    c.result = j.result;
    c.content_type = j.content_type;
  }
  return c;
}

}  // namespace hourglass::server::detail
