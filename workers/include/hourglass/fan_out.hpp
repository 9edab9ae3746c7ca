// Fan-out: N branches under one deadline, with bounded concurrency.
//
//  - all_of: runs every branch; the first failure cancels the others
//    (cause `sibling`). Returns every branch's result, in order.
//  - first_of (hedging): the first success cancels the losers (cause
//    `sibling`). Returns the winner, or the most telling failure.
//
// Parallel branches do not create time: each branch runs in a child of one
// group context, itself a child of the caller's, so no branch outlives the
// caller's deadline (less `limits.reserve`, and at most `limits.cap` each).
//
// Concurrency: at most `max_concurrency` branches run at once. The calling
// thread is one of the runners, and claims branches itself while it waits,
// so a fan-out started from inside a job cannot deadlock a small pool; the
// other runners are jobs on `ex`. A branch not yet started when the group is
// stopped is not run; its result is the group's stop status.
//
// Thread safety: branches run concurrently on several threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "hourglass/context.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/job.hpp"
#include "hourglass/run_outcome.hpp"

namespace hourglass {

struct fan_out_options {
  std::size_t max_concurrency = std::numeric_limits<std::size_t>::max();
  child_limits limits;  // each branch's share of the group's budget
};

template <class R>
using branch_fn = std::function<R(const context&)>;

namespace detail {

template <class R>
class fan_out_group {
 public:
  using T = job_value_t<R>;
  enum class mode { all_of, first_of };

  fan_out_group(const context& parent, std::vector<branch_fn<R>> branches, fan_out_options opts, mode m)
      : ctx_(parent.child()), branches_(std::move(branches)), results_(branches_.size()), opts_(opts), mode_(m) {}

  const context& ctx() const noexcept { return ctx_.get(); }
  std::size_t size() const noexcept { return branches_.size(); }

  // Claims and runs branches until none is left.
  void run_claimed() {
    for (;;) {
      const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= branches_.size()) return;
      run_branch(i);
    }
  }

  void wait_all() {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return finished_ == branches_.size(); });
  }

  std::vector<job_result<T>>& results() noexcept { return results_; }

 private:
  void run_branch(std::size_t i) {
    job_result<T>& r = results_[i];
    clock& clk = ctx_.get().get_clock();
    const time_point start = clk.now();
    r.timings.budget = remaining(ctx_.get().deadline(), start);
    r.timings.remaining_at_dispatch = r.timings.budget;
    if (ctx_.get().done()) {
      r.st = ctx_.get().stop_status();
    } else {
      context_source branch_ctx = ctx_.get().child(opts_.limits);
      r.timings.ran = true;
      run_facts facts;
      try {
        if constexpr (std::is_void_v<R>) {
          branches_[i](branch_ctx.get());
          r.result.emplace();
        } else {
          r.result.emplace(branches_[i](branch_ctx.get()));
        }
      } catch (const stopped_error& e) {
        facts.how = run_ending::stopped;
        facts.thrown = e.why();
      } catch (...) {
        facts.how = run_ending::threw;
        r.error = std::current_exception();
      }
      const time_point end = clk.now();
      r.timings.run_time = elapsed(start, end);
      // The same end-of-run rule as the executor's (run_outcome.hpp). The
      // branch context fires at the group's deadline, so its stop status
      // already says whether the deadline passed.
      facts.context = branch_ctx.get().stop_status();
      const run_verdict verdict = run_outcome(facts);
      r.st = verdict.st;
      r.timings.completed_late = verdict.completed_late;
      if (!r.st.is_ok()) r.result.reset();  // a result after the stop is not used
    }
    if (mode_ == mode::all_of ? !r.st.is_ok() : r.st.is_ok()) ctx_.cancel(cancel_cause::sibling);
    std::lock_guard lock(mu_);
    if (++finished_ == branches_.size()) done_cv_.notify_all();
  }

  context_source ctx_;
  std::vector<branch_fn<R>> branches_;
  std::vector<job_result<T>> results_;
  fan_out_options opts_;
  mode mode_;
  std::atomic<std::size_t> next_{0};
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::size_t finished_ = 0;
};

template <class R>
std::shared_ptr<fan_out_group<R>> run_group(executor& ex, const context& parent, std::vector<branch_fn<R>> branches,
                                            fan_out_options opts, typename fan_out_group<R>::mode m) {
  auto group = std::make_shared<fan_out_group<R>>(parent, std::move(branches), opts, m);
  const std::size_t runners = std::min(group->size(), std::max<std::size_t>(1, opts.max_concurrency));
  // Runners carry no deadline of their own: the branches run in the group's
  // context, and a runner that starts late finds nothing left to claim.
  job_options jo;
  jo.handler = "fan_out";
  for (std::size_t k = 1; k < runners; ++k) {
    // A helper runner that is refused or expires just leaves its share to the others.
    ex.submit(
        jo, [group] { group->run_claimed(); }, [](job_result<std::monostate>&&) noexcept {});
  }
  group->run_claimed();
  group->wait_all();
  return group;
}

}  // namespace detail

template <class R>
std::vector<job_result<job_value_t<R>>> all_of(executor& ex, const context& parent, std::vector<branch_fn<R>> branches,
                                               fan_out_options opts = {}) {
  auto group = detail::run_group<R>(ex, parent, std::move(branches), opts, detail::fan_out_group<R>::mode::all_of);
  return std::move(group->results());
}

template <class R>
job_result<job_value_t<R>> first_of(executor& ex, const context& parent, std::vector<branch_fn<R>> branches,
                                    fan_out_options opts = {}) {
  auto group = detail::run_group<R>(ex, parent, std::move(branches), opts, detail::fan_out_group<R>::mode::first_of);
  auto& results = group->results();
  // The winner; else a handler error says more than the cancellations it caused.
  for (auto& r : results) {
    if (r.ok()) return std::move(r);
  }
  for (auto& r : results) {
    if (r.st.code == outcome::error) return std::move(r);
  }
  if (results.empty()) return job_result<job_value_t<R>>{status::error(), {}, {}, {}};
  return std::move(results.front());
}

}  // namespace hourglass
