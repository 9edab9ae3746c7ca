#include "worker_watch.hpp"

namespace hourglass {

namespace {
void fire_watch(const std::shared_ptr<worker_watch>& w, clock& clk, std::uint64_t generation) noexcept;
}  // namespace

void arm_watch(const std::shared_ptr<worker_watch>& w, clock& clk, time_point at) {
  if (w->closed) return;
  const timer_id old = w->timer;
  const std::uint64_t generation = ++w->generation;
  w->timer = clk.schedule(at, [w, &clk, generation]() noexcept { fire_watch(w, clk, generation); });
  w->armed_at = at;
  if (old) clk.cancel(old);
}

void disarm_watch(worker_watch& w, clock& clk) noexcept {
  if (w.timer) clk.cancel(w.timer);
  w.timer = {};
  w.armed_at = never;
  ++w.generation;
}

namespace {
void fire_watch(const std::shared_ptr<worker_watch>& w, clock& clk, std::uint64_t generation) noexcept {
  std::lock_guard lock(w->mu);
  if (generation != w->generation) return;  // re-armed since: that timer is the watch now
  w->timer = {};
  w->armed_at = never;
  detail::job_record* rec = w->current;
  if (rec == nullptr || !rec->ctx) return;  // idle: the next job with a deadline arms it
  const time_point deadline = rec->ctx->get().deadline();
  if (deadline == never) return;
  if (deadline <= clk.now()) {
    rec->ctx->expire();
  } else {
    try {
      arm_watch(w, clk, deadline);
    } catch (...) {  // out of memory for the timer: the job still sees its deadline in done()
    }
  }
}
}  // namespace

}  // namespace hourglass
