#include "core/child_jobs.hpp"

#include <algorithm>
#include <charconv>
#include <future>

#include "core/core.hpp"
#include "core/job_input.hpp"
#include "core/job_store.hpp"

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
  if (j.in(jobs::job_state::ok)) {
    c.result = j.result;
    c.content_type = j.content_type;
  }
  return c;
}

}  // namespace hourglass::server::detail
